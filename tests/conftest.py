"""Shared fixtures: every layer test runs on each available backend.

``backend_name`` runs a test on "numpy", on "strict" (NumPy arrays that
refuse to mix with host arrays, as CuPy's do) and on "cupy" where CuPy and a
GPU are present; elsewhere the CuPy leg is skipped with the reason.

Hypothesis draws its examples from a fixed seed (``derandomize``): every run
of the suite, in CI and on a laptop, tries the same examples, so a failure
can be reproduced and a run cannot pass or fail by the luck of its draw.
"""

import numpy as np
import pytest
from hypothesis import settings

import minitrans
from minitrans.core import backend

settings.register_profile("minitrans", derandomize=True)
settings.load_profile("minitrans")


def _cupy_skip_reason():
    try:
        with backend.using("cupy"):
            pass
    except backend.BackendUnavailableError as error:
        return str(error)
    return None


_CUPY_SKIP = _cupy_skip_reason()
BACKEND_PARAMS = [
    "numpy",
    "strict",
    pytest.param(
        "cupy", marks=pytest.mark.skipif(_CUPY_SKIP is not None, reason=f"CuPy leg: {_CUPY_SKIP}")
    ),
]


def pytest_report_header(config):
    cupy = "runs" if _CUPY_SKIP is None else f"skipped: {_CUPY_SKIP}"
    return [f"minitrans backends: numpy, strict; cupy leg {cupy}"]


@pytest.fixture(params=BACKEND_PARAMS)
def backend_name(request):
    """The current backend, in the default float32."""
    with minitrans.using(request.param, dtype="float32"):
        yield request.param


@pytest.fixture
def float64(backend_name):
    """The current backend in float64, for gradient checks."""
    with minitrans.using(dtype="float64"):
        yield backend_name


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def randn(rng):
    """randn(*shape): random normal array on the current backend and dtype."""

    def make(*shape):
        return backend.from_host(rng.standard_normal(shape))

    return make


@pytest.fixture
def device():
    """device(host_values): a host list/array moved to the current backend."""

    def move(values, dtype=None):
        return backend.to_device(np.asarray(values), dtype=dtype)

    return move

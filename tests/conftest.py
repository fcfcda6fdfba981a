"""Shared fixtures: every layer test runs on each available backend.

``backend_name`` runs a test on "numpy", on "strict" (NumPy arrays that
refuse to mix with host arrays, as CuPy's do) and on "cupy" where CuPy and a
GPU are present; elsewhere the CuPy leg is skipped with the reason. Each leg
carries a marker named after its backend, so ``pytest -m cupy`` runs the
CuPy leg alone (``benchmarks/device_check.py`` does, on a GPU).

``MINITRANS_TEST_TIMEOUT=SECONDS`` fails any test whose call runs longer
(unset: no limit). A GPU check runs unattended with a budget, and a test
that hangs must not take the rest of the budget with it.

Hypothesis draws its examples from a fixed seed (``derandomize``): every run
of the suite, in CI and on a laptop, tries the same examples, so a failure
can be reproduced and a run cannot pass or fail by the luck of its draw.
"""

import os
import signal
import threading

import numpy as np
import pytest
from hypothesis import settings

import minitrans
from minitrans.core import backend

settings.register_profile("minitrans", derandomize=True)
settings.load_profile("minitrans")

TIMEOUT_VARIABLE = "MINITRANS_TEST_TIMEOUT"
# Tests that use the CuPy backend where it is present without taking the
# backend_name fixture (they loop over backend.available_backends()): part
# of the CuPy leg too, though they run on NumPy and strict everywhere.
USE_CUPY_WHERE_PRESENT = {
    "tests/test_backend.py::test_same_seed_gives_the_same_weights_on_every_backend",
}


def _cupy_skip_reason():
    try:
        with backend.using("cupy"):
            pass
    except backend.BackendUnavailableError as error:
        return str(error)
    return None


_CUPY_SKIP = _cupy_skip_reason()
BACKEND_PARAMS = [
    pytest.param("numpy", marks=pytest.mark.numpy),
    pytest.param("strict", marks=pytest.mark.strict),
    pytest.param(
        "cupy",
        marks=[
            pytest.mark.cupy,
            pytest.mark.skipif(_CUPY_SKIP is not None, reason=f"CuPy leg: {_CUPY_SKIP}"),
        ],
    ),
]


def pytest_configure(config):
    """The backend markers, registered here so that -m needs no setup.cfg,
    and the time limit of each test, read (and checked) once."""
    _time_limit["seconds"] = time_limit_seconds()
    for name, what in (("numpy", "host NumPy arrays"),
                       ("strict", "NumPy arrays that refuse host arrays, as CuPy's do"),
                       ("cupy", "CuPy on a GPU; skipped without one")):
        config.addinivalue_line(
            "markers", f"{name}: the {name} leg of a test ({what}); select with -m {name}"
        )


def pytest_collection_modifyitems(items):
    for item in items:
        if item.nodeid in USE_CUPY_WHERE_PRESENT:
            item.add_marker(pytest.mark.cupy)


def pytest_report_header(config):
    cupy = "runs" if _CUPY_SKIP is None else f"skipped: {_CUPY_SKIP}"
    limit = _time_limit["seconds"]
    timeout = f"; each test's call limited to {limit:g} s ({TIMEOUT_VARIABLE})" if limit else ""
    return [f"minitrans backends: numpy, strict; cupy leg {cupy}{timeout}"]


# ------------------------------------------------------------ time limit

_time_limit = {"seconds": None}  # MINITRANS_TEST_TIMEOUT, read once by pytest_configure


def time_limit_seconds():
    """Seconds from MINITRANS_TEST_TIMEOUT, or None when it is unset or empty."""
    text = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0:  # NaN too
        raise pytest.UsageError(f"{TIMEOUT_VARIABLE}: expected seconds > 0, got {text!r}")
    return seconds


def _alarm_works():
    """SIGALRM exists on Unix only, and Python runs its handler in the main
    thread only: elsewhere the limit cannot be kept, and is not set."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Run the test's call under an alarm of MINITRANS_TEST_TIMEOUT seconds:
    when it rings, the test fails with a message that names the limit. A
    test stuck inside C code (a GPU that never answers) is stopped only when
    it returns to Python; the device check kills its whole run then."""
    limit = _time_limit["seconds"]
    if limit is None or not _alarm_works():
        return (yield)

    def ring(signum, frame):
        pytest.fail(f"ran longer than the time limit of {limit:g} s per test "
                    f"({TIMEOUT_VARIABLE})", pytrace=False)

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        return (yield)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ------------------------------------------------------------ fixtures


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

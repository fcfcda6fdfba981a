"""What every test folder shares: every layer test runs on each available
backend, and the helpers that tests in more than one folder use
(``warnings_as_errors``, ``load_module``, ``tiny_trainer``; import them with
``from tests.conftest import ...``). Each folder's own helpers are in its
conftest.py: tests/library (gradient checks, error names), tests/cli (bad
inputs and files), tests/course (exercise checkers).

``backend_name`` runs a test on "numpy", on "strict" (NumPy arrays that
refuse to mix with host arrays, as CuPy's do) and on "cupy" where CuPy and a
GPU are present; elsewhere the CuPy leg is skipped with the reason. Each leg
carries a marker named after its backend, so ``pytest -m cupy`` runs the
CuPy leg alone (``benchmarks/device/check.py`` does, on a GPU).

``MINITRANS_TEST_TIMEOUT=SECONDS`` fails any test whose call runs longer
(unset: no limit). A GPU check runs unattended with a budget, and a test
that hangs must not take the rest of the budget with it.

Hypothesis draws its examples from a fixed seed (``derandomize``): every run
of the suite, in CI and on a laptop, tries the same examples, so a failure
can be reproduced and a run cannot pass or fail by the luck of its draw.
"""

import importlib.util
import os
import signal
import threading
import warnings
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import settings

import minitrans
from minitrans.core import backend
from minitrans.training import experiment
from minitrans.training.train_config import TrainConfig

settings.register_profile("minitrans", derandomize=True)
settings.load_profile("minitrans")

TIMEOUT_VARIABLE = "MINITRANS_TEST_TIMEOUT"
# Tests that use the CuPy backend where it is present without taking the
# backend_name fixture (they loop over backend.available_backends()): part
# of the CuPy leg too, though they run on NumPy and strict everywhere.
USE_CUPY_WHERE_PRESENT = {
    "tests/library/test_backend.py::test_same_seed_gives_the_same_weights_on_every_backend",
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


# ------------------------------------------------------ helpers of every folder


@contextmanager
def warnings_as_errors():
    """Every warning inside the block is an error, but one that OpenBLAS can
    raise for nothing.

    Some of OpenBLAS's kernels leave the processor's invalid-operation flag
    set after a product of finite numbers, and NumPy, which reads that flag
    after every ufunc, then warns "invalid value encountered in matmul" (the
    symptom of numpy/numpy#24067 and OpenMathLib/OpenBLAS#1924). Our CI met
    it once, in a layer norm's mean of five float32 numbers near 1e-4, and
    we could not make it happen again on purpose. Ignoring that one message
    loses nothing: a real invalid operation in a product (inf * 0, inf - inf)
    leaves a NaN in the result, which every test using this block checks
    for, and an overflow in a
    product is still an error (``tests/project/test_helpers.py`` shows both).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings(
            "ignore", message="invalid value encountered in matmul", category=RuntimeWarning
        )
        yield


def load_module(path, name):
    """The Python file at ``path`` imported as a module called ``name``: the
    lessons' builder and solutions are scripts, not part of the package."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TINY_SIZES = {"d_model": 16, "h": 2, "N": 1, "d_ff": 32, "dropout": 0.1}


def tiny_trainer(out_dir, task="copy", log=lambda message: None, **settings):
    """A trainer of a tiny model writing into ``out_dir``: 6 steps, an
    evaluation every 3 on 20 held-out pairs, never stopping early unless
    ``settings`` (TrainConfig fields) ask."""
    values = dict(steps=6, batch_size=16, warmup=4, eval_every=3, eval_pairs=20,
                  target_exact_match=1.1, out_dir=str(out_dir))
    config = TrainConfig(task=task, **{**values, **settings})
    return experiment.new_trainer(config, TINY_SIZES, progress=False, log=log)

"""The one place that chooses the array library.

Every layer asks this module for its array namespace (``get_xp()``) and its
floating-point dtype (``get_dtype()``) instead of importing NumPy or CuPy, so
the same code runs on the CPU and on a GPU.

Three backends are available:

``"numpy"``   the default, arrays live in host memory.
``"cupy"``    arrays live on a CUDA GPU (``pip install "minitrans[gpu-cuda12]"`` or
              ``"minitrans[gpu-cuda13]"``; ``minitrans doctor --device gpu`` says which).
``"strict"``  NumPy underneath, but its arrays refuse to mix with plain NumPy
              arrays, exactly as CuPy's do. The tests run on it so that a
              host/device leak (a mask built with ``numpy``) fails on a CPU.

Choose one with ``minitrans.use("cupy")``, or before Python starts with the
environment variables ``MINITRANS_BACKEND`` and ``MINITRANS_DTYPE``.
``using(...)`` switches temporarily::

    with minitrans.using("numpy", dtype="float64"):
        ...  # gradient checks run here

``kernels="reference"`` (or ``MINITRANS_KERNELS``) chooses the kernel set as
well: see ``minitrans.core.kernels``.

Random initial weights are always drawn on the host with a seeded NumPy
generator and then moved to the device, so a seed gives the same weights on
every backend.
"""

import contextlib
import os

import numpy as np

from minitrans.core import kernels as _kernels
from minitrans.core import value_checks

BACKENDS = ("numpy", "cupy", "strict")
DTYPES = ("float32", "float64")


class BackendUnavailableError(RuntimeError):
    """Raised when the requested backend cannot run on this machine."""


_state = {}  # name, xp, dtype; filled from the environment on first use


def _ensure_initialised():
    """Read MINITRANS_BACKEND, MINITRANS_DTYPE and MINITRANS_KERNELS the first
    time they matter."""
    if _state:
        return
    name = os.environ.get("MINITRANS_BACKEND", "numpy") or "numpy"
    dtype = os.environ.get("MINITRANS_DTYPE", "float32") or "float32"
    value_checks.check_choice("MINITRANS_BACKEND", name, BACKENDS)
    value_checks.check_choice("MINITRANS_DTYPE", dtype, DTYPES)
    _state.update(name=name, xp=_load(name), dtype=np.dtype(dtype))
    _kernels.active()  # reads and checks MINITRANS_KERNELS


def _load_cupy():
    # One CuPy package per CUDA major version, so the hint names both extras;
    # `minitrans doctor --device gpu` works out which one, or why CUDA fails.
    try:
        import cupy
    except ImportError as error:
        raise BackendUnavailableError(
            "backend 'cupy' needs CuPy, which is not installed "
            f"({error}); install it with: pip install \"minitrans[gpu-cuda12]\" or "
            "\"minitrans[gpu-cuda13]\", as the \"CUDA Version\" nvidia-smi prints is 12.x "
            "or 13.x (minitrans doctor --device gpu says which)"
        ) from None
    try:
        device_count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # CUDA raises its own error types
        raise BackendUnavailableError(
            "backend 'cupy': CuPy is installed but no CUDA device was found "
            f"({error}); run on a machine with an NVIDIA GPU and driver, or "
            "use the 'numpy' backend (minitrans doctor --device gpu says why)"
        ) from None
    if device_count == 0:
        raise BackendUnavailableError(
            "backend 'cupy': CuPy is installed but no CUDA device was found; "
            "run on a machine with an NVIDIA GPU, or use the 'numpy' backend"
        )
    return cupy


def _load(name):
    value_checks.check_choice("backend", name, BACKENDS)
    if name == "numpy":
        return np
    if name == "cupy":
        return _load_cupy()
    if name == "strict":
        from minitrans.core import strict as _strict

        return _strict.namespace


def _check_dtype(dtype):
    name = np.dtype(dtype).name if _is_dtype_like(dtype) else dtype
    value_checks.check_choice("dtype", name, DTYPES)
    return np.dtype(name)


def _is_dtype_like(dtype):
    try:
        np.dtype(dtype)
    except TypeError:
        return False
    return True


def use(name=None, dtype=None, kernels=None):
    """Select the backend (``"numpy"``, ``"cupy"``, ``"strict"``), the dtype
    and/or the kernel set (``"fast"``, ``"reference"``).

    Arrays and layers created before the switch stay where they are; move them
    with ``to_device``.
    """
    _ensure_initialised()
    if kernels is not None:
        _kernels.use(kernels)
    if name is not None:
        value_checks.check_choice("backend", name, BACKENDS)
        _state["xp"] = _load(name)
        _state["name"] = name
    if dtype is not None:
        _state["dtype"] = _check_dtype(dtype)


def set_dtype(dtype):
    """Set the default floating-point dtype: ``"float32"`` or ``"float64"``."""
    use(dtype=dtype)


@contextlib.contextmanager
def using(name=None, dtype=None, kernels=None):
    """Temporarily switch backend, dtype and/or kernel set inside a ``with`` block."""
    _ensure_initialised()
    saved, saved_kernels = dict(_state), _kernels.active()
    try:
        use(name, dtype, kernels)
        yield
    finally:
        _state.update(saved)
        _kernels.use(saved_kernels)


def get_xp():
    """The array namespace of the current backend (``numpy``-like module)."""
    _ensure_initialised()
    return _state["xp"]


def get_dtype():
    """The default floating-point dtype of new parameters and arrays."""
    _ensure_initialised()
    return _state["dtype"]


def backend_name():
    """The name of the current backend: "numpy", "cupy" or "strict"."""
    _ensure_initialised()
    return _state["name"]


def on_device():
    """True where arrays live apart from the host: on CuPy, and on the strict
    backend, which stands in for it in the tests. Code that chooses a path
    for a GPU (one worker, no host-side decision per layer) asks this rather
    than for "cupy", so that the tests run that path on a CPU too."""
    return backend_name() in ("cupy", "strict")


def device_blas():
    """CuPy's BLAS module (``cupy.cublas``: gemm, gemv with an output to add
    into) on the cupy backend, None on the others."""
    if backend_name() != "cupy":
        return None
    import cupy.cublas

    return cupy.cublas


def overflow_ignored():
    """A context in which an element-wise overflow (exp of a large number)
    gives inf without a warning, for code that checks the result itself:
    NumPy's ``errstate`` on the CPU (per thread in NumPy 2, so workers do
    not disturb each other); CuPy has no ``errstate`` and does not warn."""
    return np.errstate(over="ignore") if not on_device() else contextlib.nullcontext()


def available_backends():
    """The backends that can run here, in the order of ``BACKENDS``."""
    names = []
    for name in BACKENDS:
        try:
            _load(name)
        except BackendUnavailableError:
            continue
        names.append(name)
    return names


def array_type():
    """The array class of the current backend (``numpy.ndarray``, ...)."""
    return get_xp().ndarray


def is_array(value):
    """True when ``value`` is an array of the current backend."""
    return isinstance(value, array_type())


# ---------------------------------------------------------------- transfers


def to_numpy(value):
    """Copy an array (of any backend) to a host ``numpy.ndarray``.

    A ``Module`` is moved in place, all its parameters, gradients and buffers,
    and returned.
    """
    if _is_module(value):
        return value.apply_to_arrays(to_numpy)
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "get"):  # cupy.ndarray and the strict backend's arrays
        return value.get()
    return np.asarray(value)


def to_device(value, dtype=None):
    """Move an array (or a ``Module``, in place) to the current backend.

    Floating-point arrays are cast to ``dtype`` when it is given; integer
    arrays (token ids) keep their dtype.
    """
    if _is_module(value):
        return value.apply_to_arrays(lambda a: to_device(a, dtype))
    host = to_numpy(value)
    if dtype is not None and host.dtype.kind == "f":
        host = host.astype(_check_dtype(dtype), copy=False)
    return get_xp().asarray(host)


def from_host(host_array):
    """Move a freshly computed host array to the device in the default dtype."""
    return to_device(host_array, dtype=get_dtype())


def _is_module(value):
    return hasattr(value, "apply_to_arrays")


# --------------------------------------------------------- random numbers


def host_rng(seed_or_rng=None):
    """A seeded NumPy generator on the host.

    Accepts an ``int`` seed, a tuple of ints (``(seed, epoch)``: one stream
    per epoch, reproducible without saving any state), an existing
    ``numpy.random.Generator`` (returned as is, so one generator can be
    threaded through many layers) or ``None`` (seed 0, so that results are
    reproducible by default).
    """
    if isinstance(seed_or_rng, np.random.Generator):
        return seed_or_rng
    if seed_or_rng is None:
        seed_or_rng = 0
    parts = seed_or_rng if isinstance(seed_or_rng, tuple) else (seed_or_rng,)
    if not parts or not all(value_checks.is_int(part, low=0) for part in parts):
        raise TypeError(
            "rng: expected a non-negative int seed, a tuple of them or a numpy.random.Generator, "
            f"got {seed_or_rng!r}"
        )
    return np.random.default_rng([int(p) for p in parts] if len(parts) > 1 else int(parts[0]))


def device_rng(seed):
    """A seeded generator that draws directly on the current backend.

    Used where random numbers are drawn on the device (sampling's draws), so
    they need not cross from host to device. NumPy and the strict backend give
    the same numbers for a seed; CuPy uses a different generator (XORWOW),
    whose numbers also depend on the GPU. Dropout's masks come from
    ``minitrans.ops.random_bits`` instead, the same on every backend.
    """
    return get_xp().random.default_rng(seed)

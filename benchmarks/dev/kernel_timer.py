"""Every NumPy operation of a step, timed and named: the breakdown's clock.

``TimedArray`` (harness/matmul_timer.py) times the matrix products of a model whose
arrays it views. ``KernelTimedArray`` extends it to everything else NumPy
computes on those arrays, so that a step splits into:

* **matrix products**: ``@`` and ``np.matmul``, as ``TimedArray`` times them;
* **element-wise kernels**: every other ufunc call (``add``, ``exp``,
  ``maximum``, ...) and ufunc method (``add.reduce`` is a sum, ``add.at``
  an embedding's scatter), by name, with the bytes it read and wrote: its
  memory traffic;
* **NumPy functions**: ``where``, ``concatenate``, ``einsum``, ... (NumPy's
  ``__array_function__`` protocol), by name.

An operation that runs inside another one (``np.mean`` computes a sum, a
ufunc) is counted once, in the outer one. What is left of a step is Python:
the layers' code between kernels (checks, reshapes, dispatch) and the
ndarray methods that are neither ufuncs nor functions (``copy``, ``astype``,
``fill``, indexing), which no protocol lets a subclass see.

Each operation is timed on the clock of the thread that runs it
(``time.thread_time``, CPU time): with DataParallel's workers, a thread
that comes back from a kernel may wait for Python's lock while the other
runs Python, and a wall clock would count that wait as the kernel's. A
worker's matrix products run on its own thread (one BLAS thread each, as
vs_pytorch.py runs them), so its CPU time is their time. The totals are
added over the threads; divided by the workers, they are each one's share
of the step.
"""

import collections
import threading
import time

import numpy as np

from harness.matmul_timer import TimedArray, layout, plain_view

_local = threading.local()  # how deep in timed operations this thread is


class KernelTimedArray(TimedArray):
    """Its ufuncs and functions are timed; TimedArray's counters of
    products (``products``, ``flops``) are kept too."""

    seconds_by_kernel = collections.Counter()
    calls_by_kernel = collections.Counter()
    bytes_by_kernel = collections.Counter()
    function_names = set()  # the kernels that are NumPy functions, not ufuncs
    # what the step is doing: the kernels of the optimiser's step ("adam")
    # are kept apart from the model's ("model")
    phase = "model"
    # element-wise and function seconds by the innermost layer that ran them
    # (set by enter_layer / leave_layer; "(outside layers)" when none)
    seconds_by_layer = collections.Counter()

    @classmethod
    def reset(cls):
        TimedArray.reset()  # the products' totals, which live on TimedArray
        cls.seconds_by_kernel = collections.Counter()
        cls.calls_by_kernel = collections.Counter()
        cls.bytes_by_kernel = collections.Counter()
        cls.seconds_by_layer = collections.Counter()

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        plain = [plain_view(x) for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(plain_view(x) for x in kwargs["out"])
        name = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
        result = _outermost(getattr(ufunc, method), plain, kwargs, name)
        if ufunc is np.matmul and method == "__call__":
            _count_product(*plain[:2], result)
        return as_kernel_timed(result)

    def __array_function__(self, func, types, args, kwargs):
        KernelTimedArray.function_names.add(func.__name__)
        call = super(TimedArray, self).__array_function__  # ndarray's: runs the function
        return as_kernel_timed(_outermost(lambda *a, **k: call(func, types, a, k), args, kwargs,
                                 func.__name__))


def as_kernel_timed(x):
    """x as a KernelTimedArray view, for an array or a tuple or list of them."""
    if type(x) in (tuple, list):
        return type(x)(as_kernel_timed(item) for item in x)
    return x.view(KernelTimedArray) if isinstance(x, np.ndarray) else x


def _count_product(a, b, result):
    """A product's shapes and layouts, for the GEMM bound, and its FLOPs,
    as TimedArray counts them."""
    with TimedArray.lock:
        TimedArray.products[(np.shape(a), np.shape(b), layout(a), layout(b))] += 1
        if np.ndim(a) >= 2 and np.ndim(b) >= 2:
            TimedArray.flops += 2 * np.size(result) * np.shape(a)[-1]


def _outermost(function, args, kwargs, name):
    """function(*args, **kwargs), timed under ``name`` unless this thread is
    inside a timed operation already."""
    depth = getattr(_local, "depth", 0)
    _local.depth = depth + 1
    try:
        if depth:
            return function(*args, **kwargs)
        start = time.thread_time()
        result = function(*args, **kwargs)
        seconds = time.thread_time() - start
    finally:
        _local.depth = depth
    traffic = _nbytes(args) + _nbytes(kwargs.get("out")) + (
        0 if "out" in kwargs else _nbytes(result))
    if KernelTimedArray.phase != "model":
        name = f"{KernelTimedArray.phase}: {name}"
    layers = getattr(_local, "layers", None)
    layer = layers[-1] if layers else "(outside layers)"
    with TimedArray.lock:
        if name != "matmul" and KernelTimedArray.phase == "model":
            KernelTimedArray.seconds_by_layer[layer] += seconds
        KernelTimedArray.seconds_by_kernel[name] += seconds
        KernelTimedArray.calls_by_kernel[name] += 1
        KernelTimedArray.bytes_by_kernel[name] += traffic
    return result


def enter_layer(name):
    """The kernels this thread runs from now on are ``name``'s (a stack:
    a layer inside a layer)."""
    if not hasattr(_local, "layers"):
        _local.layers = []
    _local.layers.append(name)


def leave_layer():
    _local.layers.pop()


def _nbytes(value):
    """Bytes of the arrays in value (an array, or a tuple or list of them)."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(item) for item in value)
    return 0


def kernel_totals(steps, workers):
    """The model's kernels (not the optimiser's), per step and per worker:
    {"matmul", "elementwise", "functions"} seconds, the element-wise bytes,
    and each other kernel's (name, seconds, calls, bytes), largest first."""
    cls = KernelTimedArray
    scale = 1.0 / (steps * workers)
    seconds = {name: s for name, s in cls.seconds_by_kernel.items() if ": " not in name}
    matmul = seconds.pop("matmul", 0.0)
    functions = sum(s for name, s in seconds.items() if name in cls.function_names)
    elementwise = sum(seconds.values()) - functions
    kernels = [(name, time_ * scale, cls.calls_by_kernel[name] * scale,
                cls.bytes_by_kernel[name] * scale)
               for name, time_ in cls.seconds_by_kernel.most_common() if name in seconds
               and name != "matmul"]
    elementwise_bytes = sum(b for name, b in cls.bytes_by_kernel.items()
                            if name in seconds and name not in cls.function_names
                            and name != "matmul")
    by_layer = [(layer, time_ * scale) for layer, time_ in cls.seconds_by_layer.most_common()]
    return {"by_layer": by_layer, "matmul": matmul * scale, "elementwise": elementwise * scale,
            "functions": functions * scale, "elementwise_bytes": elementwise_bytes * scale,
            "kernels": kernels}

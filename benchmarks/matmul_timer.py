"""A NumPy array whose matrix products are timed and counted.

The layers write products as ``a @ b`` or ``xp.matmul(a, b, out=...)``,
which no Python profiler sees. A model whose arrays are all ``TimedArray``
(``model.apply_to_arrays(lambda a: a.view(TimedArray))``) computes the same
functions as before (its dropout masks start again: moving the arrays
resets the generators), and every product adds its seconds and its floating-point
operations (2 m n k for an (m, k) by (k, n) product, for each matrix of a
batch) to the class's totals, and its operands' shapes and layouts to
``products``: the list of products a step computes, which ``time_products``
times alone. Results of other operations stay TimedArray, so the whole
forward, backward and optimiser step are covered. With several worker
threads, ``seconds`` adds up the time each thread spent in products.
"""

import collections
import threading
import time
import timeit

import numpy as np


class TimedArray(np.ndarray):
    seconds = 0.0
    flops = 0
    products = collections.Counter()  # (a shape, b shape, a layout, b layout): how many
    lock = threading.Lock()  # worker threads add to the totals at once

    @classmethod
    def reset(cls):
        cls.seconds, cls.flops = 0.0, 0
        cls.products = collections.Counter()

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """Every NumPy operation on a TimedArray runs on plain views of its
        arrays, and its results are TimedArray again. ``@`` and
        ``np.matmul`` are the ufunc ``np.matmul``: those are timed."""
        inputs = [_plain(x) for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(_plain(x) for x in kwargs["out"])
        if ufunc is np.matmul and method == "__call__":
            result = _timed_matmul(*inputs, **kwargs)
        else:
            result = getattr(ufunc, method)(*inputs, **kwargs)
        if isinstance(result, tuple):
            return tuple(_timed(x) for x in result)
        return _timed(result)


def _plain(x):
    return x.view(np.ndarray) if isinstance(x, TimedArray) else x


def _timed(x):
    return x.view(TimedArray) if isinstance(x, np.ndarray) else x


def _timed_matmul(a, b, **kwargs):
    start = time.perf_counter()
    out = np.matmul(a, b, **kwargs)
    seconds = time.perf_counter() - start
    with TimedArray.lock:
        TimedArray.seconds += seconds
        TimedArray.flops += 2 * out.size * np.shape(a)[-1]
        TimedArray.products[(np.shape(a), np.shape(b), layout(a), layout(b))] += 1
    return out


def layout(array):
    """"T" for a matrix (or stack of them) stored column by column, such as
    ``x.T`` of a row-major x; "N" otherwise. BLAS reads either directly."""
    if (
        array.ndim >= 2
        and array.strides[-2] == array.itemsize
        and array.strides[-1] > array.itemsize
    ):
        return "T"
    return "N"


def make_operand(shape, layout_code, rng):
    """A random float32 array of ``shape`` in ``layout_code`` ("N" or "T"),
    as a NumPy array: the other worker converts it to its own library."""
    if layout_code == "T":
        swapped = (*shape[:-2], shape[-1], shape[-2])
        return rng.standard_normal(swapped, dtype=np.float32).swapaxes(-1, -2)
    return rng.standard_normal(shape, dtype=np.float32)


def time_products(products, matmul, convert, synchronize=lambda: None, repeats=3):
    """The best of ``repeats`` timings of each product of ``products``
    alone, in seconds, on random operands of its shapes and layouts (warm
    caches): a list in the order of ``products``.

    ``products`` is a list of [a shape, b shape, a layout, b layout, count];
    ``convert`` turns a NumPy operand into the library's own array and
    ``matmul`` multiplies two of them, so that both libraries time the same
    list."""
    rng = np.random.default_rng(0)
    best_times = []
    for a_shape, b_shape, a_layout, b_layout, _ in products:
        a = convert(make_operand(tuple(a_shape), a_layout, rng))
        b = convert(make_operand(tuple(b_shape), b_layout, rng))
        def product():
            matmul(a, b)
            synchronize()  # a GPU's product is over only when it has finished

        product()  # warm-up: the library's threads and buffers
        best_times.append(min(timeit.repeat(product, number=1, repeat=repeats)))
    return best_times

"""A NumPy array whose matrix products are timed and counted.

The layers write products as ``a @ b`` or ``xp.matmul(a, b, out=...)``,
which no Python profiler sees. A model whose arrays are all ``TimedArray``
(``model.apply_to_arrays(lambda a: a.view(TimedArray))``) computes the same
functions as before (its dropout masks start again: moving the arrays
resets the generators), and every product adds its seconds to the class's
totals, and its operands' shapes and layouts to ``products``: the list of
products a step computes, which ``time_products`` times alone.

Its floating-point operations, 2 m n k for an (m, k) by (k, n) product (for
each matrix of a batch), go to ``flops`` when both operands are matrices:
the model's products, the same in PyTorch. A product with a vector, a sum
written as a product (``minitrans.ops.sums``), goes to ``vector_flops``.

Results of ufuncs (``+``, ``exp``, ...) and of NumPy's functions
(``concatenate``, ``stack``, ``where``, ``einsum``, ...) stay TimedArray, so
a product of arrays derived from the model's, such as weights concatenated
side by side, is seen too, through the whole forward, backward and optimiser
step; ``tests/project/test_benchmarks.py`` checks the count of a step against a
formula from the config. With several worker threads, ``seconds`` adds up
the time each thread spent in products.
"""

import collections
import threading
import time
import timeit

import numpy as np


class TimedArray(np.ndarray):
    seconds = 0.0
    flops = 0  # of products of two matrices
    vector_flops = 0  # of products with a vector
    products = collections.Counter()  # (a shape, b shape, a layout, b layout): how many
    lock = threading.Lock()  # worker threads add to the totals at once

    @classmethod
    def reset(cls):
        cls.seconds, cls.flops, cls.vector_flops = 0.0, 0, 0
        cls.products = collections.Counter()

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """Every NumPy operation on a TimedArray runs on plain views of its
        arrays, and its results are TimedArray again. ``@`` and
        ``np.matmul`` are the ufunc ``np.matmul``: those are timed."""
        inputs = [plain_view(x) for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(plain_view(x) for x in kwargs["out"])
        if ufunc is np.matmul and method == "__call__":
            result = timed_matmul(*inputs, **kwargs)
        else:
            result = getattr(ufunc, method)(*inputs, **kwargs)
        return as_timed(result)

    def __array_function__(self, func, types, args, kwargs):
        """NumPy's functions run as for any ndarray, but would return plain
        arrays (``np.concatenate`` of TimedArrays is an ndarray): their
        results are made TimedArray, so that products of them are counted."""
        return as_timed(super().__array_function__(func, types, args, kwargs))


def plain_view(x):
    return x.view(np.ndarray) if isinstance(x, TimedArray) else x


def as_timed(x):
    """x as a TimedArray view, for an array or a tuple or list of them."""
    if type(x) in (tuple, list):  # not a named tuple: its fields would not fit
        return type(x)(as_timed(item) for item in x)
    return x.view(TimedArray) if isinstance(x, np.ndarray) else x


def timed_matmul(a, b, **kwargs):
    start = time.perf_counter()
    out = np.matmul(a, b, **kwargs)
    seconds = time.perf_counter() - start
    flops = 2 * np.size(out) * np.shape(a)[-1]
    with TimedArray.lock:
        TimedArray.seconds += seconds
        if np.ndim(a) >= 2 and np.ndim(b) >= 2:
            TimedArray.flops += flops
        else:
            TimedArray.vector_flops += flops
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


def time_products(products, matmul, convert, synchronize=lambda: None, repeats=3, threads=1,
                  thread_setup=None):
    """The best of ``repeats`` timings of each product of ``products``
    alone, in seconds, on random operands of its shapes and layouts (warm
    caches): a list in the order of ``products``.

    ``products`` is a list of [a shape, b shape, a layout, b layout, count];
    ``convert`` turns a NumPy operand into the library's own array and
    ``matmul`` multiplies two of them, so that both libraries time the same
    list. With ``threads`` above 1, each product runs on that many threads
    at once, each on operands of its own, as minitrans's data-parallel
    workers compute it on the CPU (``time_on_threads``, which does not
    synchronize a GPU); each of those threads first calls ``thread_setup``
    (None: nothing), where a library's thread count is a setting of each
    thread."""
    if threads > 1:
        return time_on_threads(products, matmul, convert, threads, repeats, thread_setup)
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


# Each timing on several threads lasts at least this long, so that the
# threads' start and meeting at the end (tens of microseconds) stay a few
# per cent of it even for the tiny config's products of microseconds.
MIN_TIMING_SECONDS = 2e-3


def time_on_threads(products, matmul, convert, threads, repeats=3, thread_setup=None):
    """Seconds of each product when ``threads`` threads compute it at once,
    each on operands of its own (the wall time of all, per product): the
    best of ``repeats`` timings, each of enough repetitions to last
    ``MIN_TIMING_SECONDS``. Two products on two cores at once run slower
    than one alone (the cores share a cache and their clock), and that is
    how a step of two workers computes them."""
    rng = np.random.default_rng(0)
    team = ThreadTeam(threads, thread_setup)
    try:
        best_times = []
        for a_shape, b_shape, a_layout, b_layout, _ in products:
            operands = [(convert(make_operand(tuple(a_shape), a_layout, rng)),
                         convert(make_operand(tuple(b_shape), b_layout, rng)))
                        for _ in range(threads)]
            once = team.wall_seconds(operands, matmul, number=1)  # and warm-up
            number = max(1, int(MIN_TIMING_SECONDS / max(once, 1e-9)))
            best_times.append(min(team.wall_seconds(operands, matmul, number) / number
                                  for _ in range(repeats)))
        return best_times
    finally:
        team.close()


class ThreadTeam:
    """``size`` threads kept for the timings, each told its operands and
    started together, so that a timing holds no thread's start. Each calls
    ``setup`` (if given) once, first. A thread's error is raised by the
    timing it spoiled, after every thread has met at the end."""

    def __init__(self, size, setup=None):
        self.setup = setup
        self.start = threading.Barrier(size + 1)
        self.end = threading.Barrier(size + 1)
        self.job = None
        self.finished = [0.0] * size
        self.errors = [None] * size
        self.threads = [threading.Thread(target=self._work, args=(index,), daemon=True)
                        for index in range(size)]
        for thread in self.threads:
            thread.start()

    def _work(self, index):
        try:
            if self.setup is not None:
                self.setup()
        except Exception as error:  # told at the first timing
            self.errors[index] = error
        while True:
            self.start.wait()
            if self.job is None:
                return
            if self.errors[index] is None:
                try:
                    self._multiply(index)
                except Exception as error:
                    self.errors[index] = error
            self.end.wait()

    def _multiply(self, index):
        operands, matmul, number = self.job
        a, b = operands[index]
        for _ in range(number):
            matmul(a, b)
        self.finished[index] = time.perf_counter()

    def wall_seconds(self, operands, matmul, number):
        """Seconds from the threads' start until the last has computed its
        ``number`` products of its own ``operands[index]``. Both ends are
        read where they happen: the main thread, once the barrier lets the
        others go, may wait milliseconds for Python's lock while they work,
        and a clock read after that wait missed part of their work."""
        self.job = (operands, matmul, number)
        begin = time.perf_counter()
        self.start.wait()
        self.end.wait()
        error = next((error for error in self.errors if error is not None), None)
        if error is not None:
            raise error
        return max(self.finished) - begin

    def close(self):
        self.job = None
        self.start.wait()
        for thread in self.threads:
            thread.join()

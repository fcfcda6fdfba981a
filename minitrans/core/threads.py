"""How many cores this process may use: the optimiser's threads and the
data-parallel workers' BLAS threads are sized by it."""

import contextlib
import os

from threadpoolctl import ThreadpoolController


def usable_cores():
    """The cores this process may run on: its CPU affinity where the system
    reports one (a container or ``taskset`` can give fewer than the machine
    has), else every core."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_controller = None  # threadpoolctl's handle on the BLAS libraries, made once


@contextlib.contextmanager
def limit_blas_threads(count):
    """Inside, BLAS uses at most ``count`` threads per call. Through
    threadpoolctl, which finds the BLAS library that NumPy loaded (OpenBLAS
    in NumPy's wheels) and calls its own set-threads function. Worker
    threads that each run part of a batch take one BLAS thread each, so
    that their products do not fight over the cores."""
    global _controller
    if _controller is None:
        _controller = ThreadpoolController()
    with _controller.limit(limits=count, user_api="blas"):
        yield

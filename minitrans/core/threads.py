"""How many cores this process may use: the optimiser's threads and the
data-parallel workers' BLAS threads are sized by it."""

import os


def usable_cores():
    """The cores this process may run on: its CPU affinity where the system
    reports one (a container or ``taskset`` can give fewer than the machine
    has), else every core."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1

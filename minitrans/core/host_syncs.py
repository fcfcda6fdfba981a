"""Counting the times the CPU waits for the device.

On a GPU, work is queued and the CPU runs ahead; converting a device array
to a host value (``float(x)``, ``int``, ``bool``, ``.item()``, ``.tolist()``,
``.get()``, formatting it) makes the CPU wait until everything queued before
it has run. A few such waits per training step cost nothing; one per layer
stalls the GPU at every layer. The strict backend reports each conversion
here, so tests can count them on a CPU (``tests/library/test_host_syncs.py`` holds a
training step and a decoded token to a budget).
"""

import contextlib
import os
import sys
import threading


class Tally:
    """What was counted inside one counting block: ``places``, a label for
    each event, and ``count``; ``summary()`` says which labels came how often,
    so that a test that fails its budget says where."""

    def __init__(self):
        self.places = []

    @property
    def count(self):
        return len(self.places)

    def summary(self):
        """Each place with how often it was counted, most often first."""
        tally = {}
        for place in self.places:
            tally[place] = tally.get(place, 0) + 1
        return "\n".join(f"{n:5d} x {place}" for place, n in sorted(tally.items(),
                                                                    key=lambda kv: -kv[1]))


class HostSyncs(Tally):
    """The host syncs counted inside one ``count_host_syncs()`` block, each
    place a "file:line (kind)" naming the line that asked for the host value."""


_active_counters = []
_counters_lock = threading.Lock()  # DataParallel's workers run layers on threads


@contextlib.contextmanager
def count_host_syncs():
    """Count every conversion of a strict array to a host value inside the
    block (all threads): ``with count_host_syncs() as syncs: ...;
    syncs.count``. On CuPy each is a wait for the GPU."""
    syncs = HostSyncs()
    with _counters_lock:
        _active_counters.append(syncs)
    try:
        yield syncs
    finally:
        with _counters_lock:
            _active_counters.remove(syncs)


def record(kind):
    """Called by the strict backend at every conversion to a host value."""
    if not _active_counters:
        return
    place = f"{_caller()} ({kind})"
    with _counters_lock:
        for syncs in _active_counters:
            syncs.places.append(place)


_STRICT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "strict.py")


def _caller():
    """file:line of the code that asked for the host value: the first frame
    outside the strict backend."""
    frame = sys._getframe(2)
    while frame is not None and os.path.abspath(frame.f_code.co_filename) == _STRICT:
        frame = frame.f_back
    if frame is None:
        return "?"
    return f"{os.path.relpath(frame.f_code.co_filename)}:{frame.f_lineno}"

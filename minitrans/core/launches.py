"""Counting the kernels a device would launch.

On a GPU every array operation (a ufunc, a reduction, a copy into place,
a gather) is a kernel launch costing some microseconds of the CPU's time
whatever its size: a step of a small model is bound by how many it issues,
not by the arithmetic. The strict backend reports each operation that
would be a launch here, so tests can count them on a CPU and hold a
training step or a decoded token to a budget; a fused kernel
(``one_launch``) counts once, however many operations its body runs.
"""

import contextlib
import threading

from minitrans.core.host_syncs import Tally

# Array functions and methods (``xp.name`` or ``a.name``) that launch nothing
# on a device: views of the same memory (a new shape or order of the strides),
# allocations that fill nothing, questions about shapes and types, and making
# a random generator. Every other function or method that returns arrays
# launches one kernel (``zeros`` fills, ``sum`` reduces, ``copy`` copies).
VIEWS = frozenset("""
    atleast_1d atleast_2d atleast_3d broadcast_arrays broadcast_to diagonal expand_dims
    moveaxis rollaxis split array_split squeeze swapaxes transpose view""".split())
NO_LAUNCH = VIEWS | frozenset("""
    broadcast_shapes can_cast default_rng empty empty_like isscalar issubdtype
    may_share_memory min_scalar_type ndim promote_types result_type seed shape
    shares_memory size""".split())
# A view when the data's layout allows one, else a copy (one launch), and for
# asarray/array a copy from the host (a transfer): the strict backend looks
# at what each call did.
VIEW_OR_COPY = frozenset("array asanyarray asarray ascontiguousarray ravel reshape".split())


class Launches(Tally):
    """The launches counted inside one ``count_launches()`` block, each place
    the kind of launch ("multiply", "setitem", "fused layer_norm")."""


_active_counters = []
_counters_lock = threading.Lock()  # DataParallel's workers run layers on threads
_inside = threading.local()  # per thread: how deep inside one_launch blocks
# The stretches being recorded (capture.record_stretch): the strict backend
# hands each launch to the last one, and one_launch tells them where a fused
# kernel begins and ends, so that its body is kept as one operation
STRETCHES = []


@contextlib.contextmanager
def count_launches():
    """Count every launch of the strict backend inside the block (all
    threads): ``with count_launches() as launches: ...; launches.count``."""
    launches = Launches()
    with _counters_lock:
        _active_counters.append(launches)
    try:
        yield launches
    finally:
        with _counters_lock:
            _active_counters.remove(launches)


def counting():
    """Whether any ``count_launches()`` block (or stretch being recorded) is
    open: the strict backend only works out whether a call copied, or
    gathered, when someone is counting."""
    return bool(_active_counters or STRETCHES)


def record(kind):
    """Called by the strict backend at every operation a device would launch."""
    if not _active_counters or getattr(_inside, "depth", 0):
        return
    with _counters_lock:
        for launches in _active_counters:
            launches.places.append(kind)


@contextlib.contextmanager
def one_launch(name):
    """The body is one fused kernel on a device: it counts as one launch
    ("fused NAME"), and the operations inside it are not counted."""
    record(f"fused {name}")
    for stretch in STRETCHES:
        stretch.fused_begins(name)
    _inside.depth = getattr(_inside, "depth", 0) + 1
    try:
        yield
    finally:
        _inside.depth -= 1
        for stretch in STRETCHES:
            stretch.fused_ends()

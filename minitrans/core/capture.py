"""Proving on a CPU that a stretch of work could be captured as a CUDA graph.

A CUDA graph records a stretch of kernel launches once and replays it: each
kernel runs again on the SAME memory (the same arrays, those the stretch
allocated while it was recorded included) with the SAME scalar arguments it
was recorded with. So a stretch is capture-safe only if replaying it gives
what running it again would: a value that changes from step to step (the
learning rate, Adam's bias corrections, a dropout key) must be read from a
device array updated in place before each replay, never passed as a Python
number, which the graph keeps frozen; and nothing may be decided on the host
inside it (a ``float(x)`` stops the CPU until the GPU is done, which a graph
cannot do).

On the strict backend this can be checked with no GPU:

``record_stretch()``   keeps every launching operation run inside it, in
                       order: the call, its arguments (device arrays by
                       reference, Python numbers by value) and the array it
                       wrote; a fused kernel is kept as one operation.
``stretch.replay()``   runs them again as a graph would: each result is
                       written into the array recorded for it, from the
                       arrays' present contents and the frozen numbers.
``check_capture_safe`` records a stretch at one step, and compares its replay
                       at the next step with running it again there, launch
                       by launch; the report names the first that differs.
"""

import contextlib
from typing import NamedTuple

from minitrans.core import backend, host_syncs, launches, strict

# Launches whose values a graph replays as recorded: a random draw (its key
# and offset are frozen) and a copy from host memory (its source is frozen)
FROZEN_KINDS = ("random.", "transfer")


class NotCapturable(RuntimeError):
    """A recorded stretch that a CUDA graph could not replay."""


def _data(value):
    """The NumPy data behind ``value`` (device arrays unwrapped, the rest as it is)."""
    return strict.unwrap(value, "capture", allow_host=True)


def _copy(data):
    if isinstance(data, tuple):
        return tuple(_copy(item) for item in data)
    return None if data is None else data.copy()


def _same(a, b):
    """Bit for bit: a replay runs the same kernels on the same numbers."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if a is None or b is None:
        return a is b
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _host_values(value):
    """The values among a call's arguments that a graph keeps frozen, as text:
    whatever cannot be written into (Python numbers, dtypes, slices); what can
    (an array) is memory, read anew at each replay."""
    if isinstance(value, (list, tuple)):
        return [text for item in value for text in _host_values(item)]
    if isinstance(value, dict):
        return [f"{key}={text}" for key, item in value.items() for text in _host_values(item)]
    return [] if hasattr(value, "__setitem__") else [repr(value)]


class Operation:
    """One launch kept by a stretch: ``kind`` ("multiply", "setitem"), the
    call that runs it again (``function`` with ``args`` and ``kwargs``) and
    ``output``, the array it wrote, which a replay writes again."""

    def __init__(self, kind, function, args, kwargs, output):
        self.kind, self.function, self.args, self.kwargs = kind, function, args, kwargs
        self.output = output
        self.frozen = _copy(output) if kind.startswith(FROZEN_KINDS) else None

    def leaves(self, label=""):
        yield label + self.kind, self

    def run_again(self):
        fresh = self.frozen
        if fresh is None:
            fresh = self.function(*_data(self.args), **_data(self.kwargs))
        _write(self.output, fresh, self.kind)

    def host_values(self):
        return _host_values((self.args, self.kwargs))


def _write(output, fresh, kind):
    """``fresh`` into the recorded array ``output``, in place, as a graph
    writes into the memory it was recorded with."""
    if isinstance(output, tuple):
        for part, fresh_part in zip(output, fresh):
            _write(part, fresh_part, kind)
    elif output is not None and fresh is not None and fresh is not output:
        if tuple(getattr(fresh, "shape", ())) != output.shape:
            raise NotCapturable(f"{kind}: replayed, it gives shape {fresh.shape} where it was "
                                f"recorded with {output.shape}: a graph cannot change a shape")
        output[...] = fresh


class FusedOperation:
    """A fused kernel (``launches.one_launch``): one operation, whose body's
    launches are replayed together, in order."""

    def __init__(self, kind):
        self.kind, self.parts = kind, []

    def leaves(self, label=""):
        for part in self.parts:
            yield from part.leaves(f"{label}{self.kind}: ")

    def run_again(self):
        for part in self.parts:
            part.run_again()


class Stretch:
    """The operations recorded by ``record_stretch()``; ``host_syncs``: where
    it waited for the device (a stretch that did is not capturable)."""

    def __init__(self, keep_results=False):
        self.operations, self.host_syncs = [], []
        self.results = [] if keep_results else None  # each launch's output, copied as it ran
        self._open_fused = []

    def add(self, kind, function, args, kwargs, result, owner=None):
        """Called by the strict backend at each launch: ``result``, else (an
        in-place call) ``owner``, the array whose method it was, else the
        first array argument, is what it wrote."""
        if result is None:
            result = owner if owner is not None else next(
                (a for a in args if hasattr(a, "__setitem__")), None)
        operation = Operation(kind, function, args, kwargs, _data(result))
        self._place(operation)
        if self.results is not None:
            self.results.append(_copy(operation.output))

    def fused_begins(self, name):
        fused = FusedOperation(f"fused {name}")
        self._place(fused)
        self._open_fused.append(fused)

    def fused_ends(self):
        if self._open_fused:  # else the stretch began inside this fused kernel's body
            self._open_fused.pop()

    def _place(self, operation):
        (self._open_fused[-1].parts if self._open_fused else self.operations).append(operation)

    def leaves(self):
        """(label, operation) of every launch in order, a fused body's one by one."""
        for operation in self.operations:
            yield from operation.leaves()

    def replay(self, after_each=None):
        """Run every recorded operation again, writing into the recorded
        arrays; ``after_each(operation)`` is called after each launch."""
        if self.host_syncs:
            raise NotCapturable(f"not capturable: it waits for the device at "
                                f"{self.host_syncs[0]}, and a graph cannot stop for the host")
        for _, operation in self.leaves():
            operation.run_again()
            if after_each is not None:
                after_each(operation)


@contextlib.contextmanager
def record_stretch(keep_results=False):
    """Record every launching operation run inside the block (strict backend
    only): ``with record_stretch() as stretch: ...; stretch.replay()``.
    ``keep_results``: also copy each launch's output as it ran."""
    if backend.backend_name() != "strict":
        raise RuntimeError("record_stretch needs the strict backend (minitrans.use('strict'))")
    if launches.STRETCHES:
        raise RuntimeError("a stretch is already being recorded")
    stretch = Stretch(keep_results)
    with host_syncs.count_host_syncs() as syncs:
        launches.STRETCHES.append(stretch)
        try:
            yield stretch
        finally:
            launches.STRETCHES.remove(stretch)
            stretch.host_syncs = list(syncs.places)


class CaptureCheck(NamedTuple):
    """What ``check_capture_safe`` found: ``safe``, and a one-line ``report``."""
    safe: bool
    report: str


def check_capture_safe(run, prepare, state, step=1):
    """Whether ``run()``, a stretch of work, could be captured as a CUDA graph.

    ``prepare(step)`` sets what changes from step to step (in device arrays,
    or, wrongly, in Python numbers ``run`` reads); ``state``: every array the
    stretch updates in place (weights, moments). The stretch is recorded at
    ``step``; then at ``step + 1`` it runs again eagerly, and, from the same
    state, the recording is replayed: every launch's output, and then every
    state array, must be the same bit for bit."""
    prepare(step)
    with record_stretch() as recorded:
        run()
    if recorded.host_syncs:
        return CaptureCheck(False, f"not capturable: it waits for the device at "
                                   f"{recorded.host_syncs[0]}")
    before = [array.copy() for array in state]
    prepare(step + 1)
    with record_stretch(keep_results=True) as eager:
        run()
    after = [array.copy() for array in state]
    for array, saved in zip(state, before):
        array[...] = saved
    prepare(step + 1)
    report = _compare(recorded, eager, step + 1)
    if report is None:
        changed = [k for k, (x, y) in enumerate(zip(state, after)) if not _same(_data(x), _data(y))]
        report = changed and f"state array {changed[0]} differs after the replay at step {step+1}"
    if report:
        return CaptureCheck(False, report)
    return CaptureCheck(True, f"capture-safe: {len(eager.results)} launches replayed at step "
                              f"{step + 1} equal the eager run")


def _compare(recorded, eager, step):
    """The first launch of the replay of ``recorded`` whose output differs
    from ``eager``'s at ``step``, in one line; None if none does."""
    recorded_leaves, eager_leaves = list(recorded.leaves()), list(eager.leaves())
    labels = [label for label, _ in recorded_leaves], [label for label, _ in eager_leaves]
    if labels[0] != labels[1]:
        where = next((i for i, pair in enumerate(zip(*labels)) if pair[0] != pair[1]),
                     min(map(len, labels)))
        return (f"not capturable: run again at step {step} it launches another sequence "
                f"(at launch {where + 1}: {labels[1][where:where + 1]} where the recording has "
                f"{labels[0][where:where + 1]}), a decision taken on the host")
    replayed = []
    try:
        recorded.replay(after_each=lambda operation: replayed.append(_copy(operation.output)))
    except NotCapturable as error:
        return str(error)
    for i, (label, operation) in enumerate(recorded_leaves):
        if not _same(replayed[i], eager.results[i]):
            return f"launch {i + 1} of {len(replayed)}, {label}: " + _why(
                operation, eager_leaves[i][1], step)
    return None


def _why(operation, eager_operation, step):
    frozen = [(a, b) for a, b in zip(operation.host_values(), eager_operation.host_values())
              if a != b]
    if frozen:
        return (f"replayed with {frozen[0][0]} frozen where the eager run at step {step} "
                f"passes {frozen[0][1]}: a Python number that changes with the step; read it "
                "from a device array updated in place")
    if operation.frozen is not None:
        return "a random draw or a copy from the host replays the values it had when recorded"
    return f"the replay differs from the eager run at step {step}"

"""Argument checks that turn bad input into a clear error.

Each check names the argument, what was expected and what was given, so a
learner never has to decode a broadcasting error from deep inside NumPy.
Every message reads "NAME: expected WHAT, got VALUE".

Arrays, here: ``check_array`` (backend, rank, width, dtype),
``check_finite``, ``check_nonempty``, ``check_same_shape``,
``check_token_ids``, ``check_mask``. Plain values, written in
``core.value_checks`` and offered here too, so that every caller has one
place to look: ``check_int``, ``check_number``, ``check_positive_int``,
``check_probability``, ``check_choice``, ``check_bool``, ``is_int``,
``is_number``, ``describe_int``, ``describe_number``.
"""

import contextlib
import threading

from minitrans.core import backend, fusion
from minitrans.core.value_checks import (check_bool, check_choice, check_int, check_number,
                                         check_positive_int, check_probability, describe_int,
                                         describe_number, is_int, is_number)

__all__ = ["check_array", "check_bool", "check_choice", "check_finite", "check_int",
           "check_mask", "check_nonempty", "check_number", "check_positive_int",
           "check_probability", "check_same_shape", "check_token_ids", "describe_int",
           "describe_number", "inputs_checked", "is_finite", "is_int", "is_number",
           "NonFiniteError"]


def _describe(value):
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        kind = f"{type(value).__module__}.{type(value).__name__}"
        return f"{kind} of shape {tuple(value.shape)} and dtype {value.dtype}"
    return type(value).__name__


def check_array(name, value, ndim=None, min_ndim=None, last_dim=None, dtype=None, floating=False):
    """Check that ``value`` is an array of the current backend and its form.

    ``ndim``: exact rank; ``min_ndim``: lowest rank; ``last_dim``: size of the
    feature axis; ``dtype``: the floating dtype it must have (the layer's);
    ``floating``: any floating dtype will do, but not integers or booleans.
    """
    if not backend.is_array(value):
        raise TypeError(
            f"{name}: expected an array of the current backend "
            f"({backend.backend_name()}), got {_describe(value)}; "
            "move it with minitrans.to_device(...)"
        )
    if ndim is not None and value.ndim != ndim:
        raise ValueError(
            f"{name}: expected an array of rank {ndim}, got shape {tuple(value.shape)}"
        )
    if min_ndim is not None and value.ndim < min_ndim:
        raise ValueError(
            f"{name}: expected an array of rank at least {min_ndim}, "
            f"got shape {tuple(value.shape)}"
        )
    if last_dim is not None and value.shape[-1] != last_dim:
        raise ValueError(
            f"{name}: expected last dimension {last_dim}, got shape {tuple(value.shape)}"
        )
    if dtype is not None and value.dtype != dtype:
        raise TypeError(
            f"{name}: expected dtype {dtype} (the layer's dtype), got {value.dtype}; "
            "cast it, or build the layer under the dtype you want"
        )
    if floating and value.dtype.kind != "f":
        raise TypeError(f"{name}: expected a floating-point array, got dtype {value.dtype}")


class NonFiniteError(ValueError):
    """An array holds NaN or infinity where only finite numbers make sense."""


def is_finite(value):
    """True when ``value`` holds no NaN and no infinity (one pass, one sync)."""
    return bool(backend.get_xp().isfinite(value).all())


_skipping = threading.local()  # per thread: DataParallel runs layers on several


@contextlib.contextmanager
def inputs_checked():
    """For a layer or a model that has checked its own inputs: the layers it
    calls inside this block compute on arrays made from those inputs and
    from finite weights, so their ``check_finite`` and the range check of
    ``check_token_ids`` return at once instead of passing over the same
    numbers again (multi-head attention would check x eight times, a model
    every layer). A NaN still cannot slip in unseen: it enters through an
    input, which was checked, or through a weight, and then the loss is NaN,
    which the trainer checks before every update.

    Each of those checks reads a result back from the device, a wait on a
    GPU (``minitrans.core.host_syncs``): checking once per model call rather
    than once per layer keeps a training step to a handful of waits."""
    depth = getattr(_skipping, "depth", 0)
    _skipping.depth = depth + 1
    try:
        yield
    finally:
        _skipping.depth = depth


def _inside_checked_call():
    return getattr(_skipping, "depth", 0) > 0


def check_finite(name, value):
    """No NaN and no infinity in ``value``, an array of the current backend.

    Layers call this on their floating inputs, so that a NaN is reported
    where it enters rather than silently spreading through every later
    layer. It costs one pass over the array and, on a GPU, a wait for the
    result (like the range check of token ids).
    """
    if _inside_checked_call() or is_finite(value):
        return
    xp = backend.get_xp()
    nan, inf = int(xp.isnan(value).sum()), int(xp.isinf(value).sum())
    raise NonFiniteError(
        f"{name}: expected finite numbers, got {nan} NaN and {inf} infinite "
        f"of {value.size} values (shape {tuple(value.shape)})"
    )


def check_nonempty(name, value):
    """At least one element along every axis (attention needs a key to attend to)."""
    if value.size == 0:
        raise ValueError(
            f"{name}: expected a non-empty array (no axis of size 0), "
            f"got shape {tuple(value.shape)}"
        )


def check_token_ids(name, ids, vocab_size=None, ndim=None, nonempty=False, max_len=None):
    """Token ids: an integer array of the current backend.

    ``vocab_size``: every id in [0, vocab_size) (one pass over the ids and,
    on a GPU, a wait for the result; skipped inside ``inputs_checked``, whose
    caller checked the ids already). It matters more on a GPU than on the
    CPU: NumPy refuses an index out of range, CuPy wraps it around and reads
    another token's row. ``ndim``: the exact rank, 2 for (B, T)
    sequences; ``nonempty``: at least one sequence of at least one token;
    ``max_len``: at most that many tokens along the last axis.
    """
    check_array(name, ids, ndim=ndim)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected an integer array of token ids, got dtype {ids.dtype}")
    if nonempty and ids.size == 0:
        raise ValueError(
            f"{name}: expected at least one sequence of at least one token, "
            f"got shape {tuple(ids.shape)}"
        )
    if max_len is not None and ids.ndim and ids.shape[-1] > max_len:
        raise ValueError(
            f"{name}: expected sequences of at most max_len={max_len} tokens, "
            f"got shape {tuple(ids.shape)}"
        )
    if vocab_size is None or ids.size == 0 or _inside_checked_call():
        return
    if backend.on_device():  # one fused kernel, where each operation is a launch
        outside = count_outside_vocabulary(ids, vocab_size)
    else:
        outside = ((ids < 0) | (ids >= vocab_size)).any()
    if bool(outside):  # one wait on a GPU; more only to explain
        low, high = int(ids.min()), int(ids.max())
        raise ValueError(
            f"{name}: expected token ids in [0, {vocab_size}), got {low if low < 0 else high}"
        )


@fusion.fused("token_ids_outside_vocabulary")
def count_outside_vocabulary(ids, vocab_size):
    """How many ids lie outside [0, vocab_size): 0 when all are tokens (a 0-d
    integer array; one reduction, so one kernel where ``any`` of the
    comparisons would take four)."""
    return backend.get_xp().sum((ids < 0) | (ids >= vocab_size))


def check_mask(name, mask, target_shape):
    """A boolean mask (True = may attend) that broadcasts to ``target_shape``."""
    check_array(name, mask)
    if mask.dtype != bool:
        raise TypeError(
            f"{name}: expected a boolean mask (True = may attend), got dtype {mask.dtype}"
        )
    if mask.ndim > len(target_shape) or not _broadcasts(mask.shape, target_shape):
        raise ValueError(
            f"{name}: expected a shape that broadcasts to {tuple(target_shape)}, "
            f"got {tuple(mask.shape)}"
        )


def _broadcasts(shape, target):
    """True when ``shape`` broadcasts to exactly ``target``."""
    for size, wanted in zip(reversed(shape), reversed(target)):
        if size not in (1, wanted):
            return False
    return True


def check_same_shape(name, value, expected_shape):
    if tuple(value.shape) != tuple(expected_shape):
        raise ValueError(
            f"{name}: expected shape {tuple(expected_shape)}, got {tuple(value.shape)}"
        )


# ------------------------------------------------------------ plain values
#

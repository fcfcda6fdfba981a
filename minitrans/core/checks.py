"""Argument checks that turn bad input into a clear error.

Each check names the argument, what was expected and what was given, so a
learner never has to decode a broadcasting error from deep inside NumPy.
Every message reads "NAME: expected WHAT, got VALUE".

Arrays: ``check_array`` (backend, rank, width, dtype), ``check_finite``,
``check_nonempty``, ``check_same_shape``, ``check_token_ids``,
``check_mask``. Plain values: ``check_int``, ``check_number`` (and their
shorthands ``check_positive_int``, ``check_probability``),
``check_choice``, ``check_bool``; ``is_int``/``is_number`` and ``describe_int``/
``describe_number`` give their test and their words to callers that
raise an error of their own (the command line, the random generators).
"""

import contextlib
import math
import numbers
import threading

from minitrans.core import backend


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
    if bool(((ids < 0) | (ids >= vocab_size)).any()):  # one wait on a GPU; more only to explain
        low, high = int(ids.min()), int(ids.max())
        raise ValueError(
            f"{name}: expected token ids in [0, {vocab_size}), got {low if low < 0 else high}"
        )


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
# Sizes, rates and options handed to constructors and functions. A bool is
# never taken for a number: Python counts True as 1, but h=True is a mistake
# to name, not a model with one head. NaN is never inside any range.


def check_int(name, value, low=None, high=None, allow_none=False):
    """An integer (Python's or NumPy's, not a bool) with low <= value <= high,
    a bound of None being no bound; ``allow_none``: None is accepted too."""
    if not (allow_none and value is None or is_int(value, low, high)):
        raise ValueError(f"{name}: expected {describe_int(low, high, allow_none)}, got {value!r}")


def check_number(name, value, low=None, high=None, low_open=False, high_open=False,
                 finite=True, allow_none=False):
    """A real number (not a bool, never NaN) between ``low`` and ``high``,
    each bound included unless ``low_open``/``high_open``; infinity only with
    ``finite=False``; None too with ``allow_none``."""
    bounds = dict(low=low, high=high, low_open=low_open, high_open=high_open, finite=finite)
    if not (allow_none and value is None or is_number(value, **bounds)):
        raise ValueError(
            f"{name}: expected {describe_number(**bounds, allow_none=allow_none)}, got {value!r}"
        )


def check_positive_int(name, value):
    """A size or a count: an integer >= 1."""
    check_int(name, value, low=1)


def check_probability(name, value):
    """A probability p with 0 <= p < 1 (a dropout rate of 1 would drop everything)."""
    check_number(name, value, low=0, high=1, high_open=True)


def check_choice(name, value, choices):
    """One of a fixed list of names, such as a backend or a task."""
    if value not in choices:
        listed = ", ".join(repr(choice) for choice in choices)
        raise ValueError(f"{name}: expected one of ({listed}), got {value!r}")


def check_bool(name, value):
    """True or False itself: not 1, and not the string "false" (which is truthy)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name}: expected True or False, got {value!r}")


def is_int(value, low=None, high=None):
    """The test of ``check_int``, for callers that word their own error."""
    integral = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    return integral and _inside(value, low, high, False, False)


def is_number(value, low=None, high=None, low_open=False, high_open=False, finite=True):
    """The test of ``check_number``, for callers that word their own error."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        return False
    return (math.isfinite(value) or not finite) and _inside(value, low, high, low_open, high_open)


def describe_int(low=None, high=None, allow_none=False):
    """What ``check_int`` accepts, in words: "a positive integer", ..."""
    if high is None and low in (0, 1):
        words = "a positive integer" if low == 1 else "a non-negative integer"
    else:
        words = "an integer" + _interval(low, high, False, False)
    return words + (" or None" if allow_none else "")


def describe_number(low=None, high=None, low_open=False, high_open=False, finite=True,
                    allow_none=False):
    """What ``check_number`` accepts, in words: "a number in [0, 1)", ..."""
    bounded = low is not None and high is not None  # finite anyway: no need to say so
    words = "a finite number" if finite and not bounded else "a number"
    if low == 0 and low_open and high is None:
        words = words.replace("number", "positive number")
    else:
        words += _interval(low, high, low_open, high_open)
    return words + (" or None" if allow_none else "")


def _inside(value, low, high, low_open, high_open):
    above = low is None or (value > low if low_open else value >= low)
    below = high is None or (value < high if high_open else value <= high)
    return above and below


def _interval(low, high, low_open, high_open):
    """The bounds in words: ' in [0, 1)', ' >= 0', ' < 5', or '' for none."""
    if low is not None and high is not None:
        return f" in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    if low is not None:
        return f" {'>' if low_open else '>='} {low}"
    if high is not None:
        return f" {'<' if high_open else '<='} {high}"
    return ""

"""Argument checks that turn bad input into a clear error.

Each check names the argument, what was expected and what was given, so a
learner never has to decode a broadcasting error from deep inside NumPy.
"""

import numbers

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


def check_finite(name, value):
    """No NaN and no infinity in ``value``, an array of the current backend.

    Layers call this on their floating inputs, so that a NaN is reported
    where it enters rather than silently spreading through every later
    layer. It costs one pass over the array and, on a GPU, a wait for the
    result (like the range check of token ids).
    """
    if is_finite(value):
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


def check_token_ids(name, ids, vocab_size):
    """Token ids: an integer array with every value in [0, vocab_size)."""
    check_array(name, ids)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected an integer array of token ids, got dtype {ids.dtype}")
    if ids.size == 0:
        return
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise ValueError(
            f"{name}: expected token ids in [0, {vocab_size}), got {bad}"
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


def check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{name}: expected a positive integer, got {value!r}")


def check_probability(name, value):
    """A probability p with 0 <= p < 1 (p = 1 would drop everything)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < 1:
        raise ValueError(f"{name}: expected a number in [0, 1), got {value!r}")

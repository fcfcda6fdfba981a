"""Argument checks that turn bad input into a clear error.

Each check names the argument, what was expected and what was given, so a
learner never has to decode a broadcasting error from deep inside NumPy.
"""

import numbers

from minitrans import backend


def _describe(value):
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"{type(value).__module__}.{type(value).__name__} of shape {tuple(value.shape)} and dtype {value.dtype}"
    return type(value).__name__


def check_array(name, value, ndim=None, min_ndim=None, last_dim=None, dtype=None):
    """Check that ``value`` is an array of the current backend and its form.

    ``ndim``: exact rank; ``min_ndim``: lowest rank; ``last_dim``: size of the
    feature axis; ``dtype``: the floating dtype it must have (the layer's).
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

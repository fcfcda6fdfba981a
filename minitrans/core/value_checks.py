"""Checks of plain values (sizes, rates, options), in the words every
minitrans error uses: "NAME: expected WHAT, got VALUE".

``check_int``, ``check_number`` (and their shorthands ``check_positive_int``,
``check_probability``), ``check_choice``, ``check_bool``; ``is_int``/
``is_number`` and ``describe_int``/``describe_number`` give their test and
their words to callers that raise an error of their own (the command line,
the random generators). They need no array library, so the backend, which
checks its own options with them, can import them without a circle;
``core.checks`` offers them beside its array checks.
"""

import math
import numbers

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

"""``forbid_float64()``: proving that a float32 run makes no float64 array.

Under NumPy 2 a float32 array combined with a float64 array or a NumPy
float64 scalar becomes float64, silently doubling the memory and time of
everything after it. The strict backend (``core/strict.py``) checks every
array it makes against ``FORBIDDING``; the float32 tests run whole training
steps inside ``forbid_float64()`` to prove that nothing does.
"""

import contextlib

# One entry per open forbid_float64() block (a list, so that the strict
# backend's own name for it sees every change)
FORBIDDING = []


@contextlib.contextmanager
def forbid_float64():
    """Inside this block, any float64 array that the strict backend makes
    raises TypeError."""
    FORBIDDING.append(True)
    try:
        yield
    finally:
        FORBIDDING.pop()

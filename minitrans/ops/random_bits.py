"""Random bits from a counter: the same numbers on every backend.

Dropout needs fresh random numbers at every step, on the device, and a run
should repeat them exactly: after a resume, and on another backend. A
stateful generator does neither well on a GPU (CuPy's allocates its states
anew for every seed, about 13 MB on a large GPU, and the numbers depend on
the GPU's number of multiprocessors). A counter-based generator needs no
state at all: number i of a stream is a hash of (key, i),

    z_i  = key + (i + 1) * G                 G = 0x9E3779B97F4A7C15, mod 2^64
    x_i  = mix(z_i)                          SplitMix64's finaliser (Steele et al., 2014)

computed with a few element-wise integer operations that NumPy and CuPy
both run, wrapping around at 2^64 in the same way. The key is itself a hash
of the caller's numbers (seed, step, ...), so every (seed, step, layer)
gets its own stream, and two streams overlap only if their keys happen to
differ by a multiple of G smaller than their length: odds of about
length / 2^64.

A fused kernel on a device cannot count along its elements, so the element
numbers come in as an array, ``element_indices(shape)``, and
``random_uint16_at`` hashes each element from its own number: the same bits
as ``random_uint16``, one element at a time, in a body ``cupy.fuse`` runs as
one kernel.
"""

import math
import threading

from minitrans.core import backend

MASK64 = 2**64 - 1
GOLDEN_GAMMA = 0x9E3779B97F4A7C15  # 2^64 / golden ratio, odd
MIX_MULTIPLIERS = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB)
MIX_SHIFTS = (30, 27, 31)


def stream_key(*parts):
    """A 64-bit key from non-negative integers, (seed, step, ...): each part
    is folded into the key and the key mixed again, on the host."""
    key = 0
    for part in parts:
        key = mix_reference((key + (int(part) + 1) * GOLDEN_GAMMA) & MASK64)
    return key


def mix_reference(z):
    """SplitMix64's finaliser on one Python int: the reference that the
    array version, on every backend, must equal (tests/library/test_cupy_differences.py)."""
    (a, b, c), (m1, m2) = MIX_SHIFTS, MIX_MULTIPLIERS
    z = ((z ^ (z >> a)) * m1) & MASK64
    z = ((z ^ (z >> b)) * m2) & MASK64
    return z ^ (z >> c)


def random_uint64(key, count):
    """x_0 .. x_{count-1} of stream ``key``: (count,) uint64 on the current
    backend. Unsigned arrays wrap around at 2^64 without a warning on both
    NumPy and CuPy, which is the arithmetic mod 2^64 the hash needs."""
    xp = backend.get_xp()
    z = xp.arange(1, count + 1, dtype=xp.uint64)
    z *= xp.uint64(GOLDEN_GAMMA)
    z += xp.uint64(key)
    return _mix(z)


def _mix(z):
    """SplitMix64's finaliser on a uint64 array, in place."""
    xp = backend.get_xp()
    (a, b, c), (m1, m2) = MIX_SHIFTS, MIX_MULTIPLIERS
    z ^= z >> xp.uint64(a)
    z *= xp.uint64(m1)
    z ^= z >> xp.uint64(b)
    z *= xp.uint64(m2)
    z ^= z >> xp.uint64(c)
    return z


def random_uniform(key, shape):
    """Uniform numbers in [0, 1) of ``shape``, float64: the top 53 bits of
    each x_i, times 2^-53 (every float64 in [0, 1) with a step of 2^-53)."""
    xp = backend.get_xp()
    count = math.prod(shape)
    return ((random_uint64(key, count) >> xp.uint64(11)) * 2.0**-53).reshape(shape)


def random_uint16(key, shape):
    """Uniform integers in [0, 65536) of ``shape``, uint16: each x_i cut into
    four, a quarter of the hashing of one number per element."""
    xp = backend.get_xp()
    count = math.prod(shape)
    return random_uint64(key, -(-count // 4)).view(xp.uint16)[:count].reshape(shape)


def random_uint16_at(index, key):
    """Element j of ``random_uint16(key, ...)``, for each j in ``index`` (a
    uint64 array of element numbers, any shape), as uint64 in [0, 65536).

    ``random_uint16`` reads x_i as four uint16, lowest bits first (NumPy's
    and CuPy's byte order): element j is bits 16 (j mod 4) ... of x_{j // 4}.
    Element-wise, with no in-place step and every constant a uint64, so that
    NumPy, the strict backend and ``cupy.fuse`` all compute it mod 2^64.
    """
    xp = backend.get_xp()
    i = index >> xp.uint64(2)  # j // 4: the hash that holds element j
    shift = (index & xp.uint64(3)) << xp.uint64(4)  # 16 (j mod 4)
    with backend.overflow_ignored():  # NumPy warns of the wrap-around for a 0-d index
        z = (i + xp.uint64(1)) * xp.uint64(GOLDEN_GAMMA) + key
        return (mixed(z) >> shift) & xp.uint64(0xFFFF)


def mixed(z):
    """SplitMix64's finaliser as a new array: ``_mix`` without the in-place
    steps, for a fused body."""
    xp = backend.get_xp()
    (a, b, c), (m1, m2) = MIX_SHIFTS, MIX_MULTIPLIERS
    z = (z ^ (z >> xp.uint64(a))) * xp.uint64(m1)
    z = (z ^ (z >> xp.uint64(b))) * xp.uint64(m2)
    return z ^ (z >> xp.uint64(c))


# One counter 0, 1, 2, ... per backend, the longest asked for so far: every
# shape's element numbers are a view of its start. Made once (one launch),
# and again only when a longer one is needed.
_counters = {}
_counters_lock = threading.Lock()  # DataParallel's workers draw masks on threads


def element_indices(shape):
    """0, 1, ..., n - 1 as uint64 in ``shape`` (n its size): a view of the
    backend's kept counter, so that no launch fills it once it exists."""
    xp = backend.get_xp()
    count = math.prod(shape)
    with _counters_lock:
        counter = _counters.get(backend.backend_name())
        if counter is None or counter.size < count:
            counter = xp.arange(max(count, 1), dtype=xp.uint64)
            _counters[backend.backend_name()] = counter
    return counter[:count].reshape(shape)

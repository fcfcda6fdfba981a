"""Random bits one element at a time (minitrans.ops.random_bits): the
element-wise hash that a fused kernel runs gives the bits of
``random_uint16`` element by element, so dropout's one-kernel forward on a
device drops exactly the elements the fast set drops on the CPU."""

import numpy as np
import pytest

import minitrans
from minitrans.core import backend, launches
from minitrans.layers import dropout
from minitrans.ops import random_bits
from minitrans.ops.random_bits import (
    GOLDEN_GAMMA, element_indices, mix_reference, random_uint16, random_uint16_at, stream_key,
)

KEYS = [0, stream_key(3), 2**64 - 5]  # the last above 2^63: no int64
# y: the same operations as on the host, but a GPU may fuse a product and a sum into one
TOLERANCE = {"float32": 1e-6, "float64": 1e-14}
SHAPES = [(1,), (3,), (7,), (4, 8), (5, 7), (2, 3, 5)]  # most not a multiple of 4


def python_uint16(key, j):
    """Element j of stream ``key``'s 16-bit numbers, from Python ints alone:
    bits 16 (j mod 4) ... of x_{j // 4} (the order of a little-endian view)."""
    x = mix_reference((key + (j // 4 + 1) * GOLDEN_GAMMA) % 2**64)
    return (x >> (16 * (j % 4))) & 0xFFFF


def big_endian_uint16_at(index, key):
    """The plant: the four pieces of each hash read from the top down."""
    return random_uint16_at(index ^ backend.get_xp().uint64(3), key)  # j mod 4 -> 3 - j mod 4


def host(array):
    return np.asarray(minitrans.to_numpy(array))


@pytest.mark.parametrize("key", KEYS)
def test_the_element_wise_hash_is_random_uint16_element_by_element(backend_name, key):
    xp = backend.get_xp()
    for count in (1, 3, 4, 9, 13):
        drawn = host(random_uint16_at(element_indices((count,)), xp.uint64(key)))
        assert drawn.dtype == np.uint64
        assert drawn.tolist() == [python_uint16(key, j) for j in range(count)]
        np.testing.assert_array_equal(drawn, host(random_uint16(key, (count,))))


def test_the_comparison_catches_the_pieces_read_in_the_other_order(backend_name):
    xp = backend.get_xp()
    planted = host(big_endian_uint16_at(element_indices((9,)), xp.uint64(KEYS[1])))
    assert planted.tolist() != [python_uint16(KEYS[1], j) for j in range(9)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("residual", [False, True], ids=["alone", "residual"])
def test_the_one_kernel_forward_draws_the_fast_masks_bit_for_bit(backend_name, dtype, residual):
    with minitrans.using(dtype=dtype):
        for shape in SHAPES:
            for key in KEYS:
                y, keep = one_kernel_forward(shape, key, residual)
                want = host(dropout.dropout_keep_mask_fast(key, shape, 0.3))
                np.testing.assert_array_equal(host(keep), want)
                assert host(y).dtype == np.dtype(dtype)
                np.testing.assert_allclose(host(y), expected_output(shape, want, residual),
                                           rtol=TOLERANCE[dtype], atol=0)


@pytest.mark.parametrize("name", ["numpy", "strict"])  # CuPy keeps the body it compiled
def test_the_mask_comparison_catches_a_wrong_hash(monkeypatch, name):
    monkeypatch.setattr(dropout, "random_uint16_at", big_endian_uint16_at)
    with minitrans.using(name):
        _, keep = one_kernel_forward((5, 7), KEYS[1], residual=False)
    assert not np.array_equal(host(keep), host(dropout.dropout_keep_mask_fast(KEYS[1],
                                                                             (5, 7), 0.3)))


def one_kernel_forward(shape, key, residual):
    """The device version of dropout's draw-and-apply at p = 0.3, on inputs of ``shape``."""
    x, other = inputs(shape)
    if residual:
        return dropout.residual_dropout_forward.device(other, x, key, 0.3)
    return dropout.dropout_forward.device(x, key, 0.3)


def expected_output(shape, keep, residual):
    """x * m / 0.7 (plus the residual), on the host in the input's dtype."""
    x, other = (host(a) for a in inputs(shape))
    y = x * keep * (1.0 / 0.7)
    return other + y if residual else y


def inputs(shape):
    rng = np.random.default_rng(0)
    return (backend.from_host(rng.standard_normal(shape)),
            backend.from_host(rng.standard_normal(shape)))


def test_element_indices_are_views_of_one_kept_counter(monkeypatch):
    monkeypatch.setattr(random_bits, "_counters", {})
    with minitrans.using("strict"):
        with launches.count_launches() as first:
            longest = element_indices((4, 6))
        with launches.count_launches() as again:
            shorter = element_indices((2, 3, 2))
            same = element_indices((4, 6))
        with launches.count_launches() as longer:
            element_indices((5, 5))
    assert first.places == ["arange"] and again.count == 0 and longer.places == ["arange"]
    assert host(shorter).tolist() == np.arange(12).reshape(2, 3, 2).tolist()
    assert host(same).tolist() == host(longest).tolist() == np.arange(24).reshape(4, 6).tolist()
    monkeypatch.setattr(random_bits, "_counters", {})  # the plant: nothing kept
    with minitrans.using("strict"), launches.count_launches() as unkept:
        element_indices((2, 3, 2))
    assert unkept.places == ["arange"]

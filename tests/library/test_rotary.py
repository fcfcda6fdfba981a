"""Rotary position embedding: rotations by position, their inverse as the
backward, any offset, scores that depend on the distance alone, and inside
multi-head attention."""

import numpy as np
import pytest

import minitrans
from minitrans import RotaryEmbedding
from minitrans.gradcheck import check_layer, randomise_params
from minitrans.layers import rotary
from minitrans.layers.multihead import MultiHeadAttention
from tests.library.conftest import assert_gradcheck, assert_names


def host(x):
    return minitrans.to_numpy(x)


def rotate_half_reference(x, positions, base=10000.0):
    """Hugging Face Llama's formula on the host: x cos + rotate_half(x) sin,
    rotate_half(x) = [-x2, x1], cos and sin repeated over both halves."""
    d = x.shape[-1]
    inv_freq = 1.0 / base ** (np.arange(0, d, 2) / d)
    angle = np.concatenate([np.outer(positions, inv_freq)] * 2, axis=-1)  # (T, d)
    half = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], axis=-1)
    return x * np.cos(angle) + half * np.sin(angle)


@pytest.mark.parametrize("offset", [0, 3])
def test_forward_equals_hugging_face_s_rotate_half(float64, randn, offset):
    layer = RotaryEmbedding(6, max_len=10, base=500000.0)  # Llama 3's base
    x = randn(2, 3, 4, 6)
    expected = rotate_half_reference(host(x), np.arange(offset, offset + 4), base=500000.0)
    np.testing.assert_allclose(host(layer(x, offset=offset)), expected, rtol=1e-12, atol=1e-12)


def test_the_paper_s_neighbouring_pairs_on_permuted_coordinates_are_the_same_rotation(
        float64, randn):
    """Su et al. turn (2i, 2i+1); minitrans turns (i, i + d/2): y = P^T R P x
    with P the permutation that interleaves the two halves."""
    d, T = 8, 5
    x = host(randn(T, d))
    order = np.ravel(np.column_stack([np.arange(d // 2), np.arange(d // 2, d)]))  # 0, 4, 1, 5..
    theta = 10000.0 ** (-np.arange(0, d, 2) / d)
    angle = np.arange(T)[:, None] * theta  # (T, d/2)
    interleaved = x[:, order]
    paper = np.empty_like(interleaved)
    paper[:, 0::2] = interleaved[:, 0::2] * np.cos(angle) - interleaved[:, 1::2] * np.sin(angle)
    paper[:, 1::2] = interleaved[:, 1::2] * np.cos(angle) + interleaved[:, 0::2] * np.sin(angle)
    undone = np.empty_like(paper)
    undone[:, order] = paper
    mine = host(RotaryEmbedding(d, max_len=T)(minitrans.from_host(x)))
    np.testing.assert_allclose(mine, undone, rtol=1e-12, atol=1e-12)


def test_scores_depend_only_on_the_distance_between_positions(float64, randn):
    """(R_m q) . (R_n k) = q . R_{n-m} k: shifting both positions by s
    changes no score; changing the distance does."""
    layer = RotaryEmbedding(8, max_len=64)
    q, k = randn(1, 8), randn(1, 8)

    def score(m, n):
        return float((host(layer.rotate(q, offset=m)) * host(layer.rotate(k, offset=n))).sum())

    for m, n in [(0, 0), (2, 7), (9, 4), (20, 21)]:
        shifted = [score(m + s, n + s) for s in (1, 5, 30)]
        np.testing.assert_allclose(shifted, score(m, n), rtol=1e-10, atol=1e-12)
    assert abs(score(0, 3) - score(0, 4)) > 1e-3


def test_any_offset_rotates_as_the_whole_sequence_would(float64, randn):
    """Decoding feeds one position at a time: rows rotated at offset t
    equal rows t.. of the whole sequence rotated from 0."""
    layer = RotaryEmbedding(4, max_len=12)
    x = randn(2, 9, 4)
    whole = host(layer.rotate(x))
    for offset in (0, 4, 8):
        np.testing.assert_array_equal(host(layer.rotate(x[:, offset:offset + 1], offset)),
                                      whole[:, offset:offset + 1])


def test_backward_is_the_inverse_rotation(float64, randn):
    layer = RotaryEmbedding(6, max_len=8)
    x = randn(3, 5, 6)
    y = layer(x, offset=2)
    np.testing.assert_allclose(host(layer.backward(y)), host(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(host(y), axis=-1), np.linalg.norm(host(x), axis=-1))


@pytest.mark.parametrize("offset", [0, 3])
def test_gradcheck(float64, randn, offset):
    results = assert_gradcheck(RotaryEmbedding(4, max_len=8), randn(2, 2, 3, 4), offset=offset)
    assert [r.tensor for r in results] == ["x"]


def test_the_checker_fails_a_backward_that_rotates_forward_again(float64, randn):
    """R_m in place of R_m^T: right only at position 0."""

    class RotatingTwice(RotaryEmbedding):
        def backward(self, dy):
            _, offset = self.saved()
            return self.rotate(dy, offset)

    results = check_layer(RotatingTwice(4, max_len=8), randn(2, 3, 4), offset=1)
    assert not results[0].passed


@pytest.mark.parametrize("offset", [0, 2])
def test_rotary_self_attention_gradcheck(float64, randn, offset):
    layer = randomise_params(MultiHeadAttention(4, 2, rng=0, rope=True, max_len=8),
                             np.random.default_rng(0))
    mask = minitrans.get_xp().asarray(np.tril(np.ones((1, 3, 3), bool)))
    assert_gradcheck(layer, randn(2, 3, 4), mask=mask, offset=offset)


def test_rotary_self_attention_sees_distances_not_offsets(float64, randn):
    """Queries and keys rotated by absolute positions: attention over rows
    2.. of a sequence equals the whole sequence's rows 2.. where the first
    two keys are hidden, at offset 2 (as cached decoding computes it) and at
    any other offset, since every score depends on distances alone."""
    layer = MultiHeadAttention(8, 2, rng=0, rope=True, max_len=8)
    x = randn(1, 5, 8)
    hide_first_two = minitrans.get_xp().asarray(np.arange(5)[None, None, :] >= 2)
    whole = host(layer(x, mask=hide_first_two))[:, 2:]
    for offset in (2, 0, 5):
        np.testing.assert_allclose(host(layer(x[:, 2:], offset=offset)), whole, rtol=1e-10,
                                   atol=1e-12)
    unrotated = MultiHeadAttention(8, 2, rng=0)  # the same weights, no rotation
    assert not np.allclose(host(unrotated(x[:, 2:])), whole)


def test_cross_attention_does_not_rotate(backend_name, randn):
    with pytest.raises(ValueError) as info:
        MultiHeadAttention(8, 2, rope=True)(randn(2, 3, 8), randn(2, 4, 8))
    assert_names(info, "memory")


@pytest.mark.parametrize("kwargs, name", [
    ({"d_k": 5}, "d_k"), ({"d_k": 0}, "d_k"), ({"base": 1.0}, "base"), ({"max_len": 0}, "max_len"),
])
def test_bad_arguments_are_named(kwargs, name):
    with pytest.raises(ValueError) as info:
        RotaryEmbedding(**{"d_k": 4, **kwargs})
    assert_names(info, name)


def test_odd_heads_are_refused_in_attention_too():
    with pytest.raises(ValueError) as info:
        MultiHeadAttention(6, 2, rope=True)  # d_k = 3
    assert_names(info, "d_k")


def test_bad_inputs_are_named(backend_name, randn):
    layer = RotaryEmbedding(4, max_len=6)
    for kwargs, name in [({"x": randn(2, 3, 5)}, "x"), ({"x": randn(2, 4, 4), "offset": 3}, "x"),
                         ({"x": randn(2, 3, 4), "offset": -1}, "offset")]:
        with pytest.raises(ValueError) as info:
            layer.forward(**kwargs)
        assert_names(info, name)
    assert "max_len=6" in str(pytest.raises(ValueError, layer.rotate, randn(7, 4)).value)


def test_tables_are_computed_in_float64_then_cast(backend_name):
    cos, sin = rotary.rotary_tables(4000, 8)
    assert cos.dtype == sin.dtype == np.float32 and cos.shape == (4000, 4)
    angle = 3999 * 10000.0 ** (-np.arange(0, 8, 2) / 8)
    np.testing.assert_allclose(host(cos)[-1], np.cos(angle), atol=1e-7)

"""The exercise checkers of lessons 6, 7 and 8 (the decoder mask, splitting
and merging heads, single-head cross-attention) pass the solutions for many
seeds and fail the mistakes a learner is likely to make, each in the case
built to show it."""

import pathlib

import numpy as np
import pytest

from minitrans.core import backend
from minitrans.layers.attention import ScaledDotProductAttention
from minitrans.layers.multihead import MultiHeadAttention
from minitrans.ops import masks
from minitrans_course import exercises_masks_heads as ex
from tests.course.conftest import assert_fails_in_case
from tests.conftest import load_module

SOLUTIONS = pathlib.Path(__file__).resolve().parents[2] / "lessons" / "solutions"
FUNCTIONS = {}
for _stem in ("06_masks", "07_multi_head_attention", "08_cross_attention"):
    _module = load_module(SOLUTIONS / f"{_stem}.py", f"solutions_{_stem}_for_masks_heads_tests")
    FUNCTIONS.update({n: getattr(_module, n) for n in ex.CHECKERS if hasattr(_module, n)})


def test_the_references_agree_with_minitrans():
    """The references are written apart from minitrans; they follow its conventions."""
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 9, size=(3, 5))
    ids[0, 3:] = ids[2, 1:] = 0
    x = rng.standard_normal((2, 3, 8))
    with backend.using("numpy", dtype="float64"):
        assert np.array_equal(ex.decoder_mask_reference(ids, 0), masks.decoder_mask(ids, 0))
        layer = MultiHeadAttention(8, 4, rng=0)
        assert np.array_equal(ex.split_heads_reference(x, 4), layer.split_heads(x))
        heads = rng.standard_normal((2, 4, 3, 2))
        assert np.array_equal(ex.merge_heads_reference(heads), layer.merge_heads(heads))
        memory, W = rng.standard_normal((2, 5, 8)), rng.standard_normal((3, 8, 4))
        src_mask = masks.padding_mask(ids[1:], 0)  # (2, 1, 5)
        want = ScaledDotProductAttention().forward(x @ W[0], memory @ W[1], memory @ W[2], src_mask)
    got = ex.cross_attention_reference(x, memory, *W, src_mask)
    assert np.allclose(got, want, rtol=1e-12, atol=1e-12)


# ---- wrong answers a learner might write, each with the case that must catch it


def _decoder_mask(ids, pad_id, query_axis=False, strict=False, padding=True):
    T = ids.shape[1]
    causal = np.tril(np.ones((T, T), dtype=bool), k=-1 if strict else 0)
    real = (ids != pad_id)[:, :, None] if query_axis else (ids != pad_id)[:, None, :]
    return causal & real if padding else np.broadcast_to(causal, (len(ids), T, T))


def _split(x, h, transpose=True):
    B, T, d_model = x.shape
    if not transpose:
        return x.reshape(B, h, T, d_model // h)  # each "head" holds features of other positions
    return x.reshape(B, T, d_model // h, h).transpose(0, 3, 1, 2)  # every h-th feature


def _merge(heads, transpose=True):
    B, h, T, d_k = heads.shape
    if not transpose:
        return heads.reshape(B, T, h * d_k)
    return heads.transpose(0, 2, 3, 1).reshape(B, T, h * d_k)  # features interleaved


def _cross(x, memory, W_Q, W_K, W_V, src_mask, mask=True, scale=True, kv_from_x=False):
    Q, source = x @ W_Q, x if kv_from_x else memory
    K, V = source @ W_K, source @ W_V
    scores = Q @ K.swapaxes(-1, -2) / (np.sqrt(Q.shape[-1]) if scale else 1.0)
    if mask:
        scores = np.where(src_mask, scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True) @ V


WRONG = [
    ("decoder_mask", lambda *a: _decoder_mask(*a, query_axis=True), "padding at the end"),
    ("decoder_mask", lambda *a: _decoder_mask(*a, strict=True), "no padding"),
    ("decoder_mask", lambda *a: _decoder_mask(*a, padding=False), "padding at the end"),
    ("decoder_mask", lambda ids, pad_id: _decoder_mask(ids, 0), "pad_id = 7, not 0"),
    ("split_heads", lambda *a: _split(*a, transpose=False), "random"),
    ("split_heads", lambda *a: _split(*a), "random"),
    ("merge_heads", lambda *a: _merge(*a, transpose=False), "random"),
    ("merge_heads", lambda *a: _merge(*a), "random"),
    ("cross_attention", lambda *a: _cross(*a, mask=False), "source padding"),
    ("cross_attention", lambda *a: _cross(*a, scale=False), "no padding, T_t != T_s"),
    ("cross_attention", lambda *a: _cross(*a, kv_from_x=True), "no padding, T_t != T_s"),
]


@pytest.mark.parametrize("name, wrong, case", WRONG, ids=[f"{n}-{c}" for n, _, c in WRONG])
def test_a_typical_mistake_fails_in_its_case(name, wrong, case):
    assert_fails_in_case(ex.CHECKERS[name], wrong, case)


def test_a_mask_of_zeros_and_ones_is_read_as_booleans():
    """A learner's int mask with the right entries is right: masks compare by value."""

    def as_ints(ids, pad_id):
        return FUNCTIONS["decoder_mask"](ids, pad_id).astype(int)

    assert ex.check_decoder_mask(as_ints, quiet=True, seed=0).passed

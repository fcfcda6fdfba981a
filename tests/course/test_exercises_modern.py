"""Lesson 22's exercises: RMSNorm, rotary positions,
SwiGLU and the backward of grouped-query attention. Each checker passes the
solution, fails the mistakes a learner is likely to make in the case that
shows them, and its slow reference agrees with minitrans's own layer (the
two are written independently: a bug shared by both would have to be made
twice)."""

import pathlib

import numpy as np
import pytest

import minitrans
from minitrans import MultiHeadAttention, RMSNorm, RotaryEmbedding, SwiGLUFeedForward
from minitrans_course import exercises_modern
from minitrans_course import modern_references as ref
from minitrans_course.exercises import CHECKERS
from tests.conftest import load_module
from tests.course.conftest import assert_fails_in_case

SOLUTION = (pathlib.Path(__file__).resolve().parents[2] / "lessons" / "solutions"
            / "22_todays_decoder.py")
solution = load_module(SOLUTION, "solutions_22_todays_decoder")


def test_the_checkers_are_registered():
    for name, checker in exercises_modern.CHECKERS.items():
        assert CHECKERS[name] is checker


@pytest.mark.parametrize("name", sorted(exercises_modern.CHECKERS))
def test_the_solution_passes_on_many_seeds(name):
    for seed in range(5):
        result = CHECKERS[name](getattr(solution, name), quiet=True, seed=seed)
        assert result.passed and result.rel_error < 1e-4, (seed, result.message)


# ------------------------------------------------------------ typical mistakes


def _rms_centred(x, g, eps, dy):
    """LayerNorm's habit: the mean subtracted before the root mean square."""
    return solution.rms_norm(x - x.mean(axis=-1, keepdims=True), g, eps, dy)


def _rms_layernorm_backward(x, g, eps, dy):
    """The backward with LayerNorm's -mean(dx_hat) term, which RMSNorm has not."""
    y, dx, dg = solution.rms_norm(x, g, eps, dy)
    inv_rms = 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    return y, dx - (dy * g).mean(axis=-1, keepdims=True) * inv_rms, dg


def _rms_eps_outside(x, g, eps, dy):
    """x / (rms + eps): eps added after the square root."""
    rms = np.sqrt((x * x).mean(axis=-1, keepdims=True))
    y, dx, dg = solution.rms_norm(x, g, 0.0, dy)
    return g * x / (rms + eps), dx, dg


def _rms_dg_over_the_batch(x, g, eps, dy):
    """dg summed over the first axis only."""
    y, dx, _ = solution.rms_norm(x, g, eps, dy)
    return y, dx, (dy * y / g).sum(axis=0)


def _rotate_neighbours(x, offset, base):
    """Su et al.'s pairing (2i, 2i + 1), not minitrans's (i, i + d_k/2)."""
    d_k = x.shape[-1]
    order = np.concatenate([np.arange(0, d_k, 2), np.arange(1, d_k, 2)])
    inverse = np.argsort(order)
    return solution.rotate(x[..., order], offset, base)[..., inverse]


def _rotate_no_offset(x, offset, base):
    return solution.rotate(x, 0, base)


def _rotate_backwards(x, offset, base):
    """The rotation by -angle (the backward's), not +angle."""
    d_k = x.shape[-1]
    flipped = np.concatenate([x[..., :d_k // 2], -x[..., d_k // 2:]], axis=-1)
    out = solution.rotate(flipped, offset, base)
    return np.concatenate([out[..., :d_k // 2], -out[..., d_k // 2:]], axis=-1)


def _rotate_wrong_frequencies(x, offset, base):
    """theta_i = base^(-i / d_k): the 2 of the exponent forgotten."""
    return solution.rotate(x, offset, base ** 0.5)


def _swiglu_swapped(x, W_gate, W_up, W_down):
    return solution.swiglu(x, W_up, W_gate, W_down)  # SiLU on x W_up


def _swiglu_sigmoid_gate(x, W_gate, W_up, W_down):
    """GLU: sigma(a) * u, the gate without its factor a."""
    a = x @ W_gate
    return (1.0 / (1.0 + np.exp(-a)) * (x @ W_up)) @ W_down


def _swiglu_naive_sigmoid(x, W_gate, W_up, W_down):
    """sigma(a) = e^a / (1 + e^a): inf / inf = NaN at a = 1000."""
    a = x @ W_gate
    return (a * np.exp(a) / (1.0 + np.exp(a)) * (x @ W_up)) @ W_down


def _gqa_interleaved(Q, K, V, dout):
    """Query head i given key/value head i % kv_heads, not i // g."""
    kv_heads, h = K.shape[1], Q.shape[1]
    order = np.concatenate([np.arange(i, h, kv_heads) for i in range(kv_heads)])
    dQ, dK, dV = solution.grouped_attention_backward(Q[:, order], K, V, dout[:, order])
    return dQ[:, np.argsort(order)], dK, dV


def _gqa_first_of_group(Q, K, V, dout):
    """dK and dV of the group's first query head only, not the sum."""
    g = Q.shape[1] // K.shape[1]
    dQ, dK, dV = solution.grouped_attention_backward(Q, K, V, dout)
    _, dK_1, dV_1 = solution.grouped_attention_backward(
        Q[:, ::g], K, V, dout[:, ::g])
    return dQ, dK_1, dV_1


def _gqa_mean(Q, K, V, dout):
    g = Q.shape[1] // K.shape[1]
    dQ, dK, dV = solution.grouped_attention_backward(Q, K, V, dout)
    return dQ, dK / g, dV / g


WRONG = [
    ("rms_norm", _rms_centred, "random"),
    ("rms_norm", _rms_layernorm_backward, "random"),
    ("rms_norm", _rms_eps_outside, "random"),
    ("rms_norm", _rms_dg_over_the_batch, "random"),
    ("rotate", _rotate_neighbours, "from position 0"),
    ("rotate", _rotate_no_offset, "from position 5"),
    ("rotate", _rotate_backwards, "from position 0"),
    ("rotate", _rotate_wrong_frequencies, "from position 0"),
    ("swiglu", _swiglu_swapped, "random"),
    ("swiglu", _swiglu_sigmoid_gate, "random"),
    ("swiglu", _swiglu_naive_sigmoid, "gate pre-activations of +1000 and -1000"),
    ("grouped_attention_backward", _gqa_interleaved, "2 key/value heads for 4 query heads"),
    ("grouped_attention_backward", _gqa_first_of_group, "2 key/value heads for 4 query heads"),
    ("grouped_attention_backward", _gqa_mean, "2 key/value heads for 4 query heads"),
]


@pytest.mark.parametrize("name, wrong, case", WRONG, ids=[w.__name__ for _, w, _ in WRONG])
def test_a_typical_mistake_fails_in_its_case(name, wrong, case):
    assert_fails_in_case(CHECKERS[name], wrong, case)


# ------------------------------------------------- references against minitrans


def _host(array):
    return minitrans.to_numpy(array)


def test_the_references_agree_with_minitrans_layers():
    rng = np.random.default_rng(0)
    with minitrans.using("numpy", dtype="float64"):
        x, dy = rng.standard_normal((2, 3, 5)), rng.standard_normal((2, 3, 5))
        norm = RMSNorm(5, eps=1e-5)
        norm.params["g"][...] = rng.standard_normal(5)
        y = norm.forward(x)
        dx = norm.backward(dy)
        want = ref.rms_norm(x, _host(norm.params["g"]), 1e-5, dy)
        for have, expected in zip((y, dx, norm.grads["g"]), want):
            np.testing.assert_allclose(_host(have), expected, rtol=1e-10, atol=1e-12)

        rotary = RotaryEmbedding(6, max_len=32, base=500.0)
        q = rng.standard_normal((2, 3, 4, 6))
        np.testing.assert_allclose(_host(rotary.forward(q, offset=7)), ref.rotate(q, 7, 500.0),
                                   rtol=1e-10, atol=1e-12)

        ffn = SwiGLUFeedForward(5, 7, rng=0, bias=False)
        W = [_host(layer.params["W"]) for layer in (ffn.W_gate, ffn.W_up, ffn.W_down)]
        np.testing.assert_allclose(_host(ffn.forward(x)), ref.swiglu(x, *W), rtol=1e-10,
                                   atol=1e-12)


def test_the_grouped_reference_agrees_with_multihead_attention():
    """MultiHeadAttention with kv_heads 2 of 4 and identity-free weights: its
    dK and dV (before the projections) against the reference's, by the chain
    rule through W_K and W_V."""
    rng = np.random.default_rng(1)
    B, T, d_model, h, kv_heads = 2, 4, 8, 4, 2
    with minitrans.using("numpy", dtype="float64"):
        attention = MultiHeadAttention(d_model, h, rng=0, kv_heads=kv_heads, bias=False)
        x, dout = rng.standard_normal((B, T, d_model)), rng.standard_normal((B, T, d_model))
        causal = np.tril(np.ones((T, T), dtype=bool))[None]
        attention.zero_grad()
        attention.forward(x, mask=causal)
        attention.backward(dout)
        W = {name: _host(getattr(attention, name).params["W"]) for name in ("W_Q", "W_K", "W_V",
                                                                         "W_O")}
        split = attention.split_heads
        Q = _host(split(x @ W["W_Q"]))
        K, V = (_host(split(x @ W[name], kv_heads)) for name in ("W_K", "W_V"))
        dheads = _host(split(dout @ W["W_O"].T))
        dQ, dK, dV = ref.grouped_attention_backward(Q, K, V, dheads)
        merge = attention.merge_heads
        for name, grad in (("W_Q", dQ), ("W_K", dK), ("W_V", dV)):
            expected = x.reshape(-1, d_model).T @ _host(merge(grad)).reshape(B * T, -1)
            np.testing.assert_allclose(_host(getattr(attention, name).grads["W"]), expected,
                                       rtol=1e-9, atol=1e-12)

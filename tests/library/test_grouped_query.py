"""Grouped-query attention: kv_heads key/value heads shared by groups of
query heads, from multi-head (kv_heads = h) to multi-query (kv_heads = 1)."""

import numpy as np
import pytest

import minitrans
from minitrans.gradcheck import check_layer, randomise_params
from minitrans.layers import grouped
from minitrans.layers.multihead import MultiHeadAttention
from minitrans.model.config import ModelConfig
from tests.library.conftest import assert_gradcheck, assert_names


def host(x):
    return minitrans.to_numpy(x)


def causal(T):
    return minitrans.get_xp().asarray(np.tril(np.ones((1, T, T), bool)))


D, H, D_K = 4, 4, 1  # tiny: central differences run two forwards per number


def attention(kv_heads, **options):
    layer = MultiHeadAttention(D, H, rng=0, kv_heads=kv_heads, **options)
    return randomise_params(layer, np.random.default_rng(0))


@pytest.mark.parametrize("kernels", ["fast", "reference"])
@pytest.mark.parametrize("kv_heads", [1, 2], ids=["multi-query", "kv-heads-2"])
def test_masked_self_attention_gradcheck(float64, randn, kv_heads, kernels):
    """Both versions of layers.grouped: the stacked queries and repeat_kv."""
    layer = attention(kv_heads)
    assert layer.W_K.params["W"].shape == layer.W_V.params["W"].shape == (D, kv_heads * D_K)
    with minitrans.using(kernels=kernels):
        assert_gradcheck(layer, randn(2, 3, D), mask=causal(3))


def test_the_checker_fails_a_stacked_backward_that_averages_each_group(float64, randn,
                                                                      monkeypatch):
    """The fast version's dK and dV divided by g, a mean over the group
    instead of its sum: the key and value weights go wrong, not the
    queries'."""
    right = grouped.stacked_heads_backward

    def averaged(layer, dheads):
        dQ, dK, dV = right(layer, dheads)
        group = layer.h // layer.kv_heads
        return dQ, dK / group, dV / group

    monkeypatch.setattr(grouped, "stacked_heads_backward", averaged)
    failed = {r.tensor for r in check_layer(attention(2), randn(2, 3, D), mask=causal(3))
              if not r.passed}
    assert {"x", "W_K.W", "W_V.W", "W_V.b"} <= failed and "W_Q.W" not in failed


def test_cross_attention_without_biases_gradcheck(float64, randn):
    layer = attention(2, bias=False)
    results = assert_gradcheck(layer, randn(2, 3, D), randn(2, 4, D))
    assert {r.tensor for r in results} == {"x", "memory", "W_Q.W", "W_K.W", "W_V.W", "W_O.W"}


def test_kv_heads_h_is_multi_head_attention_with_the_same_weights(float64, randn):
    plain, grouped = attention(None), attention(H)
    for (name, value, _), (other, mine, _) in zip(plain.named_parameters(),
                                                  grouped.named_parameters()):
        assert name == other
        np.testing.assert_array_equal(host(value), host(mine))
    x, dy = randn(2, 3, D), randn(2, 3, D)
    np.testing.assert_array_equal(host(plain(x, mask=causal(3))), host(grouped(x, mask=causal(3))))
    np.testing.assert_array_equal(host(plain.backward(dy)), host(grouped.backward(dy)))


def test_each_group_of_query_heads_reads_one_key_value_head(float64, randn):
    """kv_heads 2 of 4 equals multi-head attention whose W_K and W_V repeat
    each key/value head's columns for its group: query heads 0, 1 read
    head 0, query heads 2, 3 read head 1 (Hugging Face's repeat_kv)."""
    grouped, plain = attention(2), attention(None)
    for name in ("W_Q", "W_O"):
        plain_layer, grouped_layer = getattr(plain, name), getattr(grouped, name)
        plain_layer.params.update(grouped_layer.params)
    for name, key in (("W_K", "W"), ("W_V", "W"), ("W_V", "b")):
        value = host(getattr(grouped, name).params[key])  # (..., kv_heads * d_k)
        leading = value.shape[:-1]
        heads = value.reshape(*leading, 2, 1, D_K)  # (..., kv_heads, 1, d_k)
        repeated = np.broadcast_to(heads, (*leading, 2, H // 2, D_K)).reshape(*leading, H * D_K)
        getattr(plain, name).params[key] = minitrans.from_host(repeated)
    x = randn(2, 3, D)
    np.testing.assert_allclose(host(grouped(x)), host(plain(x)), rtol=1e-12, atol=1e-12)


def test_the_checker_fails_a_backward_that_keeps_one_head_of_each_group(float64, randn,
                                                                       monkeypatch):
    """dK and dV of the first copy only, not the group's sum: the key and
    value weights go wrong, not the queries'."""
    def first_of_group(self, dheads):
        group = self.h // self.kv_heads
        return dheads[:, ::group]

    monkeypatch.setattr(MultiHeadAttention, "sum_groups", first_of_group)
    with minitrans.using(kernels="reference"):  # the version that repeats K and V
        failed = {r.tensor for r in check_layer(attention(2), randn(2, 3, D)) if not r.passed}
    assert {"x", "W_K.W", "W_V.W", "W_V.b"} <= failed and "W_Q.W" not in failed


def test_keys_values_and_the_cache_hold_only_the_shared_heads(backend_name, randn):
    layer = attention(1)
    K, V = layer.keys_values(randn(2, 5, D))
    assert K.shape == V.shape == (2, 1, 5, D_K)
    config = ModelConfig(vocab_size=7, d_model=8, h=4, N=2, d_ff=8, kv_heads=2,
                         decoder_only=True, max_len=6)
    state = minitrans.DecoderOnlyLM(config, rng=0).start(3)
    assert [cache.K.shape for cache in state.caches] == [(3, 2, 6, 2)] * 2


@pytest.mark.parametrize("kv_heads", [1, 2], ids=["multi-query", "kv-heads-2"])
@pytest.mark.parametrize("length_q, mask", [(1, None), (1, "padding"), (3, "causal"),
                                            (3, "per head")])
def test_decoding_attends_each_group_at_once_with_forward_s_numbers(backend_name, randn,
                                                                     kv_heads, length_q, mask):
    """attend (decoding) stacks a group's query heads instead of repeating
    the cache: the same output as forward's repeat_kv, and the weights as
    (B, h, T_q, T_k), for one new token and for several, with every kind of
    mask."""
    xp = minitrans.get_xp()
    layer = attention(kv_heads)
    x, memory = randn(2, length_q, D), randn(2, 5, D)
    masks = {None: None,
             "padding": np.array([[[True] * 5], [[True, True, True, False, False]]]),
             "causal": np.tril(np.ones((length_q, 5), bool), k=2)[None].repeat(2, axis=0),
             "per head": np.random.default_rng(1).random((2, H, length_q, 5)) < 0.7}
    chosen = None if masks[mask] is None else xp.asarray(masks[mask])
    expected = host(layer.forward(x, memory, mask=chosen))
    expected_weights = host(layer.attention.attention_weights)
    out = host(layer.attend(x, *layer.keys_values(memory), mask=chosen))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    weights = host(layer.attention.attention_weights)
    assert weights.shape == (2, H, length_q, 5)
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("kv_heads, expected", [(3, "divisor"), (0, "positive integer"),
                                                (2.0, "positive integer"), (8, "divisor")])
def test_bad_kv_heads_are_named(kv_heads, expected):
    for build in (lambda: MultiHeadAttention(8, 4, kv_heads=kv_heads),
                  lambda: ModelConfig(vocab_size=7, d_model=8, h=4, kv_heads=kv_heads)):
        with pytest.raises(ValueError) as info:
            build()
        assert_names(info, "kv_heads")
        assert expected in str(info.value)

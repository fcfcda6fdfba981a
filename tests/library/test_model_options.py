"""The options after the paper: heads of any width d_k (Table 3, rows A and B),
learned positional embeddings (row E, GPT-2) and GELU (BERT, GPT-2). Each is
gradient-checked, shown failing the checker when its backward is wrong, and
counted by ModelConfig.parameter_count; the defaults are the paper's model."""

import dataclasses
import math

import numpy as np
import pytest

import minitrans
from minitrans import FeedForward
from minitrans.layers.multihead import MultiHeadAttention
from minitrans.layers.positional import PositionalEmbedding
from minitrans.model.config import ModelConfig
from minitrans.model.language_model import DecoderOnlyLM
from minitrans.ops import activations
from minitrans.gradcheck import check_layer
from minitrans.gradcheck import randomise_params
from tests.library.conftest import assert_gradcheck, assert_names


def test_gelu_is_close_to_x_times_the_normal_cdf():
    """The tanh form against the exact a * Phi(a), Phi(a) = (1 + erf(a / sqrt 2)) / 2."""
    a = np.linspace(-6, 6, 241)
    exact = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in a])
    with minitrans.using("numpy", dtype="float64"):
        approximate = activations.gelu(a)
    assert np.max(np.abs(approximate - exact)) < 1e-3
    assert approximate[0] == pytest.approx(0, abs=1e-6) and approximate[-1] == pytest.approx(6)


def test_gelu_backward_is_the_derivative():
    a = np.linspace(-5, 5, 101)
    h = 1e-6
    with minitrans.using("numpy", dtype="float64"):
        numeric = (activations.gelu(a + h) - activations.gelu(a - h)) / (2 * h)
        analytic = activations.gelu_backward(a, np.ones_like(a))
    np.testing.assert_allclose(analytic, numeric, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("shape", [(2, 3, 4), (5, 4)], ids=["3d", "2d"])
def test_gelu_feed_forward_gradcheck(float64, randn, shape):
    layer = FeedForward(4, 6, rng=0, activation="gelu")
    randomise_params(layer, np.random.default_rng(0))
    results = assert_gradcheck(layer, randn(*shape))
    assert {r.tensor for r in results} == {"x", "W_1.W", "W_1.b", "W_2.W", "W_2.b"}


def test_the_checker_fails_a_gelu_feed_forward_with_relu_s_backward(float64, randn, monkeypatch):
    """ReLU's [a > 0] in place of GELU'(a): x and W_1's gradients go wrong."""
    monkeypatch.setattr(activations, "gelu_backward", lambda a, dy: dy * (a > 0))
    layer = FeedForward(4, 6, rng=0, activation="gelu")
    randomise_params(layer, np.random.default_rng(0))
    failed = {r.tensor for r in check_layer(layer, randn(2, 3, 4)) if not r.passed}
    assert {"x", "W_1.W", "W_1.b"} <= failed and "W_2.b" not in failed


@pytest.mark.parametrize("offset", [0, 2])
def test_learned_positions_gradcheck(float64, randn, offset):
    layer = PositionalEmbedding(4, max_len=6, rng=0)
    results = assert_gradcheck(layer, randn(2, 3, 4), offset=offset)
    assert {r.tensor for r in results} == {"x", "P"}


def test_learned_positions_add_their_rows_and_get_the_batch_sum(float64, randn):
    layer = PositionalEmbedding(4, max_len=6, rng=0)
    x, dy = randn(2, 3, 4), randn(2, 3, 4)
    P = minitrans.to_numpy(layer.params["P"]).copy()
    np.testing.assert_array_equal(minitrans.to_numpy(layer(x, offset=2)),
                                  minitrans.to_numpy(x) + P[2:5])
    layer.backward(dy)
    grad = minitrans.to_numpy(layer.grads["P"])
    np.testing.assert_allclose(grad[2:5], minitrans.to_numpy(dy).sum(axis=0))
    assert not grad[:2].any() and not grad[5:].any()


def test_the_checker_fails_learned_positions_that_forget_the_batch_sum(float64, randn,
                                                                        monkeypatch):
    def first_sentence_only(self, dy):
        x_shape, offset = self.saved()
        self.grads["P"][offset:offset + x_shape[-2]] += dy[0]
        return dy

    monkeypatch.setattr(PositionalEmbedding, "backward", first_sentence_only)
    failed = {r.tensor for r in check_layer(PositionalEmbedding(4, 6, rng=0), randn(2, 3, 4))
              if not r.passed}
    assert failed == {"P"}


def test_learned_positions_start_at_the_sinusoids_scale():
    with minitrans.using("numpy", dtype="float64"):
        table = minitrans.to_numpy(PositionalEmbedding(64, max_len=512, rng=0).params["P"])
        sines = minitrans.to_numpy(minitrans.sinusoidal_table(512, 64))
    assert np.mean(table**2) == pytest.approx(np.mean(sines**2), rel=0.05)


def test_heads_of_a_width_of_their_own_gradcheck(float64, randn):
    layer = MultiHeadAttention(6, 4, rng=0, d_k=2)  # 4 heads of 2: 8 columns, not 6
    randomise_params(layer, np.random.default_rng(0))
    x, mask = randn(2, 3, 6), minitrans.get_xp().asarray(np.tril(np.ones((1, 3, 3), bool)))
    assert layer.W_Q.params["W"].shape == (6, 8) and layer.W_O.params["W"].shape == (8, 6)
    assert_gradcheck(layer, x, mask=mask)
    assert minitrans.to_numpy(layer.forward(x)).shape == (2, 3, 6)


def test_the_defaults_are_the_paper_s_model():
    config = ModelConfig(vocab_size=11, d_model=8, h=2)
    assert (config.d_k, config.positions, config.activation) == (None, "sinusoidal", "relu")
    assert config.head_width == 4
    old_record = {k: v for k, v in config.to_dict().items()
                  if k not in ("d_k", "positions", "activation")}
    assert ModelConfig.from_dict(old_record) == config  # a checkpoint from before them


@pytest.mark.parametrize("field, value, expected", [
    ("positions", "rotary", "sinusoidal"), ("activation", "swish", "gelu"),
    ("d_k", 0, "positive integer or None"), ("d_k", 2.5, "positive integer or None"),
])
def test_bad_options_are_named(field, value, expected):
    with pytest.raises((ValueError, TypeError)) as info:
        ModelConfig(vocab_size=11, d_model=8, h=2, **{field: value})
    assert_names(info, field)
    assert expected in str(info.value)


def test_pad_id_none_is_a_model_without_a_padding_token():
    """GPT-2 and Llama have no <pad>: pad_id=None masks no key (only the
    future), where pad_id=0 hides every key that is token 0."""
    with minitrans.using("numpy", dtype="float64"):
        config = ModelConfig.preset("tiny", vocab_size=11, decoder_only=True, pad_id=None)
        assert ModelConfig.from_dict(config.to_dict()).pad_id is None
        assert ModelConfig(vocab_size=11, d_model=8, h=2).pad_id == 0  # the default is kept
        ids = np.array([[3, 0, 5, 0], [4, 6, 7, 8]])
        mask = minitrans.to_numpy(minitrans.padding_mask(ids, None))
        assert mask.shape == (2, 1, 4) and mask.all()
        np.testing.assert_array_equal(minitrans.to_numpy(minitrans.decoder_mask(ids, None)),
                                      np.broadcast_to(np.tril(np.ones((4, 4), bool)), (2, 4, 4)))
        none = DecoderOnlyLM(config, rng=0).forward(ids)
        zero = DecoderOnlyLM(dataclasses.replace(config, pad_id=0), rng=0).forward(ids)
    np.testing.assert_array_equal(none[1], zero[1])  # no token 0 in the row: the same
    assert not np.allclose(none[0, 2:], zero[0, 2:])  # token 0 is attended to, not hidden


@pytest.mark.parametrize("value", ["0", -1, 11, 1.0])
def test_a_bad_pad_id_is_still_named(value):
    with pytest.raises(ValueError, match="pad_id: expected an integer in \\[0, 10\\] or None"):
        ModelConfig(vocab_size=11, d_model=8, h=2, pad_id=value)


def test_d_k_frees_d_model_from_divisibility_by_h():
    with pytest.raises(ValueError):
        ModelConfig(vocab_size=11, d_model=10, h=4)
    assert ModelConfig(vocab_size=11, d_model=10, h=4, d_k=3).head_width == 3


def test_gpt2_small_s_count_differs_from_openai_s_by_two_design_choices():
    """124,439,808 in OpenAI's release; minitrans has no key bias (12 x 768
    fewer) and an output bias (50,257 more)."""
    config = ModelConfig(vocab_size=50257, d_model=768, h=12, N=12, d_ff=3072, max_len=1024,
                         pre_norm=True, tie_embeddings=True, decoder_only=True,
                         positions="learned", activation="gelu")
    assert config.parameter_count() == 124_439_808 - 12 * 768 + 50_257


def test_the_pytorch_mirror_refuses_what_it_cannot_build():
    torch_modules = pytest.importorskip("minitrans.interop.torch_modules")
    config = ModelConfig(vocab_size=11, d_model=8, h=2, positions="learned")
    with pytest.raises(ValueError) as info:
        torch_modules.TorchTransformer(config)
    assert "config.positions" in str(info.value) and "'learned'" in str(info.value)

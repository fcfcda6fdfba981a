"""The options after the paper: heads of any width d_k (Table 3, rows A and B),
learned positional embeddings (row E, GPT-2) and GELU (BERT, GPT-2). Each is
gradient-checked, shown failing the checker when its backward is wrong, and
counted by ModelConfig.parameter_count; the defaults are the paper's model."""

import dataclasses
import math
import types

import numpy as np
import pytest

import minitrans
from minitrans import FeedForward
from minitrans.layers.multihead import MultiHeadAttention
from minitrans.layers.positional import PositionalEmbedding
from minitrans.model.config import ModelConfig
from minitrans.model import init_schemes, language_model
from minitrans.model.language_model import DecoderOnlyLM
from minitrans.ops import activations
from minitrans.gradcheck import check_layer
from minitrans.gradcheck import randomise_params
from minitrans.training.run_files.checkpoint import load_checkpoint, save_checkpoint
from minitrans.training.run_files.records import check_records
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
        analytic = activations.gelu_backward(a, activations.gelu_gate(a), np.ones_like(a))
    np.testing.assert_allclose(analytic, numeric, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("shape", [(2, 3, 4), (5, 4)], ids=["3d", "2d"])
def test_gelu_feed_forward_gradcheck(float64, randn, shape):
    layer = FeedForward(4, 6, rng=0, activation="gelu")
    randomise_params(layer, np.random.default_rng(0))
    results = assert_gradcheck(layer, randn(*shape))
    assert {r.tensor for r in results} == {"x", "W_1.W", "W_1.b", "W_2.W", "W_2.b"}


def test_the_checker_fails_a_gelu_feed_forward_with_relu_s_backward(float64, randn, monkeypatch):
    """ReLU's [a > 0] in place of GELU'(a): x and W_1's gradients go wrong."""
    monkeypatch.setattr(activations, "gelu_backward", lambda a, gate, dy: dy * (a > 0))
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
    assert config.init == "xavier"
    old_record = {k: v for k, v in config.to_dict().items()
                  if k not in ("d_k", "positions", "activation", "init")}
    assert ModelConfig.from_dict(old_record) == config  # a checkpoint from before them


@pytest.mark.parametrize("field, value, expected", [
    ("positions", "rotary", "sinusoidal"), ("activation", "swish", "gelu"),
    ("d_k", 0, "positive integer or None"), ("d_k", 2.5, "positive integer or None"),
    ("init", "foo", "'xavier', 'gpt'"), ("init", None, "'xavier', 'gpt'"),
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
    config = ModelConfig(vocab_size=11, d_model=8, h=2, positions="rope")
    with pytest.raises(ValueError) as info:
        torch_modules.TorchTransformer(config)
    assert "config.positions" in str(info.value) and "'rope'" in str(info.value)
    with pytest.raises(ValueError, match="config.norm"):
        torch_modules.TorchLanguageModel(ModelConfig(vocab_size=11, d_model=8, h=2, norm="rms",
                                                     decoder_only=True))


# ---- init="gpt": GPT-2's initial weights

GPT_SIZES = dict(vocab_size=256, d_model=128, h=4, d_ff=512, max_len=128, pre_norm=True)
RESIDUAL_OUTPUTS = ("attn.W_O.W", "feed_forward.W_2.W", "feed_forward.W_down.W")


def gpt_model(init="gpt", **options):
    """A model large enough for its weights' statistics (every matrix holds
    at least 16,384 numbers), with biases, so that they can be checked."""
    config = ModelConfig(**{**GPT_SIZES, "init": init, **options})
    build = DecoderOnlyLM if config.decoder_only else minitrans.Transformer
    return build(config, rng=0)


def assert_gpt_statistics(model):
    """Every matrix and table of standard deviation 0.02 and mean about 0,
    W_O and the feed-forward's last matrix 0.02 / sqrt(2 N); biases 0,
    norms 1 and 0."""
    residual_std = 0.02 / math.sqrt(2 * model.config.N)
    for name, param, _ in model.named_parameters():
        values = minitrans.to_numpy(param)
        if values.ndim >= 2:
            expected = residual_std if name.endswith(RESIDUAL_OUTPUTS) else 0.02
            assert abs(values.std() / expected - 1) < 0.05, name
            assert abs(values.mean()) < 0.1 * expected, name  # 12 standard errors or more
        else:
            gain = name.endswith((".gamma", ".g"))
            assert np.all(values == (1.0 if gain else 0.0)), name


GPT_MODELS = [
    dict(N=4, decoder_only=True, positions="learned", activation="gelu", tie_embeddings=True),
    dict(N=3, decoder_only=False, tie_embeddings=True, output_bias=True),  # cross-attention too
    dict(N=2, decoder_only=True, activation="swiglu", norm="rms", positions="rope"),
]


@pytest.mark.parametrize("options", GPT_MODELS)
def test_the_gpt_init_has_gpt_2_s_statistics(options):
    model = gpt_model(**options)
    assert_gpt_statistics(model)
    assert any(name.endswith(RESIDUAL_OUTPUTS) for name, _, _ in model.named_parameters())
    assert any(param.ndim == 1 and name.endswith(".b")
               for name, param, _ in model.named_parameters())  # biases were checked


def test_the_statistics_check_fails_today_s_init_and_wrong_gpt_inits(monkeypatch):
    options = GPT_MODELS[0]
    with pytest.raises(AssertionError):
        assert_gpt_statistics(gpt_model("xavier", **options))
    with monkeypatch.context() as patch:  # the residual projections left unscaled
        patch.setattr(init_schemes, "residual_outputs", lambda model: set())
        with pytest.raises(AssertionError):
            assert_gpt_statistics(gpt_model(**options))
    with monkeypatch.context() as patch:  # the residual projections scaled by 1 / (2 N)
        patch.setattr(init_schemes, "math", types.SimpleNamespace(sqrt=lambda x: x))
        with pytest.raises(AssertionError):
            assert_gpt_statistics(gpt_model(**options))

    def every_parameter_drawn(model, layers, rng):
        for _, param, _ in model.named_parameters():
            param[...] = minitrans.to_numpy(param) + rng.normal(0.0, 0.02, param.shape)
    with monkeypatch.context() as patch:  # biases and norms drawn too
        original = init_schemes.gpt_init
        patch.setattr(init_schemes, "gpt_init",
                      lambda model, layers, rng: (original(model, layers, rng),
                                                  every_parameter_drawn(model, layers, rng)))
        with pytest.raises(AssertionError):
            assert_gpt_statistics(gpt_model(**options))


def xavier_model_as_built(monkeypatch, apply_init):
    """The parameters (on the host) of a default-init model built with
    ``apply_init`` in place of init_schemes'."""
    with monkeypatch.context() as patch:
        patch.setattr(language_model, "apply_init", apply_init)
        model = gpt_model("xavier", N=2, decoder_only=True)
    return [minitrans.to_numpy(param) for _, param, _ in model.named_parameters()]


def assert_same_weights(ours, theirs):
    assert all(np.array_equal(a, b) for a, b in zip(ours, theirs))


def test_the_default_init_draws_what_the_layers_drew_before(monkeypatch):
    """init="xavier" draws nothing more: the weights of a model built with no
    init step at all, so the paper's models and their seeds are as they were."""
    as_drawn = xavier_model_as_built(monkeypatch, lambda *args: None)
    assert_same_weights(xavier_model_as_built(monkeypatch, init_schemes.apply_init), as_drawn)

    def always_gpt(model, scheme, layers, rng):  # the plant: every model gets GPT's init
        init_schemes.apply_init(model, "gpt", layers, rng)
    with pytest.raises(AssertionError):
        assert_same_weights(xavier_model_as_built(monkeypatch, always_gpt), as_drawn)


def test_a_checkpoint_records_the_init(tmp_path):
    model = gpt_model(N=1, decoder_only=True)
    path = tmp_path / "model.npz"
    arrays = {f"param/{name}": value for name, value, _ in model.named_parameters()}
    save_checkpoint(path, arrays, {"model_config": model.config.to_dict()})
    loaded, records = load_checkpoint(path)
    check_records(path, records, loaded)
    assert ModelConfig.from_dict(records["model_config"]).init == "gpt"
    for wrong in (3, "foo"):
        records["model_config"]["init"] = wrong
        with pytest.raises(ValueError, match="model_config.*init"):
            check_records(path, records, loaded)

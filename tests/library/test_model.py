"""The whole encoder-decoder and decoder-only models: gradients, masks, caches."""

import numpy as np
import pytest

import minitrans
from minitrans.layers.attention import ScaledDotProductAttention
from minitrans.model.attention_weights import AttentionMapsMixin, attention_layers
from minitrans.model.config import ModelConfig
from minitrans.model.decoder import Decoder
from minitrans.model.language_model import DecoderOnlyLM
from minitrans.model.transformer import Transformer
from minitrans.gradcheck import check_layer
from minitrans.gradcheck import tiny_model
from tests.library.conftest import assert_gradcheck, assert_names

VARIANTS = [
    pytest.param({}, id="untied-post-norm"),
    pytest.param({"tie_embeddings": True}, id="tied-post-norm"),
    pytest.param({"pre_norm": True}, id="untied-pre-norm"),
    pytest.param({"tie_embeddings": True, "pre_norm": True}, id="tied-pre-norm"),
    pytest.param({"positions": "learned", "activation": "gelu", "d_k": 3},
                 id="learned-positions-gelu-d_k-3"),
]


@pytest.mark.parametrize("options", VARIANTS)
def test_encoder_decoder_gradients_on_every_parameter(options):
    with minitrans.using("numpy", dtype="float64"):
        model, batch = tiny_model(**options)
        results = assert_gradcheck(model, *batch)
    checked = {r.tensor for r in results}
    assert "model.src_embed.embedding.W_E" in checked
    assert ("model.tgt_embed.embedding.W_E" in checked) != options.get("tie_embeddings", False)
    assert ("model.output_projection.W" in checked) != options.get("tie_embeddings", False)


@pytest.mark.parametrize("options", VARIANTS)
def test_decoder_only_gradients_on_every_parameter(options):
    with minitrans.using("numpy", dtype="float64"):
        model, batch = tiny_model(decoder_only=True, **options)
        assert_gradcheck(model, *batch)


def test_the_whole_model_check_fails_if_memory_gradients_are_not_summed(monkeypatch):
    """Keep only the last decoder layer's dmemory: the encoder's gradients go wrong."""

    def backward_keeping_last(self, dy):
        dmemory = None
        for layer in reversed(self.layers):
            dy, dmemory_layer = layer.backward(dy)
            dmemory = dmemory_layer if dmemory is None else dmemory
        return dy, dmemory

    monkeypatch.setattr(Decoder, "backward", backward_keeping_last)
    with minitrans.using("numpy", dtype="float64"):
        model, batch = tiny_model(N=2)
        results = check_layer(model, *batch)
    failed = {r.tensor for r in results if not r.passed}
    assert any(name.startswith("model.encoder.") for name in failed)
    assert not any(name.startswith("model.decoder.") for name in failed)


def test_tied_weights_are_one_parameter_with_summed_gradients(backend_name):
    config = ModelConfig.preset("tiny", vocab_size=7, tie_embeddings=True)
    model = Transformer(config, rng=0)
    names = [name for name, _, _ in model.named_parameters()]
    assert names.count("src_embed.embedding.W_E") == 1
    assert not any(
        name.startswith("tgt_embed.embedding") or name == "output_projection.W" for name in names
    )
    assert model.tgt_embed.embedding.W_E is model.src_embed.embedding.params["W_E"]


def _batch(device):
    src = device([[3, 4, 5, 0], [6, 4, 0, 0]])
    tgt_in = device([[1, 3, 4, 5], [1, 6, 2, 0]])
    return src, tgt_in


def _eval_model(decoder_only=False, **options):
    config = ModelConfig.preset("tiny", vocab_size=7, N=2, decoder_only=decoder_only, **options)
    model = DecoderOnlyLM(config, rng=0) if decoder_only else Transformer(config, rng=0)
    return model.eval()


def test_logits_at_a_position_do_not_depend_on_later_target_tokens(backend_name, device):
    model = _eval_model()
    src, tgt_in = _batch(device)
    before = minitrans.to_numpy(model.forward(src, tgt_in))
    changed = device([[1, 3, 6, 6], [1, 6, 5, 5]])
    after = minitrans.to_numpy(model.forward(src, changed))
    # up to rounding: attention's softmax shifts a block of scores by its
    # maximum, masked later scores included (minitrans.ops.softmax.softmax_in_place)
    np.testing.assert_allclose(after[:, :2], before[:, :2], rtol=1e-5, atol=1e-5)
    assert not np.allclose(after[:, 2:], before[:, 2:])


def test_source_padding_does_not_change_the_logits(backend_name, device):
    model = _eval_model()
    src, tgt_in = _batch(device)
    more_padding = device([[3, 4, 5, 0, 0, 0], [6, 4, 0, 0, 0, 0]])
    np.testing.assert_allclose(minitrans.to_numpy(model.forward(more_padding, tgt_in)),
                               minitrans.to_numpy(model.forward(src, tgt_in)), rtol=1e-5, atol=1e-6)


# Decoding feeds real tokens only (a finished sentence's later logits are
# ignored), so the prefixes here have no padding.
PREFIXES = [[1, 3, 4, 5], [1, 6, 2, 5]]


@pytest.mark.parametrize("options", [{}, {"pre_norm": True, "tie_embeddings": True},
                                     {"positions": "learned", "activation": "gelu", "d_k": 3}])
def test_cached_decoding_gives_the_logits_of_recomputation(float64, device, options):
    model = _eval_model(**options)
    src, tgt_in = _batch(device)[0], device(PREFIXES)
    state = model.start(src)
    for t in range(tgt_in.shape[1]):
        cached = model.step(state, tgt_in[:, t])
        recomputed = model.prefix_logits(src, tgt_in[:, : t + 1])
        np.testing.assert_allclose(
            minitrans.to_numpy(cached), minitrans.to_numpy(recomputed), rtol=1e-10, atol=1e-12
        )


def test_cached_decoding_of_the_language_model(float64, device):
    model = _eval_model(decoder_only=True)
    ids = device(PREFIXES)
    state = model.start(ids.shape[0])
    for t in range(ids.shape[1]):
        cached = model.step(state, ids[:, t])
        np.testing.assert_allclose(
            minitrans.to_numpy(cached),
            minitrans.to_numpy(model.prefix_logits(ids[:, : t + 1])),
            rtol=1e-10,
            atol=1e-12,
        )


def test_attention_maps_of_the_last_forward(backend_name, device):
    model = _eval_model()
    src, tgt_in = _batch(device)
    model.forward(src, tgt_in)
    maps = model.attention_maps()
    cross = maps["decoder.layers.1.cross_attn.attention"]
    assert cross.shape == (2, 2, 4, 4)  # (B, h, T_tgt, T_src)
    np.testing.assert_array_equal(minitrans.to_numpy(cross)[1, :, :, 2:], 0.0)  # padding


def test_the_language_model_s_attention_maps_of_the_last_forward(backend_name, device):
    model = _eval_model(decoder_only=True)
    assert model.attention_maps() == {}  # no layer has run yet
    _, ids = _batch(device)
    model.forward(ids)
    maps = model.attention_maps()
    assert sorted(maps) == [f"decoder.layers.{i}.self_attn.attention" for i in range(2)]
    weights = minitrans.to_numpy(maps["decoder.layers.0.self_attn.attention"])
    assert weights.shape == (2, 2, 4, 4)  # (B, h, T, T)
    np.testing.assert_array_equal(weights[:, :, 0, 1:], 0.0)  # causal: the first sees itself


def test_both_models_find_attention_layers_by_class_not_by_name():
    """One way for both (AttentionMapsMixin, isinstance): a subclass of
    ScaledDotProductAttention is found whatever it is called."""

    class Renamed(ScaledDotProductAttention):
        pass

    for decoder_only in (False, True):
        model = _eval_model(decoder_only=decoder_only)
        assert isinstance(model, AttentionMapsMixin)
        layer = model.decoder.layers[1].self_attn
        layer.attention = Renamed()
        names = [name for name, _ in attention_layers(model)]
        assert "decoder.layers.1.self_attn.attention" in names
        assert len(names) == (2 if decoder_only else 6)  # encoder: 2 self; decoder: 2 self, 2 cross


def test_bad_model_inputs_are_named(backend_name, device):
    model = _eval_model()
    src, tgt_in = _batch(device)
    with pytest.raises(ValueError) as info:
        model.forward(src[0], tgt_in)
    assert_names(info, "src")
    with pytest.raises(ValueError) as info:
        model.forward(src, device([[1, 9]]))
    assert_names(info, "tgt_in")
    with pytest.raises(ValueError) as info:
        model.forward(src, tgt_in[:1])
    assert_names(info, "tgt_in")
    with pytest.raises(ValueError) as info:
        model.forward(device(np.zeros((2, 0), dtype=int)), tgt_in)
    assert_names(info, "src")
    with pytest.raises(ValueError, match="max_len"):
        model.forward(src, device(np.ones((2, 600), dtype=int)))


def test_configs_reject_bad_values():
    with pytest.raises(ValueError, match="h: d_model=10"):
        ModelConfig(vocab_size=5, d_model=10, h=4)
    with pytest.raises(ValueError, match="tie_embeddings"):
        ModelConfig(vocab_size=5, src_vocab_size=6, tie_embeddings=True)
    with pytest.raises(ValueError, match="preset"):
        ModelConfig.preset("huge", vocab_size=5)
    with pytest.raises(ValueError, match="dropout"):
        ModelConfig(vocab_size=5, dropout=1.0)
    with pytest.raises(TypeError, match="config"):
        Transformer(ModelConfig.preset("tiny", vocab_size=5, decoder_only=True))
    assert ModelConfig.preset("base", vocab_size=5).d_ff == 2048
    assert ModelConfig.from_dict(ModelConfig.preset("big", vocab_size=5).to_dict()).h == 16

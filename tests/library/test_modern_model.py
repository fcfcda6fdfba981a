"""A whole model with the options of later models (GPT-2, Llama): RMSNorm,
rotary positions, SwiGLU, grouped-query attention, no biases, no output
bias, no embedding scale. The defaults stay the paper's; every option is
counted by parameter_count, checkpointed, decoded with the key/value cache
and estimated by the memory budget."""

import dataclasses

import numpy as np
import pytest

import minitrans
from minitrans import decoding
from minitrans.core import memory_budget
from minitrans.core.strict import forbid_float64
from minitrans.gradcheck import layer_cases, tiny_model
from minitrans.model.config import ModelConfig
from minitrans.training import experiment
from minitrans.training.run_files import records
from minitrans.training.optimisation.adam import Adam
from tests.library.conftest import assert_names

LLAMA = dict(norm="rms", positions="rope", activation="swiglu", kv_heads=1, bias=False,
             output_bias=False, scale_embedding=False, pre_norm=True, rope_base=500000.0,
             norm_eps=1e-6)
NEW_FIELDS = ("norm", "norm_eps", "rope_base", "kv_heads", "bias", "output_bias",
              "scale_embedding")


def host(x):
    return minitrans.to_numpy(x)


def test_the_defaults_are_the_paper_s_model_and_old_records_load_unchanged():
    config = ModelConfig(vocab_size=11, d_model=8, h=2)
    assert (config.norm, config.norm_eps, config.kv_heads, config.key_value_heads) == (
        "layer", 1e-5, None, 2)
    assert config.bias and config.output_bias and config.scale_embedding
    assert config.rope_base == 10000.0 and config.positions == "sinusoidal"
    old_record = {k: v for k, v in config.to_dict().items() if k not in NEW_FIELDS}
    assert ModelConfig.from_dict(old_record) == config  # a checkpoint from before them
    records.check_model_config("model_config", old_record)


@pytest.mark.parametrize("options", [
    {}, LLAMA, {**LLAMA, "decoder_only": True}, {**LLAMA, "kv_heads": 2, "bias": True},
    {"decoder_only": True, "activation": "swiglu", "tie_embeddings": True},
    {"norm": "rms", "pre_norm": True, "output_bias": False, "tie_embeddings": True},
    {"positions": "rope", "d_k": 6, "kv_heads": 1, "src_vocab_size": 9},
], ids=["paper", "llama-encoder-decoder", "llama", "gqa-biases", "swiglu-tied", "rms-tied",
        "rope-d_k"])
def test_parameter_count_is_the_built_model_s(options):
    config = ModelConfig.preset("tiny", vocab_size=7, N=2, h=2, **options)
    model = experiment.build_model(config)
    assert config.parameter_count() == sum(v.size for _, v, _ in model.named_parameters())
    assert model_bytes_of_tables(model) == memory_budget.model_bytes(config, 1) - \
        config.parameter_count()


def model_bytes_of_tables(model):
    return sum(int(v.size) for m in model.modules() for v in m.buffers.values())


def test_a_llama_like_model_has_llama_s_parameters_and_no_others():
    config = ModelConfig(vocab_size=7, d_model=8, h=4, N=1, d_ff=12, decoder_only=True,
                         **{**LLAMA, "kv_heads": 2})
    model = experiment.build_model(config)
    shapes = {name: tuple(value.shape) for name, value, _ in model.named_parameters()}
    assert shapes == {
        "embed.embedding.W_E": (7, 8),
        "decoder.layers.0.self_attn.W_Q.W": (8, 8),
        "decoder.layers.0.self_attn.W_K.W": (8, 4),  # 2 key/value heads of d_k = 2
        "decoder.layers.0.self_attn.W_V.W": (8, 4),
        "decoder.layers.0.self_attn.W_O.W": (8, 8),
        "decoder.layers.0.self_attn_norm.layer_norm.g": (8,),
        "decoder.layers.0.feed_forward.W_gate.W": (8, 12),
        "decoder.layers.0.feed_forward.W_up.W": (8, 12),
        "decoder.layers.0.feed_forward.W_down.W": (12, 8),
        "decoder.layers.0.feed_forward_norm.layer_norm.g": (8,),
        "decoder.final_norm.g": (8,),
        "output_projection.W": (8, 7),
    }
    assert model.embed.positional is None and model.embed.embedding.scale == 1.0
    assert model.decoder.final_norm.eps == 1e-6


def test_the_gradient_check_report_covers_every_new_layer_and_both_models():
    """``minitrans gradcheck`` (and tests/library/test_gradcheck.py, on every
    backend) checks them; here only that they are there."""
    labels = [label for label, _, _, _ in layer_cases(np.random.default_rng(0))]
    for wanted in ("RMSNorm", "RotaryEmbedding (offset 2)", "SwiGLUFeedForward (no bias)",
                   "MultiHeadAttention (rotary, masked self, offset 3)",
                   "MultiHeadAttention (kv_heads 1 of 4, masked self)",
                   "MultiHeadAttention (kv_heads 2 of 4, masked self)",
                   "Add & Norm (pre-norm, RMSNorm, SwiGLU)"):
        assert wanted in labels
    assert {label.split(" (")[0] for label in labels if "Llama's options" in label} == {
        "Transformer + loss", "Decoder-only LM + loss"}


def make_model(decoder_only, seed=0):
    """A random tiny model with rotary positions and grouped-query
    attention; the <eos> bias lowered, so that sentences run a few tokens."""
    config = ModelConfig(vocab_size=7, d_model=8, h=4, N=2, d_ff=8, dropout=0.0, max_len=12,
                         decoder_only=decoder_only, **{**LLAMA, "kv_heads": 2,
                                                       "output_bias": True})
    model = experiment.build_model(config, seed=seed)
    model.output_projection.params["b"][2] -= 2.0
    return model.eval()


def test_cached_decoding_equals_recomputing_the_prefix_with_rope_and_gqa(float64, device):
    model = make_model(decoder_only=False)
    src = device([[3, 4, 5, 0], [6, 4, 0, 0], [5, 5, 6, 3]])
    cached, cached_logits = decoding.greedy(model, src, 10, return_logits=True)
    slow, slow_logits = decoding.greedy(model, src, 10, use_cache=False, return_logits=True)
    np.testing.assert_array_equal(host(cached), host(slow))
    np.testing.assert_allclose(host(cached_logits), host(slow_logits), rtol=1e-9, atol=1e-9)
    assert host(cached).shape[1] > 3
    beams = decoding.beam_search(model, src, beam_size=2, max_len=6)  # reorders kv_heads caches
    assert host(beams).shape[0] == 3


@pytest.mark.parametrize("strategy", ["greedy", "sample"])
def test_cached_generation_equals_recomputing_the_prefix_with_rope_and_gqa(float64, device,
                                                                            strategy):
    lm = make_model(decoder_only=True, seed=1)
    prompt = device([[1, 3, 4], [1, 5, 6]])
    cached, cached_logits = decoding.generate(lm, prompt, 9, strategy=strategy, rng=3,
                                              return_logits=True)
    slow, slow_logits = decoding.generate(lm, prompt, 9, strategy=strategy, rng=3,
                                          use_cache=False, return_logits=True)
    np.testing.assert_array_equal(host(cached), host(slow))
    np.testing.assert_allclose(host(cached_logits), host(slow_logits), rtol=1e-9, atol=1e-9)
    assert host(cached).shape[1] > 3


@pytest.mark.parametrize("decoder_only", [False, True], ids=["encoder-decoder", "decoder-only"])
def test_a_float32_training_step_makes_no_float64_array(decoder_only):
    """The rotary tables are made in float64 once, then cast; every step
    after stays float32 (the strict backend sees each array as it is made)."""
    with minitrans.using("strict", dtype="float32"):
        whole, batch = tiny_model(N=1, decoder_only=decoder_only, **LLAMA)
        optimizer = Adam(whole.model, lr=1e-3)
        with forbid_float64():
            whole.zero_grad()
            whole.forward(*batch)
            whole.backward()
            optimizer.step()


def test_a_checkpoint_record_holds_every_option(tmp_path):
    config = ModelConfig(vocab_size=7, d_model=8, h=4, N=1, d_ff=8, **{**LLAMA, "kv_heads": 2})
    stored = config.to_dict()
    records.check_model_config("model_config", stored)
    assert ModelConfig.from_dict(stored) == config
    for field, value in (("bias", "false"), ("kv_heads", 2.0), ("norm", 1), ("rope_base", "x")):
        with pytest.raises(ValueError) as info:
            records.check_model_config("model_config", {**stored, field: value})
        assert_names(info, f"model_config.{field}")


def test_the_memory_budget_counts_the_shared_heads_and_swiglu_s_arrays():
    base = ModelConfig.preset("base", vocab_size=37000)
    grouped = dataclasses.replace(base, kv_heads=2)
    assert memory_budget.kv_cache_numbers(base, 100) == 6 * 2 * 8 * 64 * 100
    assert memory_budget.kv_cache_numbers(grouped, 100) * 4 == memory_budget.kv_cache_numbers(
        base, 100)
    swiglu = dataclasses.replace(base, activation="swiglu")
    per_token = memory_budget.training_bytes(swiglu, 1, 50, itemsize=1) - memory_budget.model_bytes(
        swiglu, 1) - 3 * swiglu.parameter_count()
    paper = memory_budget.training_bytes(base, 1, 50, itemsize=1) - memory_budget.model_bytes(
        base, 1) - 3 * base.parameter_count()
    # three more d_ff per token and layer: the gate, its sigma and the up projection
    assert per_token - paper == 50 * 3 * 6 * 2 * 2048
    assert swiglu.parameter_count() - base.parameter_count() == 2 * 6 * 512 * 2048 + 12 * 2048


@pytest.mark.parametrize("options, names, expected", [
    ({"norm": "batch"}, ["norm"], "'layer', 'rms'"),
    ({"positions": "rotary"}, ["positions"], "'rope'"),
    ({"activation": "geglu"}, ["activation"], "'swiglu'"),
    ({"positions": "rope", "d_k": 3}, ["d_k"], "even"),
    ({"norm_eps": 0}, ["norm_eps"], "positive number"),
    ({"rope_base": 1.0}, ["rope_base"], "> 1"),
    ({"kv_heads": 3}, ["kv_heads"], "divisor"),
    ({"bias": "false"}, ["bias"], "True or False"),
    ({"output_bias": 0}, ["output_bias"], "True or False"),
    ({"scale_embedding": None}, ["scale_embedding"], "True or False"),
])
def test_bad_options_are_named(options, names, expected):
    with pytest.raises(ValueError) as info:
        ModelConfig(vocab_size=11, d_model=8, h=2, **options)
    assert_names(info, *names)
    assert expected in str(info.value)


def test_the_pytorch_mirror_refuses_the_later_options_by_name():
    torch_modules = pytest.importorskip("minitrans.interop.torch_modules")
    for field, value in (("norm", "rms"), ("kv_heads", 1), ("activation", "swiglu"),
                         ("positions", "rope"), ("d_k", 2)):
        config = ModelConfig(vocab_size=11, d_model=8, h=2, **{field: value})
        with pytest.raises(ValueError) as info:
            torch_modules.TorchTransformer(config)
        assert f"config.{field}" in str(info.value)

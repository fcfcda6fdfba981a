"""Pretrained GPT-2 and Llama models (minitrans.pretrained.load) against
Hugging Face's ``transformers``: tiny random models written by
``transformers`` load into minitrans's own layers with the same logits,
the same gradients of a training step, the same greedy continuation with
the key/value cache, and go back into ``transformers`` with the same
logits; a malformed folder is refused in one line naming the file and the
tensor or field.

Skipped without PyTorch or transformers. Tolerances: relative 1e-10 in
float64, 1e-5 in float32 (the largest difference over the largest value).
"""

import json
import shutil
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: pip install \".[torch]\"")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")
safetensors_numpy = pytest.importorskip("safetensors.numpy", reason="safetensors is missing")

import minitrans  # noqa: E402
from minitrans.decoding import generate  # noqa: E402
from minitrans.layers.loss import LabelSmoothedCrossEntropy  # noqa: E402
from minitrans.pretrained import PretrainedError, load_pretrained, save_pretrained  # noqa: E402
from tests.library.conftest import pretrained_refusal  # noqa: E402
from minitrans.pretrained.tensor_names import links, to_ours  # noqa: E402

VOCAB, POSITIONS = 100, 32
GPT2 = dict(n_embd=32, n_head=4, n_layer=2, vocab_size=VOCAB, n_positions=POSITIONS)
LLAMA = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
             intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=POSITIONS)
CASES = {  # name: (config class, its fields)
    "gpt2": ("GPT2Config", GPT2),
    "gpt2-untied": ("GPT2Config", {**GPT2, "tie_word_embeddings": False}),
    "llama": ("LlamaConfig", {**LLAMA, "rope_theta": 10000.0}),
    "llama-tied": ("LlamaConfig", {**LLAMA, "rope_theta": 500000.0, "tie_word_embeddings": True}),
    "llama-head-dim": ("LlamaConfig", {**LLAMA, "head_dim": 16}),  # d_k != hidden / heads
}


def relative(ours, theirs):
    return float(np.max(np.abs(ours - theirs)) / np.max(np.abs(theirs)))


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """name -> a folder written by transformers' save_pretrained: a random
    model, every parameter moved off its initial value (a LayerNorm's gain
    of ones and bias of zeros would hide a swap of the two)."""
    made = {}
    for name, (kind, fields) in CASES.items():
        torch.manual_seed(23)
        config = getattr(transformers, kind)(**fields, bos_token_id=None, eos_token_id=None,
                                             initializer_range=0.2)
        model = transformers.AutoModelForCausalLM.from_config(config)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(0.1 * torch.randn_like(parameter))
        made[name] = tmp_path_factory.mktemp(name)
        model.save_pretrained(made[name], safe_serialization=True)
    return made


def float64_throughout(model):
    """Hugging Face's Llama computes its RMSNorm and its rotary angles in
    float32 whatever the model's dtype (numbers of mixed-precision
    training): a float64 model agrees with minitrans to about 1e-7 only.
    The same two formulas in float64, so that everything else is compared
    to 1e-10. GPT-2 has neither."""
    for module in model.modules():
        kind = type(module).__name__
        if kind.endswith("RMSNorm"):
            module.forward = types.MethodType(_rms_norm, module)
        elif kind.endswith("RotaryEmbedding"):
            module.forward = types.MethodType(_rotary, module)
    return model


def _rms_norm(self, x):
    return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


def _rotary(self, x, position_ids):
    config = self.config
    dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    base = (getattr(config, "rope_parameters", None) or {}).get("rope_theta") or config.rope_theta
    inv_freq = 1.0 / base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angles = position_ids[..., None].to(torch.float64) * inv_freq
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos().to(x.dtype), angles.sin().to(x.dtype)


def hub_model(folder, dtype=torch.float64):
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=dtype,
                                                              attn_implementation="sdpa")
    model.eval()
    return float64_throughout(model) if dtype == torch.float64 else model


def hub_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor(ids)).logits.numpy()


def some_ids(batch=2, length=9, seed=0):
    return np.random.default_rng(seed).integers(0, VOCAB, size=(batch, length))


# Equal to transformers ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("dtype, tolerance", [("float64", 1e-10), ("float32", 1e-5)])
def test_the_logits_equal_transformers(folders, name, dtype, tolerance):
    ids = some_ids()
    theirs = hub_logits(hub_model(folders[name], getattr(torch, dtype)), ids)
    with minitrans.using(dtype=dtype):
        model, tokenizer, info = load_pretrained(folders[name])
        ours = minitrans.to_numpy(model.forward(minitrans.to_device(ids)))
    assert ours.dtype == np.dtype(dtype) and tokenizer is None
    assert info.architecture == ("GPT2LMHeadModel" if "gpt2" in name else "LlamaForCausalLM")
    assert model.config.pad_id is None
    assert relative(ours, theirs) < tolerance


@pytest.mark.parametrize("name", CASES)
def test_one_training_step_s_gradients_equal_autograd(folders, name):
    """Mean cross-entropy of next-token targets over every token, in float64:
    every parameter's gradient, the torch ones taken through the loader's
    name mapping (GPT-2's fused c_attn split in three)."""
    ids = some_ids(seed=1)
    inputs, targets = ids[:, :-1], ids[:, 1:]
    hub = hub_model(folders[name])
    logits = hub(torch.tensor(inputs)).logits
    their_loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                                   torch.tensor(targets).reshape(-1))
    their_loss.backward()
    their_grads = {key: value.grad.numpy() for key, value in hub.named_parameters()}
    with minitrans.using(dtype="float64"):
        model, _, info = load_pretrained(folders[name])
        loss_fn = LabelSmoothedCrossEntropy(0.0, pad_id=model.config.pad_id)
        loss = loss_fn(model.forward(minitrans.to_device(inputs)), minitrans.to_device(targets))
        model.backward(loss_fn.backward())
        ours = {key: minitrans.to_numpy(grad) for key, _, grad in model.named_parameters()}
    assert float(loss) == pytest.approx(their_loss.item(), rel=1e-12)
    mapped = {}
    for link in links(model.config, info.architecture):
        mapped.update(to_ours(link, their_grads[link.file_name(info.architecture)]))
    assert sorted(mapped) == sorted(ours)  # every parameter, each once
    for key, grad in ours.items():
        assert relative(grad, mapped[key]) < 1e-10, key
    if info.architecture == "GPT2LMHeadModel":  # the key bias, dropped, never learns
        bias = their_grads["transformer.h.0.attn.c_attn.bias"]
        assert np.max(np.abs(bias[32:64])) < 1e-12 * np.max(np.abs(bias))


@pytest.mark.parametrize("name", CASES)
def test_greedy_generation_with_the_cache_equals_transformers(folders, name):
    prompt = some_ids(length=5, seed=2)
    hub = hub_model(folders[name])
    with torch.no_grad():
        theirs = hub.generate(torch.tensor(prompt), attention_mask=torch.ones(prompt.shape),
                              do_sample=False, max_new_tokens=12, eos_token_id=None,
                              pad_token_id=0).numpy()[:, prompt.shape[1]:]
    with minitrans.using(dtype="float64"):
        model, _, _ = load_pretrained(folders[name])
        ours = generate(model, minitrans.to_device(prompt), 12, eos_id=None, pad_id=None,
                        use_cache=True)
    assert theirs.shape == (2, 12)
    np.testing.assert_array_equal(minitrans.to_numpy(ours), theirs)


@pytest.mark.parametrize("name", CASES)
def test_the_way_back_loads_in_transformers_with_the_same_logits(folders, name, tmp_path):
    ids = some_ids(seed=3)
    theirs = hub_logits(hub_model(folders[name]), ids)
    with minitrans.using(dtype="float64"):
        model, _, info = load_pretrained(folders[name])
        save_pretrained(model, tmp_path, info.architecture, extra={"eos_token_id": None})
        again, _, _ = load_pretrained(tmp_path)  # and minitrans reads its own folder
        for (key, value, _), (_, copy, _) in zip(model.named_parameters(),
                                                 again.named_parameters()):
            np.testing.assert_array_equal(minitrans.to_numpy(copy), minitrans.to_numpy(value))
    assert relative(hub_logits(hub_model(tmp_path), ids), theirs) < 1e-10
    written = safetensors_numpy.load_file(tmp_path / "model.safetensors")
    assert all(array.dtype == np.float64 for array in written.values())
    if info.architecture == "GPT2LMHeadModel":  # the dropped key bias comes back as zeros
        assert not written["transformer.h.1.attn.c_attn.bias"][32:64].any()


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_every_backend_loads_and_writes_the_same_model(folders, float64, device, name, tmp_path):
    ids = some_ids()
    theirs = hub_logits(hub_model(folders[name]), ids)
    model, _, info = load_pretrained(folders[name])
    assert relative(minitrans.to_numpy(model.forward(device(ids))), theirs) < 1e-10
    save_pretrained(model, tmp_path, info.architecture)
    assert relative(hub_logits(hub_model(tmp_path), ids), theirs) < 1e-10


def test_a_model_the_architecture_cannot_hold_is_refused(folders, tmp_path):
    with minitrans.using(dtype="float64"):
        llama, _, _ = load_pretrained(folders["llama"])
        with pytest.raises(PretrainedError) as info:
            save_pretrained(llama, tmp_path, "gpt2")
        message = str(info.value)
        assert message.startswith(str(tmp_path / "config.json"))
        assert "GPT2LMHeadModel cannot hold this model: its ModelConfig." in message
        with pytest.raises(PretrainedError, match="extra sets 'n_embd'"):
            gpt2, _, _ = load_pretrained(folders["gpt2"])
            save_pretrained(gpt2, tmp_path, "GPT2LMHeadModel", extra={"n_embd": 64})
    assert not (tmp_path / "config.json").exists()


# Other layouts, and the tokenizer ---------------------------------------------------------------

def copy_of(folders, name, tmp_path):
    return shutil.copytree(folders[name], tmp_path / name)


def edit_tensors(folder, change):
    """Rewrite the folder's model.safetensors after ``change(arrays)``."""
    arrays = safetensors_numpy.load_file(folder / "model.safetensors")
    change(arrays)
    safetensors_numpy.save_file(arrays, folder / "model.safetensors", metadata={"format": "pt"})


def edit_config(folder, **fields):
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **fields}))


def logits_of(folder, ids):
    with minitrans.using(dtype="float64"):
        model, tokenizer, info = load_pretrained(folder)
        return minitrans.to_numpy(model.forward(minitrans.to_device(ids))), tokenizer, info


@pytest.mark.parametrize("name, prefix, buffer", [
    ("gpt2", "transformer.", "h.0.attn.bias"),
    ("llama", None, "model.layers.0.self_attn.rotary_emb.inv_freq"),
])
def test_names_without_the_prefix_and_the_buffers_of_older_files_load(folders, tmp_path, name,
                                                                      prefix, buffer):
    """OpenAI's GPT-2 on the Hub names its tensors without "transformer." and
    keeps each layer's causal mask "h.i.attn.bias"; older Llama files keep
    "rotary_emb.inv_freq". The mask and the frequencies are recomputed."""
    folder = copy_of(folders, name, tmp_path)

    def older(arrays):
        for key in list(arrays):
            if prefix and key.startswith(prefix):
                arrays[key[len(prefix):]] = arrays.pop(key)
        arrays[buffer] = np.ones((1, 1, 4, 4), dtype=np.float32)

    edit_tensors(folder, older)
    ours, _, info = logits_of(folder, some_ids())
    assert info.ignored == (buffer,)
    np.testing.assert_array_equal(ours, logits_of(folders[name], some_ids())[0])


def test_a_sharded_folder_loads_the_same_model(folders, tmp_path):
    hub_model(folders["llama"], torch.float32).save_pretrained(tmp_path, max_shard_size="40KB")
    assert (tmp_path / "model.safetensors.index.json").exists()
    ids = some_ids()
    np.testing.assert_array_equal(logits_of(tmp_path, ids)[0], logits_of(folders["llama"], ids)[0])


def test_the_folder_s_tokenizer_comes_with_the_model(folders, tmp_path):
    folder = copy_of(folders, "gpt2", tmp_path)
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
             "ignore_merges": False, "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]}
    (folder / "tokenizer.json").write_text(json.dumps(
        {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
         "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": None,
         "model": model}))
    _, tokenizer, _ = logits_of(folder, some_ids())
    assert list(tokenizer.encode("abab")) == [2, 2]
    _, _, info = load_pretrained(folder, tokenizer=False)
    assert info.architecture == "GPT2LMHeadModel"


# Refusals ----------------------------------------------------------------------------------------

def refused(folder, file, *parts, **options):
    """load_pretrained(folder) raises one line that starts with ``file``
    (a name in the folder, or "" for the folder itself) and names each part."""
    return pretrained_refusal(lambda: load_pretrained(folder, **options),
                              folder / file if file else folder, *parts)


def test_a_missing_folder_config_or_weights_file_is_named(folders, tmp_path):
    refused(tmp_path / "absent", "", "no such folder")
    folder = copy_of(folders, "gpt2", tmp_path)
    (folder / "model.safetensors").unlink()
    refused(folder, "", "no model.safetensors")
    (folder / "config.json").unlink()
    refused(folder, "", "no config.json")


def test_an_unknown_architecture_is_refused_by_name(folders, tmp_path):
    folder = copy_of(folders, "gpt2", tmp_path)
    edit_config(folder, architectures=["BertModel"], model_type="bert")
    message = refused(folder, "config.json")
    assert message == (f"{folder}/config.json: architecture 'BertModel' is not supported; "
                       "expected GPT2LMHeadModel or LlamaForCausalLM")
    edit_config(folder, architectures=None)
    refused(folder, "config.json", "model_type 'bert' is not supported")


@pytest.mark.parametrize("name, fields, parts", [
    ("llama", {"rope_scaling": {"rope_type": "linear", "factor": 2.0}},
     ["rope_scaling is {'rope_type': 'linear'", "not implemented"]),
    ("llama", {"rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5}},
     ["rope_parameters.rope_type is 'llama3'"]),
    ("llama", {"hidden_act": "gelu"}, ["hidden_act is 'gelu', expected 'silu'"]),
    ("llama", {"attention_bias": True}, ["attention_bias is True, expected false"]),
    ("llama", {"num_key_value_heads": 3}, ["num_key_value_heads is 3"]),
    ("gpt2", {"activation_function": "gelu"}, ["activation_function is 'gelu'", "gelu_new"]),
    ("gpt2", {"n_head": 5}, ["n_head is 5, expected a divisor of n_embd=32"]),
    ("gpt2", {"n_layer": "2"}, ["n_layer is '2', expected a positive integer"]),
    ("gpt2", {"n_embd": 2**20}, ["n_embd: expected at most", "ModelConfig's d_model"]),
    ("gpt2", {"architectures": ["GPT2LMHeadModel"], "model_type": "llama"}, ["does not match"]),
])
def test_a_config_field_minitrans_cannot_follow_is_named(folders, tmp_path, name, fields, parts):
    folder = copy_of(folders, name, tmp_path)
    edit_config(folder, **fields)
    refused(folder, "config.json", *parts)


def test_a_missing_config_field_is_named(folders, tmp_path):
    folder = copy_of(folders, "gpt2", tmp_path)
    config = json.loads((folder / "config.json").read_text())
    del config["n_head"]
    (folder / "config.json").write_text(json.dumps(config))
    refused(folder, "config.json", "no field n_head")


def _shape(arrays):
    arrays["transformer.h.0.mlp.c_fc.weight"] = np.zeros((32, 64), np.float32)


def _unknown(arrays):
    arrays["transformer.h.0.attn.extra.weight"] = np.zeros(3, np.float32)


def _missing(arrays):
    del arrays["transformer.ln_f.bias"]


def _twice(arrays):
    arrays["wte.weight"] = arrays["transformer.wte.weight"]


def _head(arrays):
    arrays["lm_head.weight"] = arrays["transformer.wte.weight"]


def _integers(arrays):
    arrays["transformer.ln_f.weight"] = np.ones(32, np.int32)


@pytest.mark.parametrize("change, parts", [
    (_shape, ["tensor 'transformer.h.0.mlp.c_fc.weight' has shape [32, 64], expected [32, 128]"]),
    (_unknown, ["tensor 'transformer.h.0.attn.extra.weight' is not a tensor of GPT2LMHeadModel"]),
    (_missing, ["no tensor 'transformer.ln_f.bias' (1 missing)"]),
    (_twice, ["is given twice"]),
    (_head, ["tensor 'lm_head.weight' is not expected: tie_word_embeddings is true"]),
    (_integers, ["tensor 'transformer.ln_f.weight' has dtype I32"]),
], ids=["shape", "unknown", "missing", "twice", "tied-head", "integers"])
def test_a_tensor_that_does_not_fit_the_config_is_named(folders, tmp_path, change, parts):
    folder = copy_of(folders, "gpt2", tmp_path)
    edit_tensors(folder, change)
    refused(folder, "model.safetensors", *parts)


def test_an_oversized_header_and_a_truncated_file_are_refused(folders, tmp_path):
    folder = copy_of(folders, "llama", tmp_path)
    weights = folder / "model.safetensors"
    raw = weights.read_bytes()
    weights.write_bytes(raw[:-100])
    refused(folder, "model.safetensors", "past the data section", "truncated")
    weights.write_bytes((2**40).to_bytes(8, "little") + raw[8:])
    refused(folder, "model.safetensors", "header of 1,099,511,627,776 bytes, expected at most")


def test_a_model_larger_than_the_memory_is_refused_before_it_is_read(folders):
    """One check counts the tensors read and the model built together."""
    refused(folders["llama"], "", "loading takes about", "at most what", available=1000)
    read = minitrans.pretrained.loaded_bytes(folders["llama"])  # the tensors fit, the model not
    refused(folders["llama"], "", "loading takes about", "gradients", available=read + 1000)

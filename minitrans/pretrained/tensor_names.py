"""Which tensor of a GPT-2 or Llama checkpoint is which minitrans parameter.

GPT-2 (``transformer.`` before every name but lm_head's; layer i):

    wte.weight (V, d)              embed.embedding.W_E
    wpe.weight (n_positions, d)    embed.positional.P
    h.i.ln_1.weight, .bias         decoder.layers.i.self_attn_norm.layer_norm.gamma, beta
    h.i.attn.c_attn.weight (d, 3d) self_attn.W_Q.W | W_K.W | W_V.W, its columns in thirds
    h.i.attn.c_attn.bias (3d,)     self_attn.W_Q.b | (key bias: dropped) | W_V.b
    h.i.attn.c_proj.weight, .bias  self_attn.W_O.W, W_O.b
    h.i.ln_2.weight, .bias         feed_forward_norm.layer_norm.gamma, beta
    h.i.mlp.c_fc.weight, .bias     feed_forward.W_1.W, W_1.b
    h.i.mlp.c_proj.weight, .bias   feed_forward.W_2.W, W_2.b
    ln_f.weight, .bias             decoder.final_norm.gamma, beta
    lm_head.weight (V, d)          output_projection.W, transposed (absent when tied)

GPT-2's Conv1D stores its weight as (in, out), as minitrans's Linear does
(y = x W): no transpose. Its key bias is dropped: it adds q . b_K to every
score of a query's row, a constant softmax cannot see (lesson 7,
layers/multihead.py), so the model computes the same logits without it;
the way back writes zeros there.

Llama (``model.`` before every name but lm_head's; torch's nn.Linear
stores (out, in), so every projection is transposed):

    embed_tokens.weight (V, d)            embed.embedding.W_E
    layers.i.input_layernorm.weight       decoder.layers.i.self_attn_norm.layer_norm.g
    layers.i.self_attn.q_proj.weight      self_attn.W_Q.W, transposed (also k, v, o)
    layers.i.post_attention_layernorm.weight  feed_forward_norm.layer_norm.g
    layers.i.mlp.gate_proj.weight         feed_forward.W_gate.W, transposed (also up, down)
    norm.weight                           decoder.final_norm.g
    lm_head.weight (V, d)                 output_projection.W, transposed (absent when tied)

Llama's rotary pairing (i, i + d_k/2) is minitrans's (layers/rotary.py), so
W_Q and W_K load without permuting their columns. Buffers that some files
hold beside the weights (GPT-2's causal mask "attn.bias", "attn.masked_bias";
Llama's "rotary_emb.inv_freq") are recomputed, not loaded: IGNORED.
"""

import os
import re
from typing import NamedTuple

from minitrans.core import backend
from minitrans.pretrained.architectures import GPT2, LLAMA
from minitrans.files.rules import PretrainedError, short
from minitrans.files.model_folder import INDEX_NAME

PREFIXES = {GPT2: "transformer.", LLAMA: "model."}
HEAD = "lm_head.weight"
IGNORED = {GPT2: re.compile(r"h\.\d+\.attn\.(bias|masked_bias)"),
           LLAMA: re.compile(r"(layers\.\d+\.self_attn\.)?rotary_emb\.inv_freq")}
FLOAT_DTYPES = ("F64", "F32", "F16", "BF16")


class Link(NamedTuple):
    """One tensor of the file and the minitrans parameters it holds.

    hub:       its name, without the prefix ("h.0.attn.c_attn.weight")
    ours:      the minitrans parameters that are its equal parts along the
               last axis (after the transpose), in order; None for a part
               minitrans does not have (GPT-2's key bias)
    shape:     its shape in the file
    transpose: stored (out, in), as torch's nn.Linear: minitrans's is its transpose
    """
    hub: str
    ours: tuple
    shape: tuple
    transpose: bool = False

    def file_name(self, architecture):
        """The name it has in a file written by Hugging Face."""
        return self.hub if self.hub == HEAD else PREFIXES[architecture] + self.hub


def links(config, architecture):
    """Every Link of a model of ``config`` (a ModelConfig) as ``architecture``."""
    found = (_gpt2_links if architecture == GPT2 else _llama_links)(config)
    if not config.tie_embeddings:  # tied: the output projection is W_E^T, stored once
        found.append(Link(HEAD, ("output_projection.W",), (config.vocab_size, config.d_model),
                          transpose=True))
    return found


def _gpt2_links(c):
    d, f = c.d_model, c.d_ff
    found = [Link("wte.weight", ("embed.embedding.W_E",), (c.vocab_size, d)),
             Link("wpe.weight", ("embed.positional.P",), (c.max_len, d))]
    for i in range(c.N):
        hub, ours = f"h.{i}.", f"decoder.layers.{i}."
        attn, norm1 = ours + "self_attn.", ours + "self_attn_norm.layer_norm."
        ffn, norm2 = ours + "feed_forward.", ours + "feed_forward_norm.layer_norm."
        found += [
            Link(hub + "ln_1.weight", (norm1 + "gamma",), (d,)),
            Link(hub + "ln_1.bias", (norm1 + "beta",), (d,)),
            Link(hub + "attn.c_attn.weight", (attn + "W_Q.W", attn + "W_K.W", attn + "W_V.W"),
                 (d, 3 * d)),
            Link(hub + "attn.c_attn.bias", (attn + "W_Q.b", None, attn + "W_V.b"), (3 * d,)),
            Link(hub + "attn.c_proj.weight", (attn + "W_O.W",), (d, d)),
            Link(hub + "attn.c_proj.bias", (attn + "W_O.b",), (d,)),
            Link(hub + "ln_2.weight", (norm2 + "gamma",), (d,)),
            Link(hub + "ln_2.bias", (norm2 + "beta",), (d,)),
            Link(hub + "mlp.c_fc.weight", (ffn + "W_1.W",), (d, f)),
            Link(hub + "mlp.c_fc.bias", (ffn + "W_1.b",), (f,)),
            Link(hub + "mlp.c_proj.weight", (ffn + "W_2.W",), (f, d)),
            Link(hub + "mlp.c_proj.bias", (ffn + "W_2.b",), (d,)),
        ]
    return found + [Link("ln_f.weight", ("decoder.final_norm.gamma",), (d,)),
                    Link("ln_f.bias", ("decoder.final_norm.beta",), (d,))]


def _llama_links(c):
    d, f = c.d_model, c.d_ff
    width, kv_width = c.h * c.head_width, c.key_value_heads * c.head_width
    found = [Link("embed_tokens.weight", ("embed.embedding.W_E",), (c.vocab_size, d))]
    for i in range(c.N):
        hub, ours = f"layers.{i}.", f"decoder.layers.{i}."
        attn, ffn = ours + "self_attn.", ours + "feed_forward."
        found += [
            Link(hub + "input_layernorm.weight", (ours + "self_attn_norm.layer_norm.g",), (d,)),
            Link(hub + "self_attn.q_proj.weight", (attn + "W_Q.W",), (width, d), True),
            Link(hub + "self_attn.k_proj.weight", (attn + "W_K.W",), (kv_width, d), True),
            Link(hub + "self_attn.v_proj.weight", (attn + "W_V.W",), (kv_width, d), True),
            Link(hub + "self_attn.o_proj.weight", (attn + "W_O.W",), (d, width), True),
            Link(hub + "post_attention_layernorm.weight",
                 (ours + "feed_forward_norm.layer_norm.g",), (d,)),
            Link(hub + "mlp.gate_proj.weight", (ffn + "W_gate.W",), (f, d), True),
            Link(hub + "mlp.up_proj.weight", (ffn + "W_up.W",), (f, d), True),
            Link(hub + "mlp.down_proj.weight", (ffn + "W_down.W",), (d, f), True),
        ]
    return found + [Link("norm.weight", ("decoder.final_norm.g",), (d,))]


def match_names(headers, config, architecture):
    """{Link: (name in the file, its Header)} for every Link of the model,
    from the files' checked ``headers`` alone (nothing read yet), and the
    names of the buffers ignored. Refused in one line naming the file and
    the tensor: an unknown tensor, a tensor named twice (with and without
    the prefix), a missing one, a wrong shape, an integer dtype."""
    by_hub = {link.hub: link for link in links(config, architecture)}
    found, ignored, prefix = {}, [], PREFIXES[architecture]
    for header in headers:
        for name, tensor in header.tensors.items():
            hub = name[len(prefix):] if name.startswith(prefix) and name != prefix + HEAD else name
            if IGNORED[architecture].fullmatch(hub):
                ignored.append(name)
                continue
            link = by_hub.get(hub)
            if link is None:
                raise PretrainedError(_unknown(header.path, name, hub, architecture, config))
            if link in found:
                raise PretrainedError(f"{header.path}: tensor {short(name)} is given twice (as "
                                      f"{short(found[link][0])} too), expected it once")
            _check_tensor(header.path, name, tensor, link)
            found[link] = (name, header)
    missing = [link for link in by_hub.values() if link not in found]
    if missing:
        where = (headers[0].path if len(headers) == 1
                 else os.path.join(os.path.dirname(headers[0].path), INDEX_NAME))
        raise PretrainedError(f"{where}: no tensor {missing[0].file_name(architecture)!r} "
                              f"({len(missing)} missing), expected every tensor of {architecture}")
    return found, ignored


def _unknown(path, name, hub, architecture, config):
    """The words for a tensor that is not part of the model."""
    if hub == HEAD and config.tie_embeddings:
        return (f"{path}: tensor {short(name)} is not expected: tie_word_embeddings is true, "
                "so the output projection is the embedding's transpose")
    example = links(config, architecture)[-1].file_name(architecture)
    return (f"{path}: tensor {short(name)} is not a tensor of {architecture} of these sizes "
            f"(config.json), expected names such as {example!r}")


def _check_tensor(path, name, tensor, link):
    if tensor.shape != link.shape:
        raise PretrainedError(f"{path}: tensor {short(name)} has shape {list(tensor.shape)}, "
                              f"expected {list(link.shape)} from config.json")
    if tensor.dtype not in FLOAT_DTYPES:
        raise PretrainedError(f"{path}: tensor {short(name)} has dtype {tensor.dtype}, expected "
                              f"one of {', '.join(FLOAT_DTYPES)}")


def to_ours(link, array):
    """{minitrans name: array} of a tensor of the file (a view of ``array``:
    transposed, then cut into the equal parts along its last axis)."""
    array = array.T if link.transpose else array
    width = array.shape[-1] // len(link.ours)
    return {name: array[..., k * width:(k + 1) * width]
            for k, name in enumerate(link.ours) if name is not None}


def to_hub(link, params):
    """The tensor of the file from the minitrans arrays ``params`` (name ->
    array): the parts side by side, zeros for a part minitrans has not."""
    xp = backend.get_xp()
    present = [params[name] for name in link.ours if name is not None]
    parts = [params[name] if name is not None else xp.zeros_like(present[0])
             for name in link.ours]
    joined = parts[0] if len(parts) == 1 else xp.concatenate(parts, axis=-1)
    return joined.T if link.transpose else joined

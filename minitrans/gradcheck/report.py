"""The gradient-check report: every layer, checked on tiny inputs.

``minitrans gradcheck`` runs ``run_report()`` and prints the table. The cases
are small on purpose (central differences run two forwards per element) but
cover every code path: masks, a fully masked row, repeated token ids,
cross-attention's two inputs, dropout, both norm placements, padding in the
loss.
"""

import math

import numpy as np

from minitrans.core import backend
from minitrans.gradcheck.layer_check import check_layer
from minitrans.gradcheck.tiny_models import (ModelWithLoss, SublayerWithAddNorm, randomise_params,
                                             tiny_model)
from minitrans.layers.add_norm import AddNorm
from minitrans.layers.attention import ScaledDotProductAttention
from minitrans.layers.dropout import Dropout
from minitrans.layers.embedding import Embedding
from minitrans.layers.feedforward import FeedForward
from minitrans.layers.layernorm import LayerNorm
from minitrans.layers.linear import Linear
from minitrans.layers.loss import LabelSmoothedCrossEntropy, LogSoftmax
from minitrans.layers.multihead import MultiHeadAttention
from minitrans.layers.positional import PositionalEncoding
from minitrans.layers.rmsnorm import RMSNorm
from minitrans.layers.rotary import RotaryEmbedding
from minitrans.layers.swiglu import SwiGLUFeedForward
from minitrans.ops.masks import causal_mask, decoder_mask, padding_mask

PAD = 0


def layer_cases(rng):
    """(label, layer, inputs, options) for every layer, tiny sizes, in the
    current backend and dtype (the report runs them in float64)."""

    def x(*shape):
        return backend.from_host(rng.standard_normal(shape))

    def host(rows):
        return backend.to_device(np.array(rows))

    src = host([[5, 2, 6, 3], [4, 1, PAD, PAD]])  # (B=2, T_k=4), padded
    tgt = host([[1, 2, 1], [3, 1, PAD]])  # (B=2, T=3), token 1 repeats
    d_model, h, d_ff = 4, 2, 6
    # (1, 3, 4): query 1 may attend to no key at all
    one_row_masked = host([[[True, True, False, False], [False] * 4, [True] * 4]])

    def sublayer(inner, pre_norm, dropout, norm="layer"):
        add_norm = AddNorm(d_model, dropout=dropout, pre_norm=pre_norm, rng=rng, norm=norm)
        return SublayerWithAddNorm(inner, add_norm)

    yield "Linear", Linear(4, 5, rng=rng), (x(2, 3, 4),), {}
    yield "Linear (no bias)", Linear(4, 5, bias=False, rng=rng), (x(2, 3, 4),), {}
    yield "Embedding", Embedding(7, d_model, rng=rng), (tgt,), {}
    yield "PositionalEncoding (odd d_model)", PositionalEncoding(5, max_len=8), (x(2, 3, 5),), {}
    yield "Attention", ScaledDotProductAttention(), (
        x(2, 2, 3, 2),
        x(2, 2, 4, 2),
        x(2, 2, 4, 3),
    ), {}
    yield "Attention (causal)", ScaledDotProductAttention(), (
        x(2, 2, 3, 2),
        x(2, 2, 3, 2),
        x(2, 2, 3, 3),
    ), {"mask": causal_mask(3)}
    yield "Attention (padding, masked row)", ScaledDotProductAttention(), (
        x(1, 2, 3, 2),
        x(1, 2, 4, 2),
        x(1, 2, 4, 3),
    ), {"mask": one_row_masked[:, None]}
    yield "MultiHeadAttention (self)", MultiHeadAttention(d_model, h, rng=rng), (
        x(2, 3, d_model),
    ), {}
    yield "MultiHeadAttention (masked self)", MultiHeadAttention(d_model, h, rng=rng), (
        x(2, 3, d_model),
    ), {"mask": decoder_mask(tgt, PAD)}
    yield "MultiHeadAttention (cross)", MultiHeadAttention(d_model, h, rng=rng), (
        x(2, 3, d_model),
        x(2, 4, d_model),
    ), {"mask": padding_mask(src, PAD)}
    yield "LayerNorm", LayerNorm(d_model), (x(2, 3, d_model),), {}
    yield "FeedForward", FeedForward(d_model, d_ff, rng=rng), (x(2, 3, d_model),), {}
    yield "Dropout (p=0.3)", Dropout(0.3, rng=rng), (x(2, 3, d_model),), {}
    yield "Add & Norm (post-norm, FFN)", sublayer(
        FeedForward(d_model, d_ff, rng=rng), False, 0.2
    ), (
        x(2, 3, d_model),
    ), {}
    yield "Add & Norm (pre-norm, masked self)", sublayer(
        MultiHeadAttention(d_model, h, rng=rng), True, 0.2
    ), (x(2, 3, d_model),), {"mask": decoder_mask(tgt, PAD)}
    yield "Add & Norm (post-norm, cross)", sublayer(
        MultiHeadAttention(d_model, h, rng=rng), False, 0.0
    ), (x(2, 3, d_model), x(2, 4, d_model)), {"mask": padding_mask(src, PAD)}
    yield "LogSoftmax", LogSoftmax(), (x(2, 3, 7),), {}
    smoothed = LabelSmoothedCrossEntropy(0.1, pad_id=PAD)
    yield "CrossEntropy (smoothing 0.1, padding)", smoothed, (x(2, 3, 7), tgt), {}
    yield "CrossEntropy (no smoothing)", LabelSmoothedCrossEntropy(0.0), (x(2, 3, 7), tgt), {}
    yield from modern_layer_cases(rng, x, tgt, sublayer)
    for label, options in [
        ("Transformer + loss", {}),
        ("Transformer + loss (tied, pre-norm)", {"tie_embeddings": True, "pre_norm": True}),
        ("Decoder-only LM + loss", {"decoder_only": True}),
        ("Transformer + loss (Llama's options, kv_heads 1 of 2)", {**MODERN, "kv_heads": 1}),
        ("Decoder-only LM + loss (Llama's options, pre-norm, kv_heads 2 of 4)",
         {**MODERN, "decoder_only": True, "pre_norm": True, "d_model": 8, "h": 4}),
    ]:
        model, batch = tiny_model(N=1, **options)
        yield label, model, batch, {}


# The options of Llama-like models, all at once: rotary positions, grouped-
# query attention, RMSNorm, SwiGLU, no biases, no output bias, no embedding scale
MODERN = dict(positions="rope", kv_heads=2, norm="rms", activation="swiglu", bias=False,
              output_bias=False, scale_embedding=False)


def modern_layer_cases(rng, x, tgt, sublayer):
    """The layers after the paper, d_model 4: RMSNorm, rotary positions (2
    heads of 2), grouped-query attention (4 heads of 1), SwiGLU, alone and
    in Add & Norm."""
    d_model, causal = 4, decoder_mask(tgt, PAD)

    def attention(h, **options):
        return MultiHeadAttention(d_model, h, rng=rng, **options)

    yield "RMSNorm", RMSNorm(d_model), (x(2, 3, d_model),), {}
    yield "RotaryEmbedding (offset 2)", RotaryEmbedding(4, max_len=8), (x(2, 2, 3, 4),), {
        "offset": 2}
    for offset in (0, 3):
        yield f"MultiHeadAttention (rotary, masked self, offset {offset})", attention(
            2, rope=True, max_len=8), (x(2, 3, d_model),), {"mask": causal, "offset": offset}
    for kv_heads in (2, 1):
        yield f"MultiHeadAttention (kv_heads {kv_heads} of 4, masked self)", attention(
            4, kv_heads=kv_heads), (x(2, 3, d_model),), {"mask": causal}
    yield "MultiHeadAttention (kv_heads 2 of 4, cross, no bias)", attention(
        4, kv_heads=2, bias=False), (x(2, 3, d_model), x(2, 4, d_model)), {}
    yield "SwiGLUFeedForward", SwiGLUFeedForward(d_model, 6, rng=rng), (x(2, 3, d_model),), {}
    yield "SwiGLUFeedForward (no bias)", SwiGLUFeedForward(d_model, 6, rng=rng, bias=False), (
        x(2, 3, d_model),), {}
    yield "Add & Norm (pre-norm, RMSNorm, SwiGLU)", sublayer(
        SwiGLUFeedForward(d_model, 6, rng=rng), True, 0.2, norm="rms"), (x(2, 3, d_model),), {}


def run_report(backend_name=None, seed=0, on_layer_checked=None):
    """Gradient-check every layer in float64; returns the list of TensorChecks.

    ``on_layer_checked(number, label, checks)``, if given, hears of each
    layer check as it ends (number from 1, its TensorChecks): on a GPU the
    whole report takes minutes, one perturbed element at a time."""
    results = []
    with backend.using(backend_name, dtype="float64"):
        rng = backend.host_rng(seed)
        for number, (label, layer, inputs, options) in enumerate(layer_cases(rng), 1):
            if not isinstance(layer, ModelWithLoss):  # those come randomised
                randomise_params(layer, rng)
            checks = check_layer(layer, *inputs, label=label, **options)
            results.extend(checks)
            if on_layer_checked is not None:
                on_layer_checked(number, label, checks)
    return results


def format_table(results):
    """A plain-text table: layer, tensor, shape, relative error, pass/fail."""
    rows = [("layer", "tensor", "shape", "rel. error", "result")]
    for r in results:
        error = f"{r.rel_error:.2e}" if math.isfinite(r.rel_error) else str(r.rel_error)
        rows.append((r.layer, r.tensor, str(r.shape), error, "pass" if r.passed else "FAIL"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)

"""The gradient-check report: every layer, checked on tiny inputs.

``minitrans gradcheck`` runs ``run_report()`` and prints the table. The cases
are small on purpose (central differences run two forwards per element) but
cover every code path: masks, a fully masked row, repeated token ids,
cross-attention's two inputs, dropout, both norm placements, padding in the
loss.
"""

import numpy as np

from minitrans import backend
from minitrans.attention import ScaledDotProductAttention
from minitrans.dropout import Dropout
from minitrans.embedding import Embedding
from minitrans.feedforward import FeedForward
from minitrans.gradcheck import check_layer
from minitrans.layernorm import LayerNorm
from minitrans.linear import Linear
from minitrans.loss import LabelSmoothedCrossEntropy, LogSoftmax
from minitrans.masks import causal_mask, decoder_mask, padding_mask
from minitrans.multihead import MultiHeadAttention
from minitrans.positional import PositionalEncoding
from minitrans.sublayer import SublayerConnection

PAD = 0


def randomise_params(layer, rng, scale=0.5):
    """Replace every parameter by random values.

    Fresh layers have gamma = 1 and zero biases; a backward that mixes up
    gamma and beta, or drops a bias term, can pass a check at those values.
    """
    for module in layer.modules():
        for name, value in module.params.items():
            module.params[name] = backend.from_host(rng.normal(0.0, scale, size=value.shape))
    return layer


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

    def sublayer(inner, pre_norm, dropout):
        return SublayerConnection(inner, d_model, dropout=dropout, pre_norm=pre_norm, rng=rng)

    yield "Linear", Linear(4, 5, rng=rng), (x(2, 3, 4),), {}
    yield "Linear (no bias)", Linear(4, 5, bias=False, rng=rng), (x(2, 3, 4),), {}
    yield "Embedding", Embedding(7, d_model, rng=rng), (tgt,), {}
    yield "PositionalEncoding (odd d_model)", PositionalEncoding(5, max_len=8), (x(2, 3, 5),), {}
    yield "Attention", ScaledDotProductAttention(), (x(2, 2, 3, 2), x(2, 2, 4, 2), x(2, 2, 4, 3)), {}
    yield "Attention (causal)", ScaledDotProductAttention(), (x(2, 2, 3, 2), x(2, 2, 3, 2), x(2, 2, 3, 3)), {"mask": causal_mask(3)}
    yield "Attention (padding, masked row)", ScaledDotProductAttention(), (x(1, 2, 3, 2), x(1, 2, 4, 2), x(1, 2, 4, 3)), {"mask": one_row_masked[:, None]}
    yield "MultiHeadAttention (self)", MultiHeadAttention(d_model, h, rng=rng), (x(2, 3, d_model),), {}
    yield "MultiHeadAttention (masked self)", MultiHeadAttention(d_model, h, rng=rng), (x(2, 3, d_model),), {"mask": decoder_mask(tgt, PAD)}
    yield "MultiHeadAttention (cross)", MultiHeadAttention(d_model, h, rng=rng), (x(2, 3, d_model), x(2, 4, d_model)), {"mask": padding_mask(src, PAD)}
    yield "LayerNorm", LayerNorm(d_model), (x(2, 3, d_model),), {}
    yield "FeedForward", FeedForward(d_model, d_ff, rng=rng), (x(2, 3, d_model),), {}
    yield "Dropout (p=0.3)", Dropout(0.3, rng=rng), (x(2, 3, d_model),), {}
    yield "Add & Norm (post-norm, FFN)", sublayer(FeedForward(d_model, d_ff, rng=rng), False, 0.2), (x(2, 3, d_model),), {}
    yield "Add & Norm (pre-norm, masked self)", sublayer(MultiHeadAttention(d_model, h, rng=rng), True, 0.2), (x(2, 3, d_model),), {"mask": decoder_mask(tgt, PAD)}
    yield "Add & Norm (post-norm, cross)", sublayer(MultiHeadAttention(d_model, h, rng=rng), False, 0.0), (x(2, 3, d_model), x(2, 4, d_model)), {"mask": padding_mask(src, PAD)}
    yield "LogSoftmax", LogSoftmax(), (x(2, 3, 7),), {}
    yield "CrossEntropy (smoothing 0.1, padding)", LabelSmoothedCrossEntropy(0.1, pad_id=PAD), (x(2, 3, 7), tgt), {}
    yield "CrossEntropy (no smoothing)", LabelSmoothedCrossEntropy(0.0), (x(2, 3, 7), tgt), {}


def run_report(backend_name=None, seed=0):
    """Gradient-check every layer in float64; returns the list of TensorChecks."""
    results = []
    with backend.using(backend_name, dtype="float64"):
        rng = backend.host_rng(seed)
        for label, layer, inputs, options in layer_cases(rng):
            randomise_params(layer, rng)
            results.extend(check_layer(layer, *inputs, label=label, **options))
    return results

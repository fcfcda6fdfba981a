"""The gradient-check report: every layer, checked on tiny inputs.

``minitrans gradcheck`` runs ``run_report()`` and prints the table. The cases
are small on purpose (central differences run two forwards per element) but
cover every code path: masks, a fully masked row, repeated token ids,
cross-attention's two inputs, dropout, both norm placements, padding in the
loss.
"""

import numpy as np

from minitrans.core import backend
from minitrans.layers.add_norm import AddNorm
from minitrans.layers.attention import ScaledDotProductAttention
from minitrans.layers.dropout import Dropout
from minitrans.layers.embedding import Embedding
from minitrans.layers.feedforward import FeedForward
from minitrans.layers.layernorm import LayerNorm
from minitrans.layers.linear import Linear
from minitrans.layers.loss import LabelSmoothedCrossEntropy, LogSoftmax
from minitrans.layers.module import Module
from minitrans.layers.multihead import MultiHeadAttention
from minitrans.layers.positional import PositionalEncoding
from minitrans.model.config import ModelConfig
from minitrans.model.language_model import DecoderOnlyLM
from minitrans.model.transformer import Transformer
from minitrans.ops.masks import causal_mask, decoder_mask, padding_mask
from minitrans.tools.gradcheck import check_layer

PAD = 0


class ModelWithLoss(Module):
    """The whole model and its loss as one layer, for whole-model checks.

    ``forward(*model_inputs, targets)`` returns the scalar loss; ``backward``
    runs the loss's backward, then the model's.
    """

    def __init__(self, model, label_smoothing=0.1):
        super().__init__()
        self.model = model
        self.loss = LabelSmoothedCrossEntropy(label_smoothing, pad_id=model.config.pad_id)

    def forward(self, *inputs):
        *model_inputs, targets = inputs
        return self.loss.forward(self.model.forward(*model_inputs), targets)

    def backward(self, dloss=1.0):
        return self.model.backward(self.loss.backward(dloss))


class SublayerWithAddNorm(Module):
    """A sub-layer and the Add & Norm around it as one layer, so that one
    gradient check covers the parameters of both (in a model they sit side by
    side in the encoder or decoder layer).

    ``forward(x, *others, **options)`` is ``add_norm.forward(x, sublayer,
    *others, **options)``; ``backward`` returns dx, or (dx, d_others...).
    """

    def __init__(self, sublayer, add_norm):
        super().__init__()
        self.sublayer = sublayer
        self.add_norm = add_norm

    def forward(self, x, *others, **options):
        return self.add_norm.forward(x, self.sublayer, *others, **options)

    def backward(self, dy):
        return self.add_norm.backward(dy)


def tiny_model(decoder_only=False, tie_embeddings=False, pre_norm=False, N=2, seed=0,
               **options):
    """A whole model small enough for central differences, with dropout on,
    in the current backend and dtype, and its (inputs..., targets) batch:
    padded sources and targets, so every mask is exercised. ``options`` are
    further ModelConfig fields (d_k, positions, activation)."""
    config = ModelConfig(vocab_size=7, d_model=4, h=2, N=N, d_ff=8, dropout=0.1, max_len=8,
                         pre_norm=pre_norm, tie_embeddings=tie_embeddings,
                         decoder_only=decoder_only, **options)
    rng = backend.host_rng(seed)
    model = DecoderOnlyLM(config, rng=rng) if decoder_only else Transformer(config, rng=rng)
    randomise_params(model, rng)
    src = backend.to_device(np.array([[3, 4, 5, 0], [6, 4, 0, 0]]))  # 0 = <pad>
    tgt_in = backend.to_device(np.array([[1, 3, 4], [1, 6, 0]]))  # 1 = <bos>
    tgt_out = backend.to_device(np.array([[3, 4, 2], [6, 2, 0]]))  # 2 = <eos>
    batch = (tgt_in, tgt_out) if decoder_only else (src, tgt_in, tgt_out)
    return ModelWithLoss(model), batch


def randomise_params(layer, rng, scale=0.5):
    """Add N(0, scale^2) noise to every parameter.

    Fresh layers have gamma = 1 and zero biases; a backward that mixes up
    gamma and beta, or drops a bias term, can pass a check at those values.
    Noise around the initial values (rather than replacing them) keeps gamma
    near 1, so gradients keep flowing through every layer norm of a stack.
    """
    for module in layer.modules():
        for name, value in module.params.items():
            noise = backend.from_host(rng.normal(0.0, scale, size=value.shape))
            module.params[name] = value + noise.astype(value.dtype)
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
        add_norm = AddNorm(d_model, dropout=dropout, pre_norm=pre_norm, rng=rng)
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
    for label, options in [
        ("Transformer + loss", {}),
        ("Transformer + loss (tied, pre-norm)", {"tie_embeddings": True, "pre_norm": True}),
        ("Decoder-only LM + loss", {"decoder_only": True}),
    ]:
        model, batch = tiny_model(N=1, **options)
        yield label, model, batch, {}


def run_report(backend_name=None, seed=0):
    """Gradient-check every layer in float64; returns the list of TensorChecks."""
    results = []
    with backend.using(backend_name, dtype="float64"):
        rng = backend.host_rng(seed)
        for label, layer, inputs, options in layer_cases(rng):
            if not isinstance(layer, ModelWithLoss):  # those come randomised
                randomise_params(layer, rng)
            results.extend(check_layer(layer, *inputs, label=label, **options))
    return results

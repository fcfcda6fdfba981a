"""Test models for gradient checks: a whole model with its loss as one
layer (``tiny_model``), a sub-layer with its Add & Norm as one layer, and
``randomise_params``, which moves every parameter off its initial value so
that a check cannot pass by the luck of gamma = 1 and zero biases."""

import numpy as np

from minitrans.core import backend
from minitrans.layers.loss import LabelSmoothedCrossEntropy
from minitrans.layers.module import Module
from minitrans.model.config import ModelConfig
from minitrans.model.language_model import DecoderOnlyLM
from minitrans.model.transformer import Transformer


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
    further ModelConfig fields (d_k, positions, activation, norm, kv_heads,
    ...) or other sizes than these (d_model 4, h 2, d_ff 8)."""
    sizes = dict(vocab_size=7, d_model=4, h=2, N=N, d_ff=8, dropout=0.1, max_len=8)
    config = ModelConfig(**{**sizes, **options}, pre_norm=pre_norm,
                         tie_embeddings=tie_embeddings, decoder_only=decoder_only)
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

"""Reading a model's attention weights: one way for both models.

Every attention of Figure 1, self or cross, in the encoder or the decoder,
ends in a ``ScaledDotProductAttention`` (inside ``MultiHeadAttention``),
which keeps the weights of its last forward,

    P = softmax(Q K^T / sqrt(d_k) + M),   (B, h, T_q, T_k).

The models find those layers by their class (``isinstance``), not by the
spelling of a class name, so a renamed or subclassed attention is still
found, and report P under the layer's qualified name, as
``named_parameters`` names weights: "decoder.layers.0.cross_attn.attention".
"""

from minitrans.layers.attention import ScaledDotProductAttention


def attention_layers(model):
    """(qualified name, layer) for every ScaledDotProductAttention in
    ``model`` (any Module), in the order ``named_modules`` walks them."""
    for name, module in model.named_modules():
        if isinstance(module, ScaledDotProductAttention):
            yield name.rstrip("."), module  # named_modules' prefixes end in "."


class AttentionMapsMixin:
    """``attention_maps()`` for a model built from minitrans's layers: the
    Transformer and the decoder-only model both inherit it (with Module)."""

    def attention_maps(self):
        """Attention weights of the last forward or step, by layer name:
        (B, h, T_q, T_k) arrays, for plotting. A layer that has not run
        (or whose arrays moved to another device since) has no weights and
        is left out."""
        return {
            name: layer.attention_weights
            for name, layer in attention_layers(self)
            if layer.cache is not None
        }

"""The encoder: a stack of N identical layers (paper §3.1, Figure 1 left)."""

from minitrans.core import backend, checks
from minitrans.layers.add_norm import AddNorm, build_norm
from minitrans.layers.feedforward import build_feed_forward
from minitrans.layers.module import Module
from minitrans.layers.multihead import MultiHeadAttention


class EncoderLayer(Module):
    """Self-attention, then the feed-forward network, each in Add & Norm.

        z = AddNorm(x, SelfAttention(x, mask))
        y = AddNorm(z, FFN(z))

    ``self_attn`` and ``feed_forward`` are the sub-layers themselves;
    ``self_attn_norm`` and ``feed_forward_norm`` their Add & Norm blocks.

    The encoder sees the whole source sentence at once: its mask hides only
    padding keys, never later positions.

    Options after the paper (keyword only; ``ModelConfig.layer_options``):
    ``d_k`` and ``kv_heads`` (grouped-query attention), ``bias`` (of the
    attention's and the feed-forward's projections), ``rope``, ``rope_base``
    and ``max_len`` (rotary positions in the self-attention) for
    ``MultiHeadAttention``; ``activation`` ("relu", "gelu" or "swiglu") for
    ``build_feed_forward``; ``norm`` ("layer" or "rms") and ``norm_eps`` for
    the Add & Norm blocks.

    Inputs:
        x:    (B, T_src, d_model)
        mask: boolean, True = may attend, broadcastable to (B, T_src, T_src),
              usually ``padding_mask(src_ids, pad_id)`` of shape (B, 1, T_src)
    Returns:
        y: (B, T_src, d_model)
    """

    def __init__(self, d_model, h, d_ff, dropout=0.1, pre_norm=False, rng=None, *, d_k=None,
                 activation="relu", kv_heads=None, bias=True, norm="layer", norm_eps=1e-5,
                 rope=False, rope_base=10000.0, max_len=5000):
        super().__init__()
        rng = backend.host_rng(rng)
        self.self_attn = MultiHeadAttention(d_model, h, rng=rng, d_k=d_k, kv_heads=kv_heads,
                                            bias=bias, rope=rope, rope_base=rope_base,
                                            max_len=max_len)
        norms = dict(eps=norm_eps, rng=rng, norm=norm)
        self.self_attn_norm = AddNorm(d_model, dropout, pre_norm, **norms)
        self.feed_forward = build_feed_forward(d_model, d_ff, activation, bias, rng=rng)
        self.feed_forward_norm = AddNorm(d_model, dropout, pre_norm, **norms)

    def forward(self, x, mask=None):
        z = self.self_attn_norm.forward(x, self.self_attn, mask=mask)
        return self.feed_forward_norm.forward(z, self.feed_forward)

    def backward(self, dy):
        return self.self_attn_norm.backward(self.feed_forward_norm.backward(dy))


class Encoder(Module):
    """N encoder layers; with pre-norm, a final LayerNorm (the residual
    stream of a pre-norm stack is never normalised otherwise), or RMSNorm
    with ``norm="rms"``. ``options`` are EncoderLayer's keyword options.

    Inputs:
        x:    (B, T_src, d_model) embedded source
        mask: as for ``EncoderLayer``
    Returns:
        memory: (B, T_src, d_model), what the decoder's cross-attention reads
    """

    def __init__(self, N, d_model, h, d_ff, dropout=0.1, pre_norm=False, rng=None, **options):
        super().__init__()
        checks.check_positive_int("N", N)
        rng = backend.host_rng(rng)
        self.layers = [
            EncoderLayer(d_model, h, d_ff, dropout, pre_norm, rng=rng, **options)
            for _ in range(N)
        ]
        self.final_norm = final_norm(d_model, pre_norm, **options)

    def forward(self, x, mask=None):
        for layer in self.layers:
            x = layer.forward(x, mask=mask)
        return x if self.final_norm is None else self.final_norm.forward(x)

    def backward(self, dmemory):
        if self.final_norm is not None:
            dmemory = self.final_norm.backward(dmemory)
        for layer in reversed(self.layers):
            dmemory = layer.backward(dmemory)
        return dmemory


def final_norm(d_model, pre_norm, norm="layer", norm_eps=1e-5, **_):
    """The norm at the top of a pre-norm stack (None after post-norm
    layers, whose output is normalised already); ``_``: the stack's other
    options, which it does not need."""
    return build_norm(norm, d_model, norm_eps) if pre_norm else None

"""The decoder: a stack of N identical layers (paper §3.1, Figure 1 right)."""

from minitrans.core import backend, checks
from minitrans.layers.add_norm import AddNorm
from minitrans.layers.feedforward import build_feed_forward
from minitrans.layers.module import Module
from minitrans.layers.multihead import MultiHeadAttention
from minitrans.model.encoder import final_norm


class DecoderLayer(Module):
    """Masked self-attention, cross-attention, feed-forward, each in Add & Norm.

        a = AddNorm(x, SelfAttention(x, self_mask))        causal: no peeking
        c = AddNorm(a, CrossAttention(a, memory, memory_mask))
        y = AddNorm(c, FFN(c))

    Cross-attention takes its queries from the decoder and its keys and values
    from the encoder output ``memory``, so ``backward`` returns (dx, dmemory).
    A decoder-only model (``cross_attention=False``) drops the middle block.

    ``self_attn``, ``cross_attn`` and ``feed_forward`` are the sub-layers
    themselves; ``self_attn_norm``, ``cross_attn_norm`` and
    ``feed_forward_norm`` their Add & Norm blocks.

    The options after the paper are EncoderLayer's; rotary positions
    (``rope``) turn the self-attention's queries and keys, never the
    cross-attention's.

    Inputs:
        x:           (B, T_tgt, d_model)
        memory:      (B, T_src, d_model), absent without cross-attention
        self_mask:   broadcastable to (B, T_tgt, T_tgt), causal and padding
        memory_mask: broadcastable to (B, T_tgt, T_src), padding of the source
    Returns:
        y: (B, T_tgt, d_model)
    """

    def __init__(
        self, d_model, h, d_ff, dropout=0.1, pre_norm=False, cross_attention=True, rng=None,
        *, d_k=None, activation="relu", kv_heads=None, bias=True, norm="layer", norm_eps=1e-5,
        rope=False, rope_base=10000.0, max_len=5000,
    ):
        super().__init__()
        rng = backend.host_rng(rng)
        heads = dict(rng=rng, d_k=d_k, kv_heads=kv_heads, bias=bias)
        norms = dict(eps=norm_eps, rng=rng, norm=norm)
        self.self_attn = MultiHeadAttention(d_model, h, **heads, rope=rope, rope_base=rope_base,
                                            max_len=max_len)
        self.self_attn_norm = AddNorm(d_model, dropout, pre_norm, **norms)
        self.cross_attn = self.cross_attn_norm = None
        if cross_attention:
            self.cross_attn = MultiHeadAttention(d_model, h, **heads)
            self.cross_attn_norm = AddNorm(d_model, dropout, pre_norm, **norms)
        self.feed_forward = build_feed_forward(d_model, d_ff, activation, bias, rng=rng)
        self.feed_forward_norm = AddNorm(d_model, dropout, pre_norm, **norms)

    def forward(self, x, memory=None, self_mask=None, memory_mask=None):
        if (memory is None) != (self.cross_attn is None):
            raise ValueError(
                "memory: expected the encoder output for a layer with cross-attention "
                "and None for a decoder-only layer"
            )
        x = self.self_attn_norm.forward(x, self.self_attn, mask=self_mask)
        if self.cross_attn is not None:
            x = self.cross_attn_norm.forward(x, self.cross_attn, memory, mask=memory_mask)
        return self.feed_forward_norm.forward(x, self.feed_forward)

    def step(self, x, cache, memory_kv=None, memory_mask=None):
        """Decode new positions ``x`` (B, t, d_model) given the earlier ones in
        ``cache`` (a KVCache this call extends) and the precomputed cross-
        attention keys and values ``memory_kv``. Inference only."""

        # add_bias: False where the AddNorm adds the output bias itself (AddNorm.infer)
        def self_attention(z, add_bias=True):
            offset = cache.length  # the absolute position of z's first row (rotary positions)
            cache.append(*self.self_attn.keys_values(z, offset))
            mask = _new_positions_mask(z.shape[1], cache.length)
            return self.self_attn.attend(z, cache.keys, cache.values, mask=mask, offset=offset,
                                         add_bias=add_bias)

        def cross_attention(z, add_bias=True):
            return self.cross_attn.attend(z, *memory_kv, mask=memory_mask, add_bias=add_bias)

        x = self.self_attn_norm.infer(x, self_attention, self.self_attn)
        if self.cross_attn is not None:
            x = self.cross_attn_norm.infer(x, cross_attention, self.cross_attn)
        return self.feed_forward_norm.infer(x, self.feed_forward.forward, self.feed_forward)

    def backward(self, dy, dmemory=None):
        """dx, or (dx, dmemory) with cross-attention; given ``dmemory``, the
        memory's gradient from the layers above, this layer's is added into
        it (inside the cross-attention's product) and it is returned."""
        dx = self.feed_forward_norm.backward(dy)
        if self.cross_attn is None:
            return self.self_attn_norm.backward(dx)
        dx, dmemory = self.cross_attn_norm.backward(dx, memory_add_to=dmemory)
        return self.self_attn_norm.backward(dx), dmemory


def _new_positions_mask(length_new, length):
    """The causal mask (length_new, length) of the last length_new positions
    of ``length``: new position i sees every cached one and the new ones up
    to i. One new position, as decoding feeds, sees everything: no mask, so
    a decoded token builds none."""
    if length_new == 1:
        return None
    xp = backend.get_xp()
    return xp.tril(xp.ones((length_new, length), dtype=bool), k=length - length_new)


class Decoder(Module):
    """N decoder layers (and a final LayerNorm with pre-norm, or RMSNorm with
    ``norm="rms"``); ``options`` are DecoderLayer's keyword options.

    Every layer's cross-attention reads the same ``memory``, so the gradient
    of ``memory`` is the sum of what each layer sends back.

    Inputs and returns as ``DecoderLayer``; ``backward`` returns (dx, dmemory),
    or dx alone for a decoder-only stack.
    """

    def __init__(
        self, N, d_model, h, d_ff, dropout=0.1, pre_norm=False, cross_attention=True, rng=None,
        **options,
    ):
        super().__init__()
        checks.check_positive_int("N", N)
        rng = backend.host_rng(rng)
        self.layers = [
            DecoderLayer(d_model, h, d_ff, dropout, pre_norm, cross_attention, rng=rng, **options)
            for _ in range(N)
        ]
        self.final_norm = final_norm(d_model, pre_norm, **options)
        self.cross_attention = cross_attention

    def forward(self, x, memory=None, self_mask=None, memory_mask=None):
        for layer in self.layers:
            x = layer.forward(x, memory, self_mask=self_mask, memory_mask=memory_mask)
        return x if self.final_norm is None else self.final_norm.forward(x)

    def step(self, x, caches, memory_kvs=None, memory_mask=None):
        """Incremental forward of new positions; see ``DecoderLayer.step``."""
        memory_kvs = memory_kvs or [None] * len(self.layers)
        for layer, cache, memory_kv in zip(self.layers, caches, memory_kvs):
            x = layer.step(x, cache, memory_kv, memory_mask)
        return x if self.final_norm is None else self.final_norm.forward(x)

    def backward(self, dy):
        if self.final_norm is not None:
            dy = self.final_norm.backward(dy)
        if not self.cross_attention:
            for layer in reversed(self.layers):
                dy = layer.backward(dy)
            return dy
        # memory feeds every layer: the sum of their gradients (the first one as it is)
        dmemory = None
        for layer in reversed(self.layers):
            if dmemory is not None and backend.on_device():
                # added into the sum inside the layer's product, a launch saved; it adds
                # in another order than the line below, so NumPy keeps that one's bits
                dy, dmemory = layer.backward(dy, dmemory)
                continue
            dy, dmemory_layer = layer.backward(dy)
            dmemory = dmemory_layer if dmemory is None else dmemory + dmemory_layer
        return dy, dmemory

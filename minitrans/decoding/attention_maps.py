"""Attention maps of a decoded output: decode, then rerun it teacher-forced.

Decoding itself (``search``) keeps no attention maps: the cache's steps see
one query at a time. To plot what the model looked at while it produced
each token, the tokens are decoded first and then fed through the model's
forward in one go, which keeps every layer's weights.
"""

from minitrans.core import backend
from minitrans.decoding.search import generate, greedy


def decode_with_attention(model, src, max_len, bos_id=1, eos_id=2, pad_id=0):
    """Greedy-decode src, then rerun the result teacher-forced, for plotting.

    The forward gets <bos> + tokens[:, :-1], the inputs of the decoding
    steps, so row t of each map is the attention while token t was produced.
    Returns tokens (B, L) and ``model.attention_maps()``: (B, h, L, T) by
    layer name, e.g. "decoder.layers.0.cross_attn.attention".
    """
    xp = backend.get_xp()
    tokens = greedy(model, src, max_len, bos_id, eos_id, pad_id)
    bos = xp.full((tokens.shape[0], 1), bos_id, dtype=tokens.dtype)
    model.forward(src, xp.concatenate([bos, tokens[:, :-1]], axis=1))
    return tokens, model.attention_maps()


def generate_with_attention(lm, prompt, max_new_tokens, eos_id=2, pad_id=0):
    """Greedy-continue ``prompt`` (B, T0) with a DecoderOnlyLM, then rerun
    prompt + tokens[:, :-1] teacher-forced, for plotting: row t of each map
    is the attention of the position whose next token is token t + 1 of
    prompt[:, 1:] + tokens. Returns tokens (B, L) and ``lm.attention_maps()``:
    (B, h, T0 + L - 1, T0 + L - 1) by layer name, e.g.
    "decoder.layers.0.self_attn.attention".

    ``decode_with_attention`` is the encoder-decoder version: a language
    model has no source to encode, and its ``start`` takes a batch size.
    """
    xp = backend.get_xp()
    tokens = generate(lm, prompt, max_new_tokens, eos_id=eos_id, pad_id=pad_id)
    lm.forward(xp.concatenate([prompt, tokens[:, :-1]], axis=1))
    return tokens, lm.attention_maps()

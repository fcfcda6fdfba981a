"""The encoder-decoder Transformer of Figure 1, and its decoding interface."""

from minitrans.core import backend, checks
from minitrans.layers.module import Module
from minitrans.layers.projection import OutputProjection
from minitrans.model.attention_weights import AttentionMapsMixin
from minitrans.model.config import ModelConfig
from minitrans.model.decoder import Decoder
from minitrans.model.encoder import Encoder
from minitrans.model.init_schemes import apply_init
from minitrans.model.input_embedding import InputEmbedding
from minitrans.model.kvcache import DecodingState, KVCache
from minitrans.ops.masks import decoder_mask, padding_mask


class Transformer(AttentionMapsMixin, Module):
    """Source ids in, next-token logits of the target out (paper Figure 1).

        memory = Encoder(InputEmbedding_src(src))
        y      = Decoder(InputEmbedding_tgt(tgt_in), memory)
        logits = y W + b                         (log-softmax is in the loss)

    Training uses teacher forcing: ``tgt_in`` is the target shifted right,
    <bos> + target[:-1], and the logits at position t predict target[t]. The
    causal mask keeps position t from seeing target[t] itself; padding masks
    hide <pad> keys in both languages.

    ``backward(dlogits)`` runs every layer's backward in the reverse order of
    the forward. The encoder output feeds every decoder layer's cross-
    attention, so its gradient is the sum over those layers (the Decoder adds
    them up) before it flows into the encoder. Token ids get no gradient, so
    it returns None.

    ``attention_maps()`` (AttentionMapsMixin) gives every attention layer's
    weights of the last forward or step, by layer name.

    Inputs:
        src:    (B, T_src) source ids, padded with config.pad_id
        tgt_in: (B, T_tgt) shifted target ids
    Returns:
        logits: (B, T_tgt, vocab_size)
    """

    def __init__(self, config, rng=None):
        super().__init__()
        if not isinstance(config, ModelConfig) or config.decoder_only:
            raise TypeError(f"config: expected an encoder-decoder ModelConfig, got {config!r}")
        self.config = c = config
        rng = backend.host_rng(rng)
        embedding = dict(rng=rng, positions=c.positions, scale=c.scale_embedding)
        self.src_embed = InputEmbedding(
            c.source_vocab_size, c.d_model, c.max_len, c.dropout, **embedding
        )
        shared = self.src_embed.embedding if c.tie_embeddings else None
        self.tgt_embed = InputEmbedding(
            c.vocab_size, c.d_model, c.max_len, c.dropout, shared_with=shared, **embedding
        )
        options = dict(rng=rng, **c.layer_options())
        self.encoder = Encoder(c.N, c.d_model, c.h, c.d_ff, c.dropout, c.pre_norm, **options)
        self.decoder = Decoder(c.N, c.d_model, c.h, c.d_ff, c.dropout, c.pre_norm, **options)
        tied = self.tgt_embed.embedding if c.tie_embeddings else None
        self.output_projection = OutputProjection(c.d_model, c.vocab_size, tied_to=tied, rng=rng,
                                                  bias=c.output_bias)
        apply_init(self, c.init, c.N, rng)  # "xavier": the layers' own values, as drawn

    # ------------------------------------------------------------ training

    def forward(self, src, tgt_in):
        self._check_ids("src", src, self.config.source_vocab_size)
        self._check_ids("tgt_in", tgt_in, self.config.vocab_size)
        if src.shape[0] != tgt_in.shape[0]:
            raise ValueError(
                f"tgt_in: expected batch size {src.shape[0]} (as src), got {tgt_in.shape[0]}"
            )
        with checks.inputs_checked():  # ids checked above: no layer checks again
            memory, src_mask = self.encode(src)
            tgt_mask = decoder_mask(tgt_in, self.config.pad_id)  # (B, T_tgt, T_tgt)
            x = self.tgt_embed.forward(tgt_in)
            y = self.decoder.forward(x, memory, self_mask=tgt_mask, memory_mask=src_mask)
            return self.output_projection.forward(y)

    def backward(self, dlogits):
        dy = self.output_projection.backward(dlogits)
        dx_tgt, dmemory = self.decoder.backward(dy)  # dmemory: summed over layers
        self.tgt_embed.backward(dx_tgt)
        self.src_embed.backward(self.encoder.backward(dmemory))
        return None

    def encode(self, src):
        """memory (B, T_src, d_model) and the source padding mask (B, 1, T_src)."""
        src_mask = padding_mask(src, self.config.pad_id)
        return self.encoder.forward(self.src_embed.forward(src), mask=src_mask), src_mask

    # ------------------------------------------------------------ decoding

    def start(self, src):
        """Encode ``src`` once and return the state that ``step`` extends."""
        self._check_ids("src", src, self.config.source_vocab_size)
        with checks.inputs_checked():
            memory, src_mask = self.encode(src)
            memory_kvs = [layer.cross_attn.keys_values(memory) for layer in self.decoder.layers]
        caches = [self._new_cache(src.shape[0], memory.dtype) for _ in self.decoder.layers]
        return DecodingState(caches, memory_kvs, src_mask)

    def step(self, state, tokens):
        """Logits (B, V) of the next token after feeding ``tokens`` (B,).

        Only the new position is embedded and projected; the earlier ones
        come from the key/value caches in ``state``. The tokens' range is
        checked unless the caller did (the decoding loops, inside
        ``checks.inputs_checked``: one wait for the GPU fewer per token).
        """
        checks.check_token_ids("tokens", tokens, self.config.vocab_size, ndim=1)
        with checks.inputs_checked():
            x = self.tgt_embed.forward(tokens[:, None], offset=state.position)  # (B, 1, d_model)
            y = self.decoder.step(x, state.caches, state.memory_kvs, state.memory_mask)
            state.position += 1
            return self.output_projection.forward(y)[:, -1]

    def prefix_logits(self, src, prefix):
        """Logits (B, V) after ``prefix`` (B, t), recomputing everything: the
        slow path that the cache must reproduce."""
        return self.forward(src, prefix)[:, -1]

    def _new_cache(self, batch, dtype):
        c = self.config
        return KVCache(batch, c.key_value_heads, c.head_width, c.max_len, dtype)

    def _check_ids(self, name, ids, vocab_size):
        """(B, T) token ids, B >= 1 and 1 <= T <= max_len, each in [0, vocab_size)."""
        checks.check_token_ids(
            name, ids, vocab_size, ndim=2, nonempty=True, max_len=self.config.max_len
        )

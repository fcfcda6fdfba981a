"""A decoder-only (GPT-style) language model built from the same parts."""

from minitrans.core import backend, checks
from minitrans.layers.module import Module
from minitrans.layers.projection import OutputProjection
from minitrans.model.attention_weights import AttentionMapsMixin
from minitrans.model.config import ModelConfig
from minitrans.model.decoder import Decoder
from minitrans.model.init_schemes import apply_init
from minitrans.model.input_embedding import InputEmbedding
from minitrans.model.kvcache import DecodingState, KVCache
from minitrans.ops.masks import decoder_mask


class DecoderOnlyLM(AttentionMapsMixin, Module):
    """Next-token prediction with masked self-attention only.

    Take the Transformer's decoder, drop its cross-attention (there is no
    source sentence to attend to) and train it to predict token t+1 from
    tokens 0..t. That is the shape of GPT and of most large language models
    today; everything else here is the same embedding, attention, feed-forward
    and Add & Norm as in the encoder-decoder.

        logits = Decoder_no_cross(InputEmbedding(ids)) W + b

    ``attention_maps()`` (AttentionMapsMixin) gives the self-attention
    weights of the last forward or step, by layer name, as the Transformer's.

    Inputs:
        ids: (B, T) token ids, padded with config.pad_id
    Returns:
        logits: (B, T, vocab_size); logits[:, t] predicts ids[:, t + 1]
    """

    def __init__(self, config, rng=None):
        super().__init__()
        if not isinstance(config, ModelConfig) or not config.decoder_only:
            raise TypeError(
                f"config: expected a ModelConfig with decoder_only=True, got {config!r}"
            )
        self.config = c = config
        rng = backend.host_rng(rng)
        self.embed = InputEmbedding(
            c.vocab_size, c.d_model, c.max_len, c.dropout, rng=rng, positions=c.positions,
            scale=c.scale_embedding,
        )
        self.decoder = Decoder(
            c.N, c.d_model, c.h, c.d_ff, c.dropout, c.pre_norm, cross_attention=False, rng=rng,
            **c.layer_options(),
        )
        tied = self.embed.embedding if c.tie_embeddings else None
        self.output_projection = OutputProjection(c.d_model, c.vocab_size, tied_to=tied, rng=rng,
                                                  bias=c.output_bias)
        apply_init(self, c.init, c.N, rng)  # "xavier": the layers' own values, as drawn

    def forward(self, ids):
        c = self.config
        checks.check_token_ids("ids", ids, c.vocab_size, ndim=2, nonempty=True, max_len=c.max_len)
        mask = decoder_mask(ids, self.config.pad_id)  # (B, T, T)
        with checks.inputs_checked():  # ids checked above: no layer checks again
            y = self.decoder.forward(self.embed.forward(ids), self_mask=mask)
            return self.output_projection.forward(y)

    def backward(self, dlogits):
        self.embed.backward(self.decoder.backward(self.output_projection.backward(dlogits)))
        return None

    # ------------------------------------------------------------ decoding

    def start(self, batch_size):
        """An empty state; feed a prompt to ``step`` one token at a time."""
        c = self.config
        dtype = self.embed.embedding.W_E.dtype
        caches = [  # grouped-query attention caches only its kv_heads heads
            KVCache(batch_size, c.key_value_heads, c.head_width, c.max_len, dtype)
            for _ in self.decoder.layers
        ]
        return DecodingState(caches)

    def step(self, state, tokens):
        """Logits (B, V) of the next token after feeding ``tokens`` (B,);
        their range is checked as ``Transformer.step`` checks it."""
        checks.check_token_ids("tokens", tokens, self.config.vocab_size, ndim=1)
        with checks.inputs_checked():
            x = self.embed.forward(tokens[:, None], offset=state.position)
            y = self.decoder.step(x, state.caches)
            state.position += 1
            return self.output_projection.forward(y)[:, -1]

    def prefix_logits(self, prefix):
        """Logits (B, V) after ``prefix`` (B, t), recomputed from scratch."""
        return self.forward(prefix)[:, -1]

"""The minitrans architectures written with PyTorch's own layers.

``TorchTransformer`` is Figure 1 of the paper around ``torch.nn.Transformer``
(batch_first, ReLU, LayerNorm eps 1e-5, post-norm or pre-norm) and
``TorchLanguageModel`` the decoder-only model around
``torch.nn.TransformerEncoder`` with a causal mask (a decoder layer without
cross-attention is exactly an encoder layer that may not look ahead). Their
sizes come from a ``minitrans.ModelConfig``; ``minitrans.interop.torch``
copies weights between them and minitrans models.

Where PyTorch's defaults differ from minitrans, these modules follow
minitrans (and the paper, §5.4):

- dropout only on the embeddings and on each sub-layer's output before the
  residual add; PyTorch would also drop attention weights and the
  feed-forward hidden layer, so those two dropouts are set to 0;
- a post-norm stack has no final LayerNorm (``nn.Transformer`` adds one to
  both stacks by default); a pre-norm stack has one, as in minitrans;
- no nested tensors in the encoder, so padded positions keep their values
  instead of becoming zeros;
- GELU is the tanh form, minitrans's (PyTorch's default is the exact one);
- ``bias=False`` leaves out the projections' biases but keeps the norms'
  shifts, as minitrans does (PyTorch's ``bias=False`` drops both).

Of the later options they build GPT-2's (``activation="gelu"``,
``positions="learned"``, ``bias``, ``output_bias``, ``scale_embedding``);
the others (rotary positions, SwiGLU, RMSNorm, grouped or narrower heads)
are refused by name.

Masks follow PyTorch's convention: True marks a key that may NOT be attended
to (minitrans uses True for "may attend").
"""

import functools
import math

import torch
from torch import nn


def sinusoidal_table(max_len, d_model):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(same), in float64."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    feature = torch.arange(d_model)
    two_i = (feature - feature % 2).to(torch.float64)
    angle = position / 10000.0 ** (two_i / d_model)
    return torch.where(feature % 2 == 0, torch.sin(angle), torch.cos(angle))


def causal_mask(length, device=None):
    """(T, T) boolean, True above the diagonal: position t may not see t' > t."""
    return torch.ones(length, length, dtype=torch.bool, device=device).triu(diagonal=1)


class TorchInputEmbedding(nn.Module):
    """Dropout(Embedding(ids) * sqrt(d_model) + PE[:T]); ``shared`` reuses
    another ``nn.Embedding`` (tied source and target embeddings);
    ``positions="learned"`` adds the table ``positions`` instead of the
    sinusoids, and ``scale=False`` leaves out sqrt(d_model)."""

    def __init__(self, vocab_size, d_model, max_len, dropout, shared=None,
                 positions="sinusoidal", scale=True):
        super().__init__()
        self.embedding = shared if shared is not None else nn.Embedding(vocab_size, d_model)
        self.scale = math.sqrt(d_model) if scale else 1.0
        if positions == "learned":
            self.positions = nn.Parameter(torch.zeros(max_len, d_model))
        else:  # float64, so that a model moved to float64 gets the exact table
            self.register_buffer("positions", sinusoidal_table(max_len, d_model),
                                 persistent=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, ids):
        x = self.embedding(ids) * self.scale
        return self.dropout(x + self.positions[: ids.shape[1]].to(x.dtype))


def _input_embedding(config, vocab_size, shared=None):
    return TorchInputEmbedding(vocab_size, config.d_model, config.max_len, config.dropout,
                               shared, positions=config.positions, scale=config.scale_embedding)


# What the mirror builds as minitrans does: every other option at its value here
BUILT = {"positions": ("sinusoidal", "learned"), "activation": ("relu", "gelu")}
FIXED = {"d_k": None, "norm": "layer", "norm_eps": 1e-5, "kv_heads": None}
ACTIVATIONS = {"relu": "relu", "gelu": functools.partial(nn.functional.gelu, approximate="tanh")}


def _layer_options(config):
    """nn.TransformerEncoderLayer's arguments for the config's layer. Its
    attention has heads of d_model / h; what this mirror cannot build is
    refused by name."""
    for name, value in ((name, getattr(config, name)) for name in FIXED):
        if value != FIXED[name]:
            raise ValueError(f"config.{name}: the PyTorch mirror builds {name}={FIXED[name]!r} "
                             f"only; got {value!r}")
    for name, choices in BUILT.items():
        if getattr(config, name) not in choices:
            raise ValueError(f"config.{name}: the PyTorch mirror builds {choices}; "
                             f"got {getattr(config, name)!r}")
    return dict(d_model=config.d_model, nhead=config.h, dim_feedforward=config.d_ff,
                dropout=config.dropout, activation=ACTIVATIONS[config.activation],
                layer_norm_eps=1e-5, batch_first=True, norm_first=config.pre_norm,
                bias=config.bias)


def _layer(kind, config):
    """One layer of ``kind`` (nn.TransformerEncoderLayer or DecoderLayer),
    with minitrans's dropout and, without biases, norms that keep their
    shifts."""
    layer = _paper_dropout(kind(**_layer_options(config)))
    if not config.bias:
        for name in ("norm1", "norm2", "norm3"):
            if hasattr(layer, name):
                setattr(layer, name, nn.LayerNorm(config.d_model, eps=1e-5))
    return layer


def _padding(ids, pad_id):
    """PyTorch's key padding mask (True: a pad key), or None without a pad token."""
    return None if pad_id is None else ids == pad_id


def _paper_dropout(layer):
    """Residual dropout only: no dropout on attention weights or inside the FFN."""
    layer.dropout.p = 0.0  # between the feed-forward network's two linear maps
    for name in ("self_attn", "multihead_attn"):
        if hasattr(layer, name):
            getattr(layer, name).dropout = 0.0  # on the attention weights
    return layer


def _final_norm(config):
    return nn.LayerNorm(config.d_model, eps=1e-5) if config.pre_norm else None


def _output_projection(config, tied_embedding):
    projection = nn.Linear(config.d_model, config.vocab_size, bias=config.output_bias)
    if tied_embedding is not None:
        # nn.Linear stores (out, in) = (V, d_model): the embedding table itself
        projection.weight = tied_embedding.weight
    return projection


class TorchTransformer(nn.Module):
    """``forward(src, tgt_in)``: (B, T_src) and (B, T_tgt) ids to (B, T_tgt, V) logits."""

    def __init__(self, config):
        super().__init__()
        if config.decoder_only:
            raise ValueError("config: expected an encoder-decoder config, got decoder_only=True")
        self.config = c = config
        self.src_embed = _input_embedding(c, c.source_vocab_size)
        shared = self.src_embed.embedding if c.tie_embeddings else None
        self.tgt_embed = _input_embedding(c, c.vocab_size, shared)
        options = _layer_options(c)
        encoder = nn.TransformerEncoder(_layer(nn.TransformerEncoderLayer, c), c.N,
                                        norm=_final_norm(c), enable_nested_tensor=False)
        decoder = nn.TransformerDecoder(_layer(nn.TransformerDecoderLayer, c), c.N,
                                        norm=_final_norm(c))
        self.transformer = nn.Transformer(custom_encoder=encoder, custom_decoder=decoder, **options)
        self.output_projection = _output_projection(c, shared)

    def forward(self, src, tgt_in):
        src_padding = _padding(src, self.config.pad_id)
        y = self.transformer(
            self.src_embed(src), self.tgt_embed(tgt_in),
            tgt_mask=causal_mask(tgt_in.shape[1], tgt_in.device),
            src_key_padding_mask=src_padding,
            tgt_key_padding_mask=_padding(tgt_in, self.config.pad_id),
            memory_key_padding_mask=src_padding,
        )
        return self.output_projection(y)


class TorchLanguageModel(nn.Module):
    """``forward(ids)``: (B, T) ids to (B, T, V) next-token logits."""

    def __init__(self, config):
        super().__init__()
        if not config.decoder_only:
            raise ValueError("config: expected a decoder-only config, got decoder_only=False")
        self.config = c = config
        self.embed = _input_embedding(c, c.vocab_size)
        self.decoder = nn.TransformerEncoder(
            _layer(nn.TransformerEncoderLayer, c), c.N, norm=_final_norm(c),
            enable_nested_tensor=False
        )
        tied = self.embed.embedding if c.tie_embeddings else None
        self.output_projection = _output_projection(c, tied)

    def forward(self, ids):
        y = self.decoder(self.embed(ids), mask=causal_mask(ids.shape[1], ids.device),
                         src_key_padding_mask=_padding(ids, self.config.pad_id))
        return self.output_projection(y)

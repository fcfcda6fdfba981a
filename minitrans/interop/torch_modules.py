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
  instead of becoming zeros.

Masks follow PyTorch's convention: True marks a key that may NOT be attended
to (minitrans uses True for "may attend").
"""

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
    another ``nn.Embedding`` (tied source and target embeddings)."""

    def __init__(self, vocab_size, d_model, max_len, dropout, shared=None):
        super().__init__()
        self.embedding = shared if shared is not None else nn.Embedding(vocab_size, d_model)
        self.scale = math.sqrt(d_model)
        # float64, so that a model moved to float64 gets the exact table
        self.register_buffer("pe", sinusoidal_table(max_len, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, ids):
        x = self.embedding(ids) * self.scale
        return self.dropout(x + self.pe[: ids.shape[1]].to(x.dtype))


def _layer_options(config):
    """nn.TransformerEncoderLayer's arguments for the paper's layer. Its
    attention has heads of d_model / h, and this mirror knows only the
    paper's ReLU and sinusoids: the later options are refused by name."""
    paper = {"d_k": None, "positions": "sinusoidal", "activation": "relu", "norm": "layer",
             "norm_eps": 1e-5, "kv_heads": None, "bias": True, "output_bias": True,
             "scale_embedding": True}
    for name, value in ((name, getattr(config, name)) for name in paper):
        if value != paper[name]:
            raise ValueError(f"config.{name}: the PyTorch mirror builds the paper's model, "
                             f"{name}={paper[name]!r}; got {value!r}")
    return dict(d_model=config.d_model, nhead=config.h, dim_feedforward=config.d_ff,
                dropout=config.dropout, activation="relu", layer_norm_eps=1e-5,
                batch_first=True, norm_first=config.pre_norm)


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
    projection = nn.Linear(config.d_model, config.vocab_size)
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
        self.src_embed = TorchInputEmbedding(c.source_vocab_size, c.d_model, c.max_len, c.dropout)
        shared = self.src_embed.embedding if c.tie_embeddings else None
        self.tgt_embed = TorchInputEmbedding(c.vocab_size, c.d_model, c.max_len, c.dropout, shared)
        options = _layer_options(c)
        encoder = nn.TransformerEncoder(_paper_dropout(nn.TransformerEncoderLayer(**options)), c.N,
                                        norm=_final_norm(c), enable_nested_tensor=False)
        decoder = nn.TransformerDecoder(_paper_dropout(nn.TransformerDecoderLayer(**options)), c.N,
                                        norm=_final_norm(c))
        self.transformer = nn.Transformer(custom_encoder=encoder, custom_decoder=decoder, **options)
        self.output_projection = _output_projection(c, shared)

    def forward(self, src, tgt_in):
        src_padding = src == self.config.pad_id
        y = self.transformer(
            self.src_embed(src), self.tgt_embed(tgt_in),
            tgt_mask=causal_mask(tgt_in.shape[1], tgt_in.device),
            src_key_padding_mask=src_padding,
            tgt_key_padding_mask=tgt_in == self.config.pad_id,
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
        self.embed = TorchInputEmbedding(c.vocab_size, c.d_model, c.max_len, c.dropout)
        layer = _paper_dropout(nn.TransformerEncoderLayer(**_layer_options(c)))
        self.decoder = nn.TransformerEncoder(
            layer, c.N, norm=_final_norm(c), enable_nested_tensor=False
        )
        tied = self.embed.embedding if c.tie_embeddings else None
        self.output_projection = _output_projection(c, tied)

    def forward(self, ids):
        y = self.decoder(self.embed(ids), mask=causal_mask(ids.shape[1], ids.device),
                         src_key_padding_mask=ids == self.config.pad_id)
        return self.output_projection(y)

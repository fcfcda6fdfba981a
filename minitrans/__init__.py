"""minitrans: the Transformer of "Attention Is All You Need", in NumPy, with
every gradient written by hand, running unchanged on a GPU through CuPy."""

from minitrans.backend import (
    BackendUnavailableError,
    from_host,
    get_dtype,
    get_xp,
    set_dtype,
    to_device,
    to_numpy,
    use,
    using,
)
from minitrans.attention import ScaledDotProductAttention
from minitrans.config import ModelConfig
from minitrans.decoder import Decoder, DecoderLayer
from minitrans.encoder import Encoder, EncoderLayer
from minitrans.input_embedding import InputEmbedding
from minitrans.language_model import DecoderOnlyLM
from minitrans.optim import SGD, Adam, clip_grad_norm, transformer_lr
from minitrans.projection import OutputProjection
from minitrans.transformer import Transformer
from minitrans.dropout import Dropout
from minitrans.embedding import Embedding
from minitrans.feedforward import FeedForward
from minitrans.gradcheck import check_layer
from minitrans.layernorm import LayerNorm
from minitrans.linear import Linear
from minitrans.loss import LabelSmoothedCrossEntropy, LogSoftmax
from minitrans.masks import causal_mask, decoder_mask, padding_mask
from minitrans.module import Module
from minitrans.multihead import MultiHeadAttention
from minitrans.positional import PositionalEncoding, sinusoidal_table
from minitrans.sublayer import SublayerConnection

__version__ = "0.1.0"

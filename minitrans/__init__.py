"""minitrans: the Transformer of "Attention Is All You Need", in NumPy, with
every gradient written by hand, running unchanged on a GPU through CuPy.

The subpackages follow the data's path through Figure 1, each importing only
from those listed before it:

    core      which array library runs; clear errors for bad input
    ops       softmax, sums, masks: array operations the layers share
    layers    one layer of Figure 1 per module, forward and backward
    model     the encoder, the decoder, the Transformer, the language model
    data      vocabulary, tokenisers, batches, the toy and real-language tasks
    decoding  greedy, beam search, sampling
    training  optimisers, data parallelism, the trainer, checkpoints
    gradcheck central differences against every hand-written backward
    interop   the same model in PyTorch
    cli       the ``minitrans`` command, one module per command

The course's kit (exercise checkers, diagrams, interactive figures) is the
package ``minitrans_course``, beside this one: it imports minitrans, and
minitrans never imports it.
"""

from minitrans.core.backend import (
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
from minitrans.layers.attention import ScaledDotProductAttention
from minitrans.layers.dropout import Dropout
from minitrans.layers.embedding import Embedding
from minitrans.layers.feedforward import FeedForward
from minitrans.layers.layernorm import LayerNorm
from minitrans.layers.linear import Linear
from minitrans.layers.loss import LabelSmoothedCrossEntropy, LogSoftmax
from minitrans.layers.module import Module
from minitrans.layers.multihead import MultiHeadAttention
from minitrans.layers.positional import PositionalEmbedding, PositionalEncoding, sinusoidal_table
from minitrans.layers.projection import OutputProjection
from minitrans.layers.recurrent import RecurrentLayer
from minitrans.layers.rmsnorm import RMSNorm
from minitrans.layers.rotary import RotaryEmbedding
from minitrans.layers.swiglu import SwiGLUFeedForward
from minitrans.layers.add_norm import AddNorm
from minitrans.model.config import ModelConfig
from minitrans.model.decoder import Decoder, DecoderLayer
from minitrans.model.encoder import Encoder, EncoderLayer
from minitrans.model.input_embedding import InputEmbedding
from minitrans.model.language_model import DecoderOnlyLM
from minitrans.model.transformer import Transformer
from minitrans.ops.masks import causal_mask, decoder_mask, padding_mask
from minitrans.gradcheck import check_layer
from minitrans.training.optimisation.clipping import clip_grad_norm
from minitrans.training.optimisation.adam import Adam
from minitrans.training.optimisation.sgd import SGD
from minitrans.training.optimisation.schedule import transformer_lr

__version__ = "0.3.0"

"""The bottom of Figure 1: token embedding + positional encoding + dropout."""

from minitrans.core import backend, checks
from minitrans.layers.dropout import Dropout
from minitrans.layers.embedding import Embedding
from minitrans.layers.module import Module
from minitrans.layers.positional import POSITIONS, PositionalEmbedding, PositionalEncoding


class InputEmbedding(Module):
    """x = Dropout(Embedding(ids) * sqrt(d_model) + PE)   (paper §3.4, §3.5, §5.4)

    ``positions="learned"`` adds a learned table instead of the sinusoids
    (``PositionalEmbedding``, Table 3 row E; GPT-2's choice).
    ``positions="rope"`` adds nothing: rotary positions are applied inside
    each self-attention (``layers.rotary``), and ``positional`` is None.
    ``scale=False`` leaves out the factor sqrt(d_model), as GPT-2 and Llama do.

    Backward runs the three in reverse; the ids get no gradient, so it returns
    None, and the embedding table receives the gradient.

    Inputs:
        ids:    (B, T) token ids
        offset: position of ids[:, 0], for decoding one token at a time
    Returns:
        x: (B, T, d_model)
    """

    def __init__(self, vocab_size, d_model, max_len, dropout=0.1, shared_with=None, rng=None,
                 positions="sinusoidal", scale=True):
        super().__init__()
        checks.check_choice("positions", positions, POSITIONS)
        checks.check_bool("scale", scale)
        rng = backend.host_rng(rng)
        self.embedding = Embedding(vocab_size, d_model, scale=scale, rng=rng,
                                   shared_with=shared_with)
        self.positional = None  # rope: the positions are rotations inside attention
        if positions == "learned":
            self.positional = PositionalEmbedding(d_model, max_len, rng=rng)
        elif positions == "sinusoidal":
            self.positional = PositionalEncoding(d_model, max_len)
        self.dropout = Dropout(dropout, rng=rng)

    def forward(self, ids, offset=0):
        if self.positional is None:
            x = self.embedding.forward(ids)
        elif backend.on_device():  # the scale rides with the positions' add: one kernel
            x = self.positional.forward(self.embedding.rows(ids), offset=offset,
                                        x_scale=self.embedding.scale)
        else:
            x = self.positional.forward(self.embedding.forward(ids), offset=offset)
        return self.dropout.forward(x)

    def backward(self, dx):
        dx = self.dropout.backward(dx)
        if self.positional is not None:
            dx = self.positional.backward(dx)
        return self.embedding.backward(dx)

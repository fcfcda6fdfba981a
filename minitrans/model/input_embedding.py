"""The bottom of Figure 1: token embedding + positional encoding + dropout."""

from minitrans.core import backend
from minitrans.layers.dropout import Dropout
from minitrans.layers.embedding import Embedding
from minitrans.layers.module import Module
from minitrans.layers.positional import PositionalEmbedding, PositionalEncoding


class InputEmbedding(Module):
    """x = Dropout(Embedding(ids) * sqrt(d_model) + PE)   (paper §3.4, §3.5, §5.4)

    ``positions="learned"`` adds a learned table instead of the sinusoids
    (``PositionalEmbedding``, Table 3 row E; GPT-2's choice).

    Backward runs the three in reverse; the ids get no gradient, so it returns
    None, and the embedding table receives the gradient.

    Inputs:
        ids:    (B, T) token ids
        offset: position of ids[:, 0], for decoding one token at a time
    Returns:
        x: (B, T, d_model)
    """

    def __init__(self, vocab_size, d_model, max_len, dropout=0.1, shared_with=None, rng=None,
                 positions="sinusoidal"):
        super().__init__()
        rng = backend.host_rng(rng)
        self.embedding = Embedding(vocab_size, d_model, rng=rng, shared_with=shared_with)
        if positions == "learned":
            self.positional = PositionalEmbedding(d_model, max_len, rng=rng)
        else:
            self.positional = PositionalEncoding(d_model, max_len)
        self.dropout = Dropout(dropout, rng=rng)

    def forward(self, ids, offset=0):
        return self.dropout.forward(
            self.positional.forward(self.embedding.forward(ids), offset=offset)
        )

    def backward(self, dx):
        return self.embedding.backward(self.positional.backward(self.dropout.backward(dx)))

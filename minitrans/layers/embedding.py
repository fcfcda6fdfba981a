"""Token embeddings: a trainable lookup table, scaled by sqrt(d_model)."""

import math

from minitrans.core import backend, checks
from minitrans.layers import init
from minitrans.layers.module import Module

# Up to this vocabulary size the backward is a one-hot matrix product; above
# it, a scatter-add (the crossing point is measured in benchmarks/README.md).
ONE_HOT_VOCAB = 64


class Embedding(Module):
    """Maps each token id to a learned vector of size d_model (paper §3.4).

    Forward:   y[b, t] = W_E[ids[b, t]] * sqrt(d_model)
    Backward:  dW_E[v] += sqrt(d_model) * sum of dy[b, t] over all (b, t)
               with ids[b, t] == v

    The backward is a scatter-add: a token that appears several times in the
    batch receives the sum of the gradients of all its positions. Token ids are
    integers, so ``backward`` returns ``None`` (there is nothing to
    differentiate with respect to them).

    ``W_E`` starts as N(0, 1/d_model), so that after the sqrt(d_model) scale
    the embeddings have unit variance, like the positional encodings they are
    added to.

    ``shared_with=other`` makes this layer read ``other``'s table instead of
    owning one (paper §3.4: source and target embeddings share weights). It
    then has no parameters of its own, and its backward adds into
    ``other.grads["W_E"]``, so the shared table gets the sum of both uses.

    Parameters:
        W_E: (vocab_size, d_model)

    Inputs:
        ids: integer array (...), for example (B, T), values in [0, vocab_size)
    Returns:
        y: (..., d_model)
    """

    def __init__(self, vocab_size, d_model, scale=True, rng=None, shared_with=None):
        super().__init__()
        checks.check_positive_int("vocab_size", vocab_size)
        checks.check_positive_int("d_model", d_model)
        self.vocab_size, self.d_model = vocab_size, d_model
        self.scale = math.sqrt(d_model) if scale else 1.0
        if shared_with is None:
            rng = backend.host_rng(rng)
            self.add_param("W_E", init.normal(rng, (vocab_size, d_model), d_model**-0.5))
            self._owner = self
        else:
            _check_can_share(shared_with, vocab_size, d_model)
            self._owner = shared_with  # underscore: not a child, counted once

    @property
    def owner(self):
        """The Embedding that owns the table: this one, or the one shared with."""
        return self._owner

    @property
    def W_E(self):
        """The (vocab_size, d_model) table, wherever it is owned."""
        return self._owner.params["W_E"]

    def forward(self, ids):
        checks.check_token_ids("ids", ids, self.vocab_size)
        self.cache = ids
        return self.W_E[ids] * self.scale

    def backward(self, dy):
        ids = self.saved()
        checks.check_same_shape("dy", dy, (*ids.shape, self.d_model))
        xp = backend.get_xp()
        rows = dy.reshape(-1, self.d_model) * self.scale  # (N, d_model)
        flat_ids = ids.reshape(-1)
        grad = self._owner.grads["W_E"]
        if self.vocab_size <= ONE_HOT_VOCAB:
            # the same scatter-add as a product: one_hot^T (V, N) @ rows (N, d).
            # For a small vocabulary that is far faster than add.at, which
            # adds row by row (1 ms against 8 for the copy task's 11 tokens).
            one_hot = (flat_ids[:, None] == xp.arange(self.vocab_size)).astype(rows.dtype)
            grad += one_hot.T @ rows
        else:
            add_rows_at(grad, flat_ids, rows)  # repeated ids add up
        return None


def add_rows_at(table, row_ids, rows):
    """table[row_ids[i]] += rows[i] for every i, the rows of a repeated id
    adding up: ``xp.add.at(table, row_ids, rows)``, done on the flat table.

    Each row becomes d_model single numbers, number j of row i going to
    element row_ids[i] * d_model + j of the flattened table. ``add.at`` with
    one index per number runs a tight loop, where with one index per row it
    goes through a general path row by row: 1.8 ms against 10 ms for 2048
    rows of 256 (benchmarks/README.md). The sums are the same, bit for bit.
    """
    xp, width = backend.get_xp(), table.shape[1]
    if not table.flags.c_contiguous:  # reshape(-1) would copy, and the sums be lost
        raise ValueError("table: expected a C-contiguous array, got a strided view")
    element_ids = (row_ids[:, None] * width + xp.arange(width)).reshape(-1)
    xp.add.at(table.reshape(-1), element_ids, rows.reshape(-1))


def _check_can_share(owner, vocab_size, d_model):
    if not isinstance(owner, Embedding) or "W_E" not in owner.params:
        raise TypeError(f"shared_with: expected an Embedding that owns its table, got {owner!r}")
    if (owner.vocab_size, owner.d_model) != (vocab_size, d_model):
        raise ValueError(
            f"shared_with: expected a table of shape ({vocab_size}, {d_model}), "
            f"got ({owner.vocab_size}, {owner.d_model})"
        )

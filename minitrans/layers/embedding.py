"""Token embeddings: a trainable lookup table, scaled by sqrt(d_model)."""

import math

from minitrans.core import backend, checks, kernels, products
from minitrans.layers import init
from minitrans.layers.module import Module

# Up to this vocabulary size the backward is a one-hot matrix product; above
# it, a scatter-add: the product's cost grows with the vocabulary, the
# scatter-add's does not (``python benchmarks/kernels.py`` times both at
# this size; benchmarks/results/kernels/).
ONE_HOT_VOCAB = 64
# (backend, vocabulary size, dtype, scale) -> scale * I, the rows the device
# version picks as its one-hot matrix: made once, at most ONE_HOT_VOCAB^2 numbers
_scaled_identities = {}


class Embedding(Module):
    """Maps each token id to a learned vector of size d_model (paper §3.4).

    Forward:   y[b, t] = W_E[ids[b, t]] * sqrt(d_model)
    Backward:  dW_E[v] += sqrt(d_model) * sum of dy[b, t] over all (b, t)
               with ids[b, t] == v

    The backward is a scatter-add, scaled (the kernel pair ``add_rows_at``):
    a token that appears several times in the batch receives the sum of the
    gradients of all its positions. Token ids are integers, so ``backward``
    returns ``None`` (there is nothing to differentiate with respect to them).

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
        return self.rows(ids) * self.scale

    def rows(self, ids):
        """W_E[ids], not yet scaled: the forward without its last step, for a
        caller that applies ``scale`` in a kernel of its own (``InputEmbedding``
        on a device adds the positions in that same kernel). ``backward``
        then takes, as ever, the gradient of the scaled rows."""
        checks.check_token_ids("ids", ids, self.vocab_size)
        self.cache = ids
        return self.W_E[ids]

    def backward(self, dy):
        ids = self.saved()
        checks.check_same_shape("dy", dy, (*ids.shape, self.d_model))
        rows = dy.reshape(-1, self.d_model)  # (N, d_model)
        add_rows_at(self._owner.grads["W_E"], ids.reshape(-1), rows, self.scale)  # repeats add up
        return None


def add_rows_at_reference(table, row_ids, rows, scale=1.0):
    """table[row_ids[i]] += scale * rows[i] for every i, the rows of a
    repeated id adding up: NumPy's unbuffered scatter-add ``add.at``.

    Inputs:
        table: (V, d) C-contiguous, row_ids: (N,) ints in [0, V), rows: (N, d),
        scale: a number
    """
    backend.get_xp().add.at(table, row_ids, rows * scale)


def add_rows_at_fast(table, row_ids, rows, scale=1.0):
    """The same sums, two ways faster than ``add.at`` row by row. Up to
    ONE_HOT_VOCAB rows in the table, a product, one_hot^T (V, N) @ rows
    (N, d), which BLAS runs vectorised, where add.at goes one row at a time.
    Above it, add.at on the flat table, number j of row i going to element
    row_ids[i] * d + j, a tight loop where add.at with one index per row goes
    through a general path row by row, with the same sums bit for bit on
    NumPy (CuPy's add.at adds with atomics, in no fixed order). Timed
    against the reference by ``python benchmarks/kernels.py --kernels
    add_rows_at``: its tiny and copy configs take the product, small and base
    the flat add.at (benchmarks/results/kernels/).
    """
    xp, (vocab_size, width) = backend.get_xp(), table.shape
    rows = rows * scale
    if vocab_size <= ONE_HOT_VOCAB:
        one_hot = (row_ids[:, None] == xp.arange(vocab_size)).astype(rows.dtype)  # (N, V)
        table += one_hot.T @ rows
        return
    if not table.flags.c_contiguous:  # reshape(-1) would copy, and the sums be lost
        raise ValueError("table: expected a C-contiguous array, got a strided view")
    element_ids = (row_ids[:, None] * width + xp.arange(width)).reshape(-1)
    xp.add.at(table.reshape(-1), element_ids, rows.reshape(-1))


def add_rows_at_device(table, row_ids, rows, scale=1.0):
    """The same sums in two launches on a device. Up to ONE_HOT_VOCAB rows
    in the table, the one-hot product of the fast version with the scale in
    the one-hot matrix: its rows are picked from scale * I (one gather),
    and the product adds into the table (one gemm, ``core.products``).
    Above it, the scaled rows and the reference's ``add.at``, which CuPy
    runs as one kernel (adding with atomics, in no fixed order)."""
    vocab_size = table.shape[0]
    if vocab_size > ONE_HOT_VOCAB:
        add_rows_at_reference(table, row_ids, rows, scale)
        return
    one_hot = _scaled_identity(vocab_size, rows.dtype, scale)[row_ids]  # (N, V)
    products.add_product(table, one_hot.T, rows)  # table += scale * one_hot^T rows


def _scaled_identity(size, dtype, scale):
    """scale * I, (size, size), made once for each size, dtype and scale."""
    key = (backend.backend_name(), size, dtype.str, scale)
    if key not in _scaled_identities:
        _scaled_identities[key] = backend.get_xp().eye(size, dtype=dtype) * scale
    return _scaled_identities[key]


add_rows_at = kernels.pair(add_rows_at_reference, add_rows_at_fast, device=add_rows_at_device)


def _check_can_share(owner, vocab_size, d_model):
    if not isinstance(owner, Embedding) or "W_E" not in owner.params:
        raise TypeError(f"shared_with: expected an Embedding that owns its table, got {owner!r}")
    if (owner.vocab_size, owner.d_model) != (vocab_size, d_model):
        raise ValueError(
            f"shared_with: expected a table of shape ({vocab_size}, {d_model}), "
            f"got ({owner.vocab_size}, {owner.d_model})"
        )

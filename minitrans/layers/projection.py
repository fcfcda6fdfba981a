"""The pre-softmax projection from d_model to the vocabulary (paper §3.4)."""

from minitrans.core import backend, checks
from minitrans.layers import init
from minitrans.layers.embedding import Embedding
from minitrans.layers.module import Module
from minitrans.ops.sums import sum_leading


class OutputProjection(Module):
    """logits = y W + b, one score per vocabulary entry at each position.

    With ``tied_to=embedding`` the weight is the embedding table transposed,
    W = W_E^T (paper §3.4: "we share the same weight matrix between the two
    embedding layers and the pre-softmax linear transformation"). The tied
    layer owns only its bias; its weight gradient, dW_E += dlogits^T y, is
    added into the embedding's ``grads``, where it sums with the gradient of
    the lookups.

    Parameters:
        W: (d_model, vocab_size), absent when tied
        b: (vocab_size,)

    Inputs:
        y: (B, T, d_model)
    Returns:
        logits: (B, T, vocab_size)
    """

    def __init__(self, d_model, vocab_size, tied_to=None, rng=None):
        super().__init__()
        checks.check_positive_int("d_model", d_model)
        checks.check_positive_int("vocab_size", vocab_size)
        self.d_model, self.vocab_size = d_model, vocab_size
        if tied_to is None:
            self.add_param("W", init.xavier_uniform(backend.host_rng(rng), d_model, vocab_size))
        elif not isinstance(tied_to, Embedding) or (tied_to.vocab_size, tied_to.d_model) != (
            vocab_size,
            d_model,
        ):
            raise ValueError(
                f"tied_to: expected an Embedding of {vocab_size} x {d_model}, got {tied_to!r}"
            )
        self._tied_to = tied_to  # underscore: not a child, its table is counted once
        self.add_param("b", init.zeros((vocab_size,)))

    def _weight(self):
        if self._tied_to is None:
            return self.params["W"]  # (d_model, V)
        return self._tied_to.W_E.T  # (d_model, V), a view of the shared table

    def forward(self, y):
        checks.check_array("y", y, min_ndim=1, last_dim=self.d_model, dtype=self.params["b"].dtype)
        checks.check_finite("y", y)
        y_2d = y.reshape(-1, self.d_model)
        self.cache = (y_2d, y.shape)
        logits = y_2d @ self._weight()
        logits += self.params["b"]  # in place: no second (B*T, V) array
        return logits.reshape(*y.shape[:-1], self.vocab_size)

    def backward(self, dlogits):
        y_2d, y_shape = self.saved()
        checks.check_same_shape("dlogits", dlogits, (*y_shape[:-1], self.vocab_size))
        dlogits_2d = dlogits.reshape(-1, self.vocab_size)
        if self._tied_to is None:
            self.grads["W"] += y_2d.T @ dlogits_2d
        else:
            self._tied_to.owner.grads["W_E"] += dlogits_2d.T @ y_2d  # (V, d_model)
        self.grads["b"] += sum_leading(dlogits_2d)  # dlogits_2d.sum(axis=0), see minitrans.ops.sums
        return (dlogits_2d @ self._weight().T).reshape(y_shape)

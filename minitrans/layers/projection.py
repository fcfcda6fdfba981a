"""The pre-softmax projection from d_model to the vocabulary (paper §3.4)."""

from minitrans.core import backend, checks
from minitrans.layers import init
from minitrans.layers.embedding import Embedding
from minitrans.layers.linear import add_affine_grads, affine_forward
from minitrans.layers.module import Module


class OutputProjection(Module):
    """logits = y W + b, one score per vocabulary entry at each position.

    A linear layer, computed by the same ``affine_forward`` and
    ``add_affine_grads`` as ``Linear``. It is not a ``Linear`` child because
    its weight may be borrowed: with ``tied_to=embedding`` the weight is the
    embedding table transposed, W = W_E^T (paper §3.4: "we share the same
    weight matrix between the two embedding layers and the pre-softmax linear
    transformation"). The tied layer owns only its bias; its weight gradient,
    dW_E += dW^T = dlogits^T y, is added into the embedding's ``grads``,
    where it sums with the gradient of the lookups.

    ``bias=False`` leaves out b, as GPT-2 and Llama do.

    Parameters:
        W: (d_model, vocab_size), absent when tied
        b: (vocab_size,), absent with ``bias=False``

    Inputs:
        y: (B, T, d_model)
    Returns:
        logits: (B, T, vocab_size)
    """

    def __init__(self, d_model, vocab_size, tied_to=None, rng=None, bias=True):
        super().__init__()
        checks.check_positive_int("d_model", d_model)
        checks.check_positive_int("vocab_size", vocab_size)
        checks.check_bool("bias", bias)
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
        if bias:
            self.add_param("b", init.zeros((vocab_size,)))

    @property
    def W(self):
        """The (d_model, vocab_size) weight: its own, or W_E^T (a view of the
        shared table)."""
        return self.params["W"] if self._tied_to is None else self._tied_to.W_E.T

    def forward(self, y):
        checks.check_array("y", y, min_ndim=1, last_dim=self.d_model, dtype=self.W.dtype)
        checks.check_finite("y", y)
        y_2d = y.reshape(-1, self.d_model)  # (N, d_model)
        self.cache = (y_2d, y.shape)
        logits = affine_forward(y_2d, self.W, self.params.get("b"))  # (N, V)
        return logits.reshape(*y.shape[:-1], self.vocab_size)

    def backward(self, dlogits):
        y_2d, y_shape = self.saved()
        checks.check_same_shape("dlogits", dlogits, (*y_shape[:-1], self.vocab_size))
        dlogits_2d = dlogits.reshape(-1, self.vocab_size)
        if self._tied_to is None:
            grad_W = self.grads["W"]
        else:  # W = W_E^T, so dW adds into dW_E^T, a view of the embedding's gradient
            grad_W = self._tied_to.owner.grads["W_E"].T
        add_affine_grads(grad_W, self.grads.get("b"), y_2d, dlogits_2d)  # dW, db
        return (dlogits_2d @ self.W.T).reshape(y_shape)  # dy = dlogits W^T

"""The fully connected layer y = xW + b: the one place the affine map is written.

Every layer that projects is built from it: the feed-forward network (two
``Linear``), multi-head attention (``W_Q``, ``W_K``, ``W_V``, ``W_O``) and the
output projection (through ``affine_forward`` and ``affine_backward``, because
its tied weight belongs to the embedding).
"""

from minitrans.core import backend, checks
from minitrans.layers import init
from minitrans.layers.module import Module
from minitrans.ops.sums import sum_leading


def affine_forward(x_2d, W, b=None):
    """y = x W + b for a matrix of rows x (N, d_in), W (d_in, d_out), b (d_out,)
    or None: y (N, d_out)."""
    y = x_2d @ W
    if b is not None:
        y += b  # in place: y is a fresh array
    return y


def affine_backward(x_2d, W, dy_2d, bias=True):
    """The gradients of y = x W + b, given dy (N, d_out):

        dx = dy W^T,   dW = x^T dy,   db = sum over rows of dy

    Returns (dx, dW, db) as new arrays; db is None when ``bias`` is False.
    """
    dW = x_2d.T @ dy_2d  # (d_in, d_out)
    db = sum_leading(dy_2d) if bias else None  # (d_out,)
    return dy_2d @ W.T, dW, db


class Linear(Module):
    """An affine map applied to the last axis of its input.

    Forward:   y = x W + b
    Backward:  dx = dy W^T,   dW += x^T dy,   db += sum over rows of dy

    The leading axes are flattened first, so that ``(B, T, d_in)`` becomes one
    ``(B*T, d_in)`` matrix and the work is a single matrix product.

    Parameters (Xavier-uniform ``W``, zero ``b``):
        W: (d_in, d_out)
        b: (d_out,)      absent when ``bias=False``

    Inputs:
        x: (..., d_in)
    Returns:
        y: (..., d_out)
    """

    def __init__(self, d_in, d_out, bias=True, rng=None):
        super().__init__()
        checks.check_positive_int("d_in", d_in)
        checks.check_positive_int("d_out", d_out)
        self.d_in, self.d_out = d_in, d_out
        rng = backend.host_rng(rng)
        self.add_param("W", init.xavier_uniform(rng, d_in, d_out))
        if bias:
            self.add_param("b", init.zeros((d_out,)))

    def forward(self, x, add_bias=True):
        """y = x W + b; ``add_bias=False``: x W alone, for a caller that adds
        ``self.params["b"]`` itself, in one kernel with what follows (the
        feed-forward's activation). The backward is the same either way."""
        checks.check_array("x", x, min_ndim=1, last_dim=self.d_in, dtype=self.params["W"].dtype)
        checks.check_finite("x", x)
        x_2d = x.reshape(-1, self.d_in)  # (N, d_in), N = product of leading axes
        b = self.params.get("b") if add_bias else None
        y = affine_forward(x_2d, self.params["W"], b)  # (N, d_out)
        self.cache = (x_2d, x.shape)
        return y.reshape(*x.shape[:-1], self.d_out)

    def backward(self, dy):
        x_2d, x_shape = self.saved()
        checks.check_same_shape("dy", dy, (*x_shape[:-1], self.d_out))
        dy_2d = dy.reshape(-1, self.d_out)
        dx, dW, db = affine_backward(x_2d, self.params["W"], dy_2d, bias="b" in self.params)
        self.grads["W"] += dW
        if db is not None:
            self.grads["b"] += db
        return dx.reshape(x_shape)

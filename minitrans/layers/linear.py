"""The fully connected layer y = xW + b."""

from minitrans.core import backend, checks
from minitrans.layers import init
from minitrans.layers.module import Module
from minitrans.ops.sums import sum_leading


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

    def forward(self, x):
        checks.check_array("x", x, min_ndim=1, last_dim=self.d_in, dtype=self.params["W"].dtype)
        checks.check_finite("x", x)
        x_2d = x.reshape(-1, self.d_in)  # (N, d_in), N = product of leading axes
        y = x_2d @ self.params["W"]
        if "b" in self.params:
            y += self.params["b"]  # in place: y is a fresh array
        self.cache = (x_2d, x.shape)
        return y.reshape(*x.shape[:-1], self.d_out)

    def backward(self, dy):
        x_2d, x_shape = self.saved()
        checks.check_same_shape("dy", dy, (*x_shape[:-1], self.d_out))
        dy_2d = dy.reshape(-1, self.d_out)
        self.grads["W"] += x_2d.T @ dy_2d
        if "b" in self.params:
            self.grads["b"] += sum_leading(dy_2d)  # dy_2d.sum(axis=0), see minitrans.ops.sums
        return (dy_2d @ self.params["W"].T).reshape(x_shape)

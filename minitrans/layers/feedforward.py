"""The position-wise feed-forward network (paper §3.3)."""

from minitrans.core import backend, checks
from minitrans.layers import init
from minitrans.layers.module import Module
from minitrans.ops.sums import sum_leading


class FeedForward(Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, applied to each position alone.

    Two linear maps with a ReLU between them: d_model -> d_ff -> d_model
    (the paper uses d_ff = 2048 = 4 * 512).

    Backward, with a = x W_1 + b_1 and r = max(0, a):
        dW_2 += r^T dy,   db_2 += sum of dy,   dr = dy W_2^T
        da = dr * [a > 0]
        dW_1 += x^T da,   db_1 += sum of da,   dx = da W_1^T

    Parameters (Xavier-uniform weights, zero biases):
        W_1: (d_model, d_ff),  b_1: (d_ff,)
        W_2: (d_ff, d_model),  b_2: (d_model,)

    Inputs:
        x: (..., d_model)
    Returns:
        y: (..., d_model)
    """

    def __init__(self, d_model, d_ff, rng=None):
        super().__init__()
        checks.check_positive_int("d_model", d_model)
        checks.check_positive_int("d_ff", d_ff)
        self.d_model, self.d_ff = d_model, d_ff
        rng = backend.host_rng(rng)
        self.add_param("W_1", init.xavier_uniform(rng, d_model, d_ff))
        self.add_param("b_1", init.zeros((d_ff,)))
        self.add_param("W_2", init.xavier_uniform(rng, d_ff, d_model))
        self.add_param("b_2", init.zeros((d_model,)))

    def forward(self, x):
        checks.check_array(
            "x", x, min_ndim=1, last_dim=self.d_model, dtype=self.params["W_1"].dtype
        )
        checks.check_finite("x", x)
        xp = backend.get_xp()
        x_2d = x.reshape(-1, self.d_model)  # (N, d_model)
        hidden = x_2d @ self.params["W_1"]  # (N, d_ff)
        hidden += self.params["b_1"]
        xp.maximum(hidden, 0.0, out=hidden)  # ReLU, in place: one (N, d_ff) array, not three
        y = hidden @ self.params["W_2"]
        y += self.params["b_2"]
        self.cache = (x_2d, hidden, x.shape)
        return y.reshape(x.shape)

    def backward(self, dy):
        x_2d, hidden, x_shape = self.saved()
        checks.check_same_shape("dy", dy, x_shape)
        dy_2d = dy.reshape(-1, self.d_model)
        self.grads["W_2"] += hidden.T @ dy_2d
        self.grads["b_2"] += sum_leading(dy_2d)  # dy_2d.sum(axis=0), see minitrans.ops.sums
        # ReLU passes the gradient where its output is positive (a > 0 <=> r > 0).
        dpre = dy_2d @ self.params["W_2"].T
        dpre *= hidden > 0
        self.grads["W_1"] += x_2d.T @ dpre
        self.grads["b_1"] += sum_leading(dpre)
        return (dpre @ self.params["W_1"].T).reshape(x_shape)

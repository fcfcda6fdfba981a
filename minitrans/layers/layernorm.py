"""Layer normalisation over the feature axis (Ba, Kiros and Hinton, 2016)."""

from minitrans.core import checks
from minitrans.layers import init
from minitrans.layers.module import Module
from minitrans.ops.sums import dot_last, dot_leading, mean_last, sum_leading


class LayerNorm(Module):
    """Normalises each position's d_model features, then scales and shifts.

    Forward:
        mu = mean(x),  var = mean((x - mu)^2)          over the last axis
        x_hat = (x - mu) / sqrt(var + eps)
        y = gamma * x_hat + beta
    Backward (D = d_model features, means over the last axis):
        dgamma += sum over positions of dy * x_hat,   dbeta += sum of dy
        dx_hat = dy * gamma
        dx = (dx_hat - mean(dx_hat) - x_hat * mean(dx_hat * x_hat)) / sqrt(var + eps)

    Unlike batch norm, the statistics are per position, so the layer behaves
    the same in training and evaluation and for any batch size.

    Parameters:
        gamma: (d_model,) starts at 1
        beta:  (d_model,) starts at 0

    Inputs:
        x: (..., d_model)
    Returns:
        y: (..., d_model)
    """

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        checks.check_positive_int("d_model", d_model)
        if not eps > 0:
            raise ValueError(f"eps: expected a positive number, got {eps!r}")
        self.d_model, self.eps = d_model, float(eps)
        self.add_param("gamma", init.ones((d_model,)))
        self.add_param("beta", init.zeros((d_model,)))

    def forward(self, x):
        checks.check_array(
            "x", x, min_ndim=1, last_dim=self.d_model, dtype=self.params["gamma"].dtype
        )
        checks.check_finite("x", x)
        mu = mean_last(x)  # x.mean(axis=-1, keepdims=True), see minitrans.ops.sums
        x_hat = x - mu  # centred for now; normalised in place below
        # var = mean(x_hat^2): each row's dot product with itself, with no
        # (..., D) array of squares
        var = dot_last(x_hat, x_hat) * (1.0 / self.d_model)
        inv_std = 1.0 / (var + self.eps) ** 0.5
        x_hat *= inv_std
        self.cache = (x_hat, inv_std)
        y = x_hat * self.params["gamma"]
        y += self.params["beta"]
        return y

    def backward(self, dy):
        x_hat, inv_std = self.saved()
        checks.check_same_shape("dy", dy, x_hat.shape)
        gamma = self.params["gamma"]
        self.grads["gamma"] += dot_leading(dy, x_hat)  # sum over positions of dy * x_hat
        self.grads["beta"] += sum_leading(dy)
        # dx = (dx_hat - mean(dx_hat) - x_hat * mean(dx_hat * x_hat)) * inv_std,
        # with dx_hat = dy * gamma; both means per row, see minitrans.ops.sums
        dx = dy * gamma  # dx_hat for now, dx in place below
        mean_dx_hat = mean_last(dx)
        mean_dx_hat_x_hat = dot_last(dx, x_hat) * (1.0 / self.d_model)
        correction = x_hat * mean_dx_hat_x_hat
        correction += mean_dx_hat
        dx -= correction
        dx *= inv_std
        return dx

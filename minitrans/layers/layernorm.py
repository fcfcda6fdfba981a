"""Layer normalisation over the feature axis (Ba, Kiros and Hinton, 2016)."""

from minitrans.core import backend, checks, fusion, kernels
from minitrans.layers import init
from minitrans.layers.module import Module
from minitrans.ops.sums import dot_last_fast, dot_leading_fast, mean_last_fast, sum_leading_fast


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

    Forward and backward are kernel pairs (``minitrans.core.kernels``):
    ``layer_norm_reference`` and ``layer_norm_backward_reference`` below
    read as these equations, the ``_fast`` versions beside them compute the
    same numbers with fewer arrays, and the ``_device`` versions fuse their
    element-wise work into a few kernels for a GPU. All keep the cache (x_hat, 1 / sqrt(var + eps)).
    ``x`` and ``dy`` reach them C-contiguous, so that the same numbers give
    the same bits whatever their memory layout (``forward`` says why).

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
        checks.check_number("eps", eps, low=0, low_open=True)
        self.d_model, self.eps = d_model, float(eps)
        self.add_param("gamma", init.ones((d_model,)))
        self.add_param("beta", init.zeros((d_model,)))

    def forward(self, x):
        checks.check_array(
            "x", x, min_ndim=1, last_dim=self.d_model, dtype=self.params["gamma"].dtype
        )
        checks.check_finite("x", x)
        # A sum over an axis is added up in an order that depends on the
        # layout: NumPy sums pairwise only along a contiguous axis, BLAS and
        # einsum choose their loops by the strides. A strided view (x[:, ::2])
        # or a Fortran-order array would give other last bits than the same
        # numbers in rows; copied into rows (no copy when they already are),
        # every layout gives the same result.
        x = backend.get_xp().ascontiguousarray(x)
        y, self.cache = layer_norm(x, self.params["gamma"], self.params["beta"], self.eps)
        return y

    def backward(self, dy):
        x_hat, inv_std = self.saved()
        checks.check_same_shape("dy", dy, x_hat.shape)
        dy = backend.get_xp().ascontiguousarray(dy)  # as x in forward: the same bits for any layout
        dx, dgamma, dbeta = layer_norm_backward(dy, self.params["gamma"], x_hat, inv_std)
        self.grads["gamma"] += dgamma
        self.grads["beta"] += dbeta
        return dx


def layer_norm_reference(x, gamma, beta, eps):
    """y = gamma * x_hat + beta, and the cache (x_hat, 1 / sqrt(var + eps))."""
    mu = x.mean(axis=-1, keepdims=True)  # (..., 1)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)  # (..., 1)
    std = (var + eps) ** 0.5
    x_hat = (x - mu) / std  # (..., D)
    return gamma * x_hat + beta, (x_hat, 1.0 / std)


def layer_norm_fast(x, gamma, beta, eps):
    """The reference's numbers, in two (..., D) arrays instead of six: x_hat
    is centred and normalised in place, and the sums over the last axis are
    matrix products (minitrans.ops.sums), the variance a dot product of each
    row with itself, with no array of squares. Timed against the reference
    by ``python benchmarks/kernels.py``."""
    mu = mean_last_fast(x)
    x_hat = x - mu  # centred for now; normalised in place below
    var = dot_last_fast(x_hat, x_hat) * (1.0 / x.shape[-1])
    inv_std = 1.0 / (var + eps) ** 0.5
    x_hat *= inv_std
    y = x_hat * gamma
    y += beta
    return y, (x_hat, inv_std)


def layer_norm_backward_reference(dy, gamma, x_hat, inv_std):
    """(dx, dgamma, dbeta), from the cache of the forward."""
    D = x_hat.shape[-1]
    dgamma = (dy * x_hat).reshape(-1, D).sum(axis=0)  # over every position
    dbeta = dy.reshape(-1, D).sum(axis=0)
    dx_hat = dy * gamma
    mean_dx_hat = dx_hat.mean(axis=-1, keepdims=True)
    mean_dx_hat_x_hat = (dx_hat * x_hat).mean(axis=-1, keepdims=True)
    dx = (dx_hat - mean_dx_hat - x_hat * mean_dx_hat_x_hat) * inv_std
    return dx, dgamma, dbeta


def layer_norm_backward_fast(dy, gamma, x_hat, inv_std):
    """The reference's numbers, with dx built in place in one (..., D) array
    and the sums as matrix products (minitrans.ops.sums). Timed against the
    reference by ``python benchmarks/kernels.py``."""
    dgamma = dot_leading_fast(dy, x_hat)
    dbeta = sum_leading_fast(dy)
    dx = dy * gamma  # dx_hat for now, dx in place below
    mean_dx_hat = mean_last_fast(dx)
    mean_dx_hat_x_hat = dot_last_fast(dx, x_hat) * (1.0 / x_hat.shape[-1])
    correction = x_hat * mean_dx_hat_x_hat
    correction += mean_dx_hat
    dx -= correction
    dx *= inv_std
    return dx, dgamma, dbeta


# ------------------------------------------- the device versions: fused kernels
# Each sum over an axis is one reduction kernel; the element-wise work between
# them is one fused kernel (minitrans.core.fusion): five launches forward and
# six backward, where the reference takes a dozen and more.


@fusion.fused("layer_norm_centred_squares")
def centred_squares(x, mu):
    """(x - mu)^2, whose mean over the last axis is the variance."""
    return (x - mu) * (x - mu)


@fusion.fused("layer_norm_inverse_std")
def inverse_std(var, eps):
    """1 / sqrt(var + eps), one number per position."""
    return 1.0 / backend.get_xp().sqrt(var + eps)


@fusion.fused("layer_norm_scale_shift")
def normalise_scale_shift(x, mu, inv_std, gamma, beta):
    """x_hat = (x - mu) / sqrt(var + eps),  y = gamma * x_hat + beta."""
    x_hat = (x - mu) * inv_std
    return gamma * x_hat + beta, x_hat


def layer_norm_device(x, gamma, beta, eps):
    """The reference's equations, as two means and three fused kernels."""
    mu = x.mean(axis=-1, keepdims=True)
    var = centred_squares(x, mu).mean(axis=-1, keepdims=True)
    inv_std = inverse_std(var, eps)
    y, x_hat = normalise_scale_shift(x, mu, inv_std, gamma, beta)
    return y, (x_hat, inv_std)


@fusion.fused("norm_backward_products")
def backward_products(dy, gamma, x_hat):
    """dx_hat = dy * gamma; dx_hat * x_hat, whose mean dx needs; dy * x_hat,
    whose sum over the positions is dgamma (RMSNorm's backward needs the same three)."""
    dx_hat = dy * gamma
    return dx_hat, dx_hat * x_hat, dy * x_hat


@fusion.fused("layer_norm_dx")
def layer_norm_dx(dx_hat, mean_dx_hat, x_hat, mean_dx_hat_x_hat, inv_std):
    """dx = (dx_hat - mean(dx_hat) - x_hat * mean(dx_hat * x_hat)) / sqrt(var + eps)."""
    return (dx_hat - mean_dx_hat - x_hat * mean_dx_hat_x_hat) * inv_std


def layer_norm_backward_device(dy, gamma, x_hat, inv_std):
    """The reference's equations, as two fused kernels and four reductions."""
    D = x_hat.shape[-1]
    dx_hat, dx_hat_x_hat, dy_x_hat = backward_products(dy, gamma, x_hat)
    dgamma = dy_x_hat.reshape(-1, D).sum(axis=0)
    dbeta = dy.reshape(-1, D).sum(axis=0)
    dx = layer_norm_dx(dx_hat, dx_hat.mean(axis=-1, keepdims=True), x_hat,
                       dx_hat_x_hat.mean(axis=-1, keepdims=True), inv_std)
    return dx, dgamma, dbeta


layer_norm = kernels.pair(layer_norm_reference, layer_norm_fast, device=layer_norm_device)
layer_norm_backward = kernels.pair(layer_norm_backward_reference, layer_norm_backward_fast,
                                   device=layer_norm_backward_device)

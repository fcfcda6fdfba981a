"""Root mean square layer normalisation (Zhang and Sennrich, 2019), the norm of
Llama and most language models after it."""

from minitrans.core import backend, checks, fusion, kernels
from minitrans.core.products import add_column_sums
from minitrans.layers import init
from minitrans.layers.layernorm import (
    NO_BIAS, add_into, mean_dx_hat_x_hat, sum_inputs, zeros_like,
)
from minitrans.layers.module import Module
from minitrans.ops.sums import dot_last_fast, dot_leading_fast


class RMSNorm(Module):
    """Divides each position's d_model features by their root mean square,
    then scales them by a learned gain g: LayerNorm without the centring and
    without the bias.

    Forward (D = d_model features, the mean over the last axis):
        rms = sqrt(mean(x^2) + eps)
        x_hat = x / rms
        y = g * x_hat
    Backward:
        dg += sum over positions of dy * x_hat
        dx_hat = dy * g
        dx = (dx_hat - x_hat * mean(dx_hat * x_hat)) / rms

    The backward's last line is the chain rule through x_hat_i = x_i / rms:
    d rms / d x_j = x_j / (D rms), so d x_hat_i / d x_j = (delta_ij -
    x_hat_i x_hat_j / D) / rms. LayerNorm's dx has one more term,
    -mean(dx_hat), from the mean it subtracts; RMSNorm subtracts none.

    Zhang and Sennrich kept LayerNorm's re-scaling and dropped its
    re-centring, which they found contributes little, for a cheaper layer:
    one statistic per position instead of two. Like LayerNorm it is per
    position, the same in training and evaluation and for any batch size;
    the paper's title calls it a layer normalisation, and inside ``AddNorm``
    it is the child ``layer_norm`` as LayerNorm is.

    Forward and backward are kernel pairs (``core.kernels``):
    ``rms_norm_reference`` and ``rms_norm_backward_reference`` below read as
    these equations; the ``_fast`` versions beside them take the sums as
    matrix products (``minitrans.ops.sums``) and build dx in one array;
    the ``_device`` versions fuse the element-wise work into a few kernels
    for a GPU (``minitrans.core.fusion``). ``forward_of_sum(x, residual)``
    is ``forward(x + residual)``, with the sum formed inside the two device
    kernels (``rms_norm_of_sum``), as ``LayerNorm.forward_of_sum``.

    Parameters:
        g: (d_model,) starts at 1

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
        self.add_param("g", init.ones((d_model,)))

    def forward(self, x):
        checks.check_array("x", x, min_ndim=1, last_dim=self.d_model, dtype=self.params["g"].dtype)
        checks.check_finite("x", x)
        # rows in memory, so that the mean's order of additions, and so its
        # last bits, do not depend on the layout (as in LayerNorm.forward)
        x = backend.get_xp().ascontiguousarray(x)
        y, self.cache = rms_norm(x, self.params["g"], self.eps)
        return y

    def forward_of_sum(self, x, residual, bias=None):
        """RMSNorm(x + residual), the post-norm residual connection's
        (``AddNorm``), or given ``bias`` RMSNorm(x + bias + residual), as
        ``LayerNorm.forward_of_sum``; the backward, from x_hat and 1 / rms,
        is ``backward``'s."""
        x, residual = sum_inputs(self.d_model, self.params["g"].dtype, x, residual, bias)
        y, self.cache = rms_norm_of_sum(x, residual, self.params["g"], self.eps, bias)
        return y

    def backward(self, dy):
        x_hat, inv_rms = self.saved()
        checks.check_same_shape("dy", dy, x_hat.shape)
        dy = backend.get_xp().ascontiguousarray(dy)  # as x in forward
        dx, _ = rms_norm_backward(dy, self.params["g"], x_hat, inv_rms, (self.grads["g"],))
        return dx


def rms_norm_reference(x, g, eps):
    """(y, (x_hat, inv_rms)): y = g * x / sqrt(mean(x^2) + eps)."""
    inv_rms = 1.0 / ((x * x).mean(axis=-1, keepdims=True) + eps) ** 0.5  # (..., 1)
    x_hat = x * inv_rms  # (..., D)
    return x_hat * g, (x_hat, inv_rms)


def rms_norm_fast(x, g, eps):
    """The reference's numbers with the mean of squares a dot product of
    each row with itself (no array of squares) and 1 / sqrt in place.
    Timed against the reference by ``python benchmarks/kernels.py``."""
    inv_rms = dot_last_fast(x, x)  # (..., 1): sum of squares, then 1 / rms in place
    inv_rms *= 1.0 / x.shape[-1]
    inv_rms += eps
    xp = backend.get_xp()
    xp.sqrt(inv_rms, out=inv_rms)
    xp.divide(1.0, inv_rms, out=inv_rms)
    x_hat = x * inv_rms
    return x_hat * g, (x_hat, inv_rms)


def rms_norm_backward_reference(dy, g, x_hat, inv_rms, grads=None):
    """(dx, dg), from the cache of the forward; given ``grads``, (the layer's
    dg array,), dg is added into it."""
    D = x_hat.shape[-1]
    dg = (dy * x_hat).reshape(-1, D).sum(axis=0)  # over every position
    dx_hat = dy * g
    mean_dx_hat_x_hat = (dx_hat * x_hat).mean(axis=-1, keepdims=True)  # (..., 1)
    return (dx_hat - x_hat * mean_dx_hat_x_hat) * inv_rms, *add_into(grads, dg)


def rms_norm_backward_fast(dy, g, x_hat, inv_rms, grads=None):
    """The reference's numbers, with dx built in place in one (..., D) array
    and the sums as matrix products (minitrans.ops.sums). Timed against the
    reference by ``python benchmarks/kernels.py``."""
    dg = dot_leading_fast(dy, x_hat)
    dx = dy * g  # dx_hat for now, dx in place below
    mean_dx_hat_x_hat = dot_last_fast(dx, x_hat) * (1.0 / x_hat.shape[-1])
    dx -= x_hat * mean_dx_hat_x_hat
    dx *= inv_rms
    return dx, *add_into(grads, dg)


# ------------------------------------------- the device versions: fused kernels
# The mean over the last axis is a fused reduction (minitrans.core.fusion),
# with the element-wise work around it in the same kernel: two launches
# forward; backward two and one more for dg, added into its array. The
# norm of a sum x + residual (x + bias + residual) is the same two, each
# adding the terms as it reads them, as LayerNorm's (NO_BIAS: see there).


@fusion.fused("rms_norm_inverse_rms")
def inverse_rms(x, eps, inv_d, residual=0.0, bias=NO_BIAS):
    """1 / rms, (...,): mean(x^2) + eps = sum of (x^2 + eps) / D (eps goes in
    before the sum: after it only the sum itself may take part). Given a
    residual (and a bias), of the sum x + bias + residual, added here as x is read."""
    xp = backend.get_xp()
    total = x + bias + residual
    return 1.0 / xp.sqrt(xp.sum((total * total + eps) * inv_d, axis=-1))


@fusion.fused("rms_norm_scale")
def normalise_scale(x, inv_rms, g, residual=0.0, bias=NO_BIAS):
    """x_hat = x / rms,  y = g * x_hat (x + bias + residual for x)."""
    x_hat = (x + bias + residual) * inv_rms
    return x_hat * g, x_hat


def rms_norm_device(x, g, eps):
    """The reference's equations in two kernels: 1 / rms (one reduction) and the scale."""
    inv_rms = inverse_rms(x, eps, 1.0 / x.shape[-1])[..., None]  # (..., 1), a view
    y, x_hat = normalise_scale(x, inv_rms, g)
    return y, (x_hat, inv_rms)


def rms_norm_of_sum_reference(x, residual, g, eps, bias=None):
    """RMSNorm(x + residual), or given ``bias`` RMSNorm(x + bias + residual):
    the sum, then the norm of the active set (the pair is its own fast
    version, as ``layernorm.layer_norm_of_sum``)."""
    return rms_norm(x + residual if bias is None else x + bias + residual, g, eps)


def rms_norm_of_sum_device(x, residual, g, eps, bias=None):
    """The two kernels of ``rms_norm_device``, each adding x + residual (x +
    bias + residual) as it reads x: the sum costs no launch and no array."""
    terms = (residual, NO_BIAS if bias is None else bias)
    inv_rms = inverse_rms(x, eps, 1.0 / x.shape[-1], *terms)[..., None]  # (..., 1), a view
    y, x_hat = normalise_scale(x, inv_rms, g, *terms)
    return y, (x_hat, inv_rms)


@fusion.fused("rms_norm_dx")
def rms_norm_dx(dy, g, x_hat, mean_dx_hat_x_hat, inv_rms):
    """dx = (dx_hat - x_hat * mean(dx_hat * x_hat)) / rms, dx_hat = dy * g; and
    dy * x_hat, whose sum over the positions is dg."""
    return (dy * g - x_hat * mean_dx_hat_x_hat) * inv_rms, dy * x_hat


def rms_norm_backward_device(dy, g, x_hat, inv_rms, grads=None):
    """The reference's equations as a fused row mean, one fused kernel for dx,
    and a column sum added into dg."""
    D = x_hat.shape[-1]
    dx, dy_x_hat = rms_norm_dx(dy, g, x_hat, mean_dx_hat_x_hat(dy, g, x_hat, 1.0 / D)[..., None],
                               inv_rms)
    (dg,) = grads if grads is not None else (zeros_like(g),)
    add_column_sums(dg, dy_x_hat.reshape(-1, D))
    return dx, dg


rms_norm = kernels.pair(rms_norm_reference, rms_norm_fast, device=rms_norm_device)
rms_norm_of_sum = kernels.pair(rms_norm_of_sum_reference, rms_norm_of_sum_reference,
                               device=rms_norm_of_sum_device)
rms_norm_backward = kernels.pair(rms_norm_backward_reference, rms_norm_backward_fast,
                                 device=rms_norm_backward_device)

"""Layer normalisation over the feature axis (Ba, Kiros and Hinton, 2016)."""

from minitrans.core import backend, checks, fusion, kernels
from minitrans.core.products import add_column_sums
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
    ``forward_of_sum(x, residual)`` is the norm of a residual connection's
    sum, ``forward(x + residual)`` (``layer_norm_of_sum`` below): on a device
    the sum is formed inside each of the three kernels and never stored.
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

    def forward_of_sum(self, x, residual, bias=None):
        """LayerNorm(x + residual), the post-norm residual connection's
        (``AddNorm``); given ``bias`` (d_model,), the last bias of a sub-layer
        that left it out, LayerNorm(x + bias + residual). The backward is
        ``backward``'s: it needs only x_hat and 1 / std, so the sum itself
        is never kept."""
        dtype = self.params["gamma"].dtype
        x, residual = sum_inputs(self.d_model, dtype, x, residual, bias)
        y, self.cache = layer_norm_of_sum(x, residual, self.params["gamma"], self.params["beta"],
                                          self.eps, bias)
        return y

    def backward(self, dy):
        x_hat, inv_std = self.saved()
        checks.check_same_shape("dy", dy, x_hat.shape)
        dy = backend.get_xp().ascontiguousarray(dy)  # as x in forward: the same bits for any layout
        # dgamma and dbeta are added into the layer's gradients
        dx, _, _ = layer_norm_backward(dy, self.params["gamma"], x_hat, inv_std,
                                       (self.grads["gamma"], self.grads["beta"]))
        return dx


def sum_inputs(d_model, dtype, x, residual, bias=None):
    """x and residual, the two terms of a norm's input, checked as forward
    checks x and laid out by rows (no copy when they already are): on a
    device the sum is formed inside the kernels, so its layout is theirs.
    ``bias``, a third term if given, is a layer's parameter: its form is
    checked, not its values."""
    xp = backend.get_xp()
    for name, value in (("x", x), ("residual", residual)):
        checks.check_array(name, value, min_ndim=1, last_dim=d_model, dtype=dtype)
        checks.check_finite(name, value)
    checks.check_same_shape("residual", residual, x.shape)
    if bias is not None:
        checks.check_array("bias", bias, ndim=1, last_dim=d_model, dtype=dtype)
    return xp.ascontiguousarray(x), xp.ascontiguousarray(residual)


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


def layer_norm_backward_reference(dy, gamma, x_hat, inv_std, grads=None):
    """(dx, dgamma, dbeta), from the cache of the forward; given ``grads``,
    the layer's (dgamma, dbeta) arrays, the two are added into them."""
    D = x_hat.shape[-1]
    dgamma = (dy * x_hat).reshape(-1, D).sum(axis=0)  # over every position
    dbeta = dy.reshape(-1, D).sum(axis=0)
    dx_hat = dy * gamma
    mean_dx_hat = dx_hat.mean(axis=-1, keepdims=True)
    mean_dx_hat_x_hat = (dx_hat * x_hat).mean(axis=-1, keepdims=True)
    dx = (dx_hat - mean_dx_hat - x_hat * mean_dx_hat_x_hat) * inv_std
    return dx, *add_into(grads, dgamma, dbeta)


def layer_norm_backward_fast(dy, gamma, x_hat, inv_std, grads=None):
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
    return dx, *add_into(grads, dgamma, dbeta)


def add_into(grads, *parts):
    """Each part added into its array of ``grads``, in place, and ``grads``
    returned; without ``grads`` (None), the parts themselves."""
    if grads is None:
        return parts
    for total, part in zip(grads, parts):
        total += part
    return grads


# ------------------------------------------- the device versions: fused kernels
# Each mean over the last axis is a fused reduction (minitrans.core.fusion):
# the element-wise work before it and the little after it in the same
# kernel. Three launches forward; backward three and one for each of the
# two parameter gradients, each added into its array (core.products). The
# norm of a residual connection's sum is the same three kernels, each given
# the two terms (three with a sub-layer's bias): it adds them as it reads
# them (``layer_norm_of_sum_device``), in the order NumPy adds them,
# (x + bias) + residual. Without a bias the kernels add NO_BIAS, -0.0: the
# one number whose addition changes no bit of any x (x + 0.0 turns -0.0 into 0.0).
NO_BIAS = -0.0


@fusion.fused("layer_norm_inverse_std")
def inverse_std(x, mu, eps, inv_d, residual=0.0, bias=NO_BIAS):
    """1 / sqrt(var + eps), (...,): var + eps = sum of ((x - mu)^2 + eps) / D
    (eps goes in before the sum: after it only the sum itself may take part).
    Given a residual (and a bias), of the sum x + bias + residual, added
    here as x is read."""
    xp = backend.get_xp()
    centred = x + bias + residual - mu
    return 1.0 / xp.sqrt(xp.sum((centred * centred + eps) * inv_d, axis=-1))


@fusion.fused("layer_norm_scale_shift")
def normalise_scale_shift(x, mu, inv_std, gamma, beta, residual=0.0, bias=NO_BIAS):
    """x_hat = (x - mu) / sqrt(var + eps),  y = gamma * x_hat + beta (x + bias
    + residual for x)."""
    x_hat = (x + bias + residual - mu) * inv_std
    return gamma * x_hat + beta, x_hat


def layer_norm_device(x, gamma, beta, eps):
    """The reference's equations in three kernels: the mean, 1 / std (one
    reduction) and the scale and shift."""
    mu = x.mean(axis=-1, keepdims=True)
    inv_std = inverse_std(x, mu, eps, 1.0 / x.shape[-1])[..., None]  # (..., 1), a view
    y, x_hat = normalise_scale_shift(x, mu, inv_std, gamma, beta)
    return y, (x_hat, inv_std)


def layer_norm_of_sum_reference(x, residual, gamma, beta, eps, bias=None):
    """LayerNorm(x + residual), or given ``bias`` LayerNorm(x + bias +
    residual): the sum, then the norm of the active set. On NumPy no faster
    version: the sum is one addition, the norm's own kernels are the fast
    ones (so the pair is its own fast version)."""
    total = x + residual if bias is None else x + bias + residual
    return layer_norm(total, gamma, beta, eps)


@fusion.fused("layer_norm_mean_of_sum")
def mean_of_sum(x, residual, inv_d, bias=NO_BIAS):
    """mu = mean(x + bias + residual) over the last axis, (...,)."""
    return backend.get_xp().sum((x + bias + residual) * inv_d, axis=-1)


def layer_norm_of_sum_device(x, residual, gamma, beta, eps, bias=None):
    """The three kernels of ``layer_norm_device``, each adding x + residual
    (x + bias + residual) as it reads x: the sum costs no launch and no array."""
    inv_d, terms = 1.0 / x.shape[-1], (residual, NO_BIAS if bias is None else bias)
    mu = mean_of_sum(x, residual, inv_d, terms[1])[..., None]  # (..., 1), a view
    inv_std = inverse_std(x, mu, eps, inv_d, *terms)[..., None]
    y, x_hat = normalise_scale_shift(x, mu, inv_std, gamma, beta, *terms)
    return y, (x_hat, inv_std)


@fusion.fused("norm_mean_dx_hat")
def mean_dx_hat(dy, gamma, inv_d):
    """mean(dx_hat) over the last axis, (...,), with dx_hat = dy * gamma."""
    return backend.get_xp().sum(dy * gamma * inv_d, axis=-1)


@fusion.fused("norm_mean_dx_hat_x_hat")
def mean_dx_hat_x_hat(dy, gamma, x_hat, inv_d):
    """mean(dx_hat * x_hat) over the last axis, (...,) (RMSNorm's backward needs it too)."""
    return backend.get_xp().sum(dy * gamma * x_hat * inv_d, axis=-1)


@fusion.fused("layer_norm_dx")
def layer_norm_dx(dy, gamma, x_hat, mean_dx_hat, mean_dx_hat_x_hat, inv_std):
    """dx = (dx_hat - mean(dx_hat) - x_hat * mean(dx_hat * x_hat)) / sqrt(var + eps),
    dx_hat = dy * gamma; and dy * x_hat, whose sum over the positions is dgamma."""
    dx_hat = dy * gamma
    return (dx_hat - mean_dx_hat - x_hat * mean_dx_hat_x_hat) * inv_std, dy * x_hat


def layer_norm_backward_device(dy, gamma, x_hat, inv_std, grads=None):
    """The reference's equations as two fused row means, one fused kernel for
    dx, and a column sum added into each gradient."""
    D = x_hat.shape[-1]
    dx, dy_x_hat = layer_norm_dx(dy, gamma, x_hat, mean_dx_hat(dy, gamma, 1.0 / D)[..., None],
                                 mean_dx_hat_x_hat(dy, gamma, x_hat, 1.0 / D)[..., None], inv_std)
    dgamma, dbeta = grads if grads is not None else (zeros_like(gamma), zeros_like(gamma))
    add_column_sums(dgamma, dy_x_hat.reshape(-1, D))
    add_column_sums(dbeta, dy.reshape(-1, D))
    return dx, dgamma, dbeta


def zeros_like(a):
    """Fresh gradients to add into, where the caller gives none."""
    return backend.get_xp().zeros_like(a)


layer_norm = kernels.pair(layer_norm_reference, layer_norm_fast, device=layer_norm_device)
layer_norm_of_sum = kernels.pair(layer_norm_of_sum_reference, layer_norm_of_sum_reference,
                                 device=layer_norm_of_sum_device)
layer_norm_backward = kernels.pair(layer_norm_backward_reference, layer_norm_backward_fast,
                                   device=layer_norm_backward_device)

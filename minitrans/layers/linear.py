"""The fully connected layer y = xW + b: the one place the affine map is written.

Every layer that projects is built from it: the feed-forward network (two
``Linear``), multi-head attention (``W_Q``, ``W_K``, ``W_V``, ``W_O``) and the
output projection (through ``affine_forward`` and ``add_affine_grads``,
because its tied weight belongs to the embedding). ``affine_backward`` gives
the three gradients as new arrays; the layers add dW and db into their own
gradients with ``add_affine_grads``, which a device runs as one product each.
"""

from minitrans.core import backend, checks, kernels, products
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


def add_affine_grads_reference(grad_W, grad_b, x_2d, dy_2d):
    """The parameter gradients of y = x W + b added into a layer's own:

        grad_W += x^T dy,   grad_b += sum over rows of dy

    ``grad_b`` is None for a layer without a bias. The fast set runs this
    version too: on NumPy it is already a BLAS product for each (the fast
    ``sum_leading`` is one with a vector of ones), then an addition."""
    grad_W += x_2d.T @ dy_2d  # (d_in, d_out)
    if grad_b is not None:
        grad_b += sum_leading(dy_2d)  # (d_out,)


def add_affine_grads_device(grad_W, grad_b, x_2d, dy_2d):
    """The same additions, each inside its product: one launch for
    grad_W (a gemm that adds into it), one for grad_b (a gemv)."""
    products.add_product(grad_W, x_2d.T, dy_2d)
    if grad_b is not None:
        products.add_column_sums(grad_b, dy_2d)


add_affine_grads = kernels.pair(add_affine_grads_reference, add_affine_grads_reference,
                                device=add_affine_grads_device)


class Linear(Module):
    """An affine map applied to the last axis of its input.

    Forward:   y = x W + b
    Backward:  dx = dy W^T,   dW += x^T dy,   db += sum over rows of dy

    ``backward(dy, add_to=g)`` adds dx into an existing gradient ``g`` of the
    input instead of returning a new array: where x feeds several layers
    (attention's keys and values), their gradients sum, and on a device the
    addition then happens inside the product (``core.products``).

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

    def backward(self, dy, add_to=None):
        x_2d, x_shape = self.saved()
        checks.check_same_shape("dy", dy, (*x_shape[:-1], self.d_out))
        dy_2d = dy.reshape(-1, self.d_out)
        add_affine_grads(self.grads["W"], self.grads.get("b"), x_2d, dy_2d)  # dW, db
        W_T = self.params["W"].T
        if add_to is None:
            return (dy_2d @ W_T).reshape(x_shape)  # dx = dy W^T
        checks.check_same_shape("add_to", add_to, x_shape)
        if not add_to.flags.c_contiguous:  # reshape would copy, and the sum be lost
            raise ValueError("add_to: expected a C-contiguous array, got a strided view")
        products.add_product(add_to.reshape(-1, self.d_in), dy_2d, W_T)  # add_to += dy W^T
        return add_to

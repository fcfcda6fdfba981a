"""Softmax and log-softmax, forward and backward, as pure functions.

Both subtract the row maximum before exponentiating: softmax(z) equals
softmax(z - c) for any constant c, and with c = max(z) the largest exponent
is exp(0) = 1, so logits of 1e4 neither overflow nor give NaN.
"""

from minitrans import backend
from minitrans.sums import sum_along


def softmax(z, axis=-1):
    """y_i = exp(z_i - max z) / sum_j exp(z_j - max z)."""
    xp = backend.get_xp()
    e = z - z.max(axis=axis, keepdims=True)
    xp.exp(e, out=e)  # in place, as below: one array the size of z, not three
    e /= sum_along(e, axis)
    return e


def softmax_backward(y, dy, axis=-1):
    """dz = y * (dy - sum(dy * y)): the Jacobian diag(y) - y y^T applied to dy."""
    dz = dy - sum_along(dy * y, axis)
    dz *= y
    return dz


def masked_softmax(z, mask, axis=-1):
    """Softmax over the entries where ``mask`` is True; the rest get exactly 0.

    A row in which every entry is masked has nothing to normalise over: it
    returns a row of zeros (not NaN), so it contributes nothing downstream.
    """
    xp = backend.get_xp()
    e = xp.where(mask, z, -xp.inf)
    row_max = e.max(axis=axis, keepdims=True)
    row_max = xp.where(xp.isfinite(row_max), row_max, 0.0)  # fully masked rows
    e -= row_max  # in place: e is the fresh array from where()
    xp.exp(e, out=e)  # exp(-inf) = 0 for masked entries
    total = sum_along(e, axis)
    e /= xp.where(total > 0, total, 1.0)
    return e


def log_softmax(z, axis=-1):
    """log y_i = z_i - max z - log sum_j exp(z_j - max z)  (log-sum-exp)."""
    xp = backend.get_xp()
    shifted = z - z.max(axis=axis, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))


def log_softmax_backward(log_y, dlog_y, axis=-1):
    """dz = dlog_y - softmax(z) * sum(dlog_y)."""
    xp = backend.get_xp()
    return dlog_y - xp.exp(log_y) * dlog_y.sum(axis=axis, keepdims=True)

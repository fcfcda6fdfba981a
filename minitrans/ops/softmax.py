"""Softmax and log-softmax, forward and backward, as pure functions.

Both subtract the row maximum before exponentiating: softmax(z) equals
softmax(z - c) for any constant c, and with c = max(z) the largest exponent
is exp(0) = 1, so logits of 1e4 neither overflow nor give NaN.

Attention's softmax is a pair (``minitrans.core.kernels``):
``attention_softmax(scores, mask, scale)`` runs the reference,
``masked_softmax`` (``softmax`` without a mask) of the scaled scores, or the
fast version, ``softmax_in_place``, which writes into the scores and, when
that is safe, subtracts one maximum per block of scores instead of one per
row. Its backward likewise: ``attention_softmax_backward`` runs
``softmax_backward`` or ``softmax_backward_in_place``, and scales. Both
have a device version too: the element-wise work between the row
reductions fused into one kernel at a time (``minitrans.core.fusion``).
``tests/library/test_kernels.py`` checks that each fast and device version
equals its reference.
"""

from minitrans.core import backend, fusion, kernels
from minitrans.ops.sums import dot_last_fast, sum_last_fast


def softmax(z, axis=-1):
    """y_i = exp(z_i - max z) / sum_j exp(z_j - max z)."""
    e = backend.get_xp().exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_backward(y, dy, axis=-1):
    """dz = y * (dy - sum(dy * y)): the Jacobian diag(y) - y y^T applied to dy."""
    return y * (dy - (dy * y).sum(axis=axis, keepdims=True))


def softmax_backward_in_place(y, dy):
    """softmax_backward(y, dy) over the last axis, written into dy and
    returned: for a caller that no longer needs dy (attention's backward),
    one array the size of y fewer to allocate, and each row's dot product
    taken by einsum, without a dy * y array.

    Timed against the reference by ``python benchmarks/kernels.py``.
    """
    row_sums = dot_last_fast(dy, y)  # (..., 1)
    dz = backend.get_xp().subtract(dy, row_sums, out=dy)
    dz *= y
    return dz


def masked_softmax(z, mask, axis=-1):
    """Softmax over the entries where ``mask`` is True; the rest get exactly 0.

    A row in which every entry is masked has nothing to normalise over: it
    returns a row of zeros (not NaN), so it contributes nothing downstream.
    """
    xp = backend.get_xp()
    kept = xp.where(mask, z, -xp.inf)  # exp(-inf) = 0: masked entries drop out
    e = xp.exp(kept - _row_max(kept, axis))
    total = e.sum(axis=axis, keepdims=True)
    return e / xp.where(total > 0, total, 1.0)  # a fully masked row: 0 / 1


def _row_max(e, axis):
    """Each row's maximum, 0 for a row with every entry masked (-inf)."""
    xp = backend.get_xp()
    row_max = e.max(axis=axis, keepdims=True)
    return xp.where(xp.isfinite(row_max), row_max, 0.0)


def _exp_normalised(e, shift):
    """exp(e - shift) / its sum along the last axis, in e's own array (shift
    None: exp(e) itself); a row whose exponentials are all 0 (every entry
    masked) stays all zeros."""
    xp = backend.get_xp()
    if shift is not None:
        e -= shift
    xp.exp(e, out=e)
    total = sum_last_fast(e)
    e /= xp.where(total > 0, total, 1.0)
    return e


# One shift for a whole block of scores is safe while max - min stays below
# this: exp(-60) is about 1e-26, far from float32's smallest normal number
# (about exp(-87)), so no row can end up all zeros.
SHARED_SHIFT_SPREAD = 60.0


def softmax_in_place(z, mask=None):
    """softmax(z) over the last axis, written into z and returned; where
    ``mask`` (broadcastable, True = keep) is False the result is exactly 0,
    and a row with nothing kept is all zeros. The same values as
    ``masked_softmax(z, mask)`` (or ``softmax(z)`` without a mask), up to
    rounding, faster.

    Two things make it faster. It works in place: z is the fresh array of
    scores, which nothing else needs. And it usually subtracts one number per
    (T_q, T_k) block of scores, the maximum of one head of one sequence,
    instead of one per row: any shift leaves softmax unchanged, and NumPy's
    maximum along a short last axis (the 64 keys of a row of attention
    scores) goes row by row, many times slower than the maxima of whole
    blocks (``python benchmarks/kernels.py`` compares them;
    benchmarks/results/kernels/).

    A block's shift must leave no exponent above 0 (true: it is the block's
    largest score) and no row entirely below exp's range, where the row
    would turn into 0 / 0. A row's largest score is at least the block's
    minimum, so if max - min <= SHARED_SHIFT_SPREAD in every block, no row
    is more than 60 below its shift. When some block spreads wider (very
    peaked attention, or NaN) every row gets its own maximum instead. The
    extrema are taken before masking: masked scores are real numbers too, so
    the bound still holds. And when every score lies within 60 of 0, as
    scaled scores usually do, the shift is 0: no exponent exceeds exp(60),
    no row falls below exp(-60), and a pass over the scores is saved.

    Rounding now depends on the other scores of the block, masked ones
    included, so a causal mask makes a position independent of later ones
    up to rounding (1e-7 in float32), not bit for bit.

    Deciding reads one number back from the device, which on a GPU would
    make the CPU wait for the scores at every attention call; and a GPU
    takes the rows' maxima about as fast as the blocks'. So on a device
    backend (``backend.on_device()``: CuPy, and the strict backend that
    stands in for it) every row gets its own maximum, with no decision.

    Timed against the reference by
    ``python benchmarks/kernels.py --kernels attention_softmax``.
    """
    xp = backend.get_xp()
    shared, shift = (False, None) if backend.on_device() else _shared_shift(z)
    if mask is not None:
        xp.copyto(z, -xp.inf, where=~mask)  # exp(-inf) = 0: masked entries drop out
    return _exp_normalised(z, shift if shared else _row_max(z, -1))


def _shared_shift(z):
    """(True, shift) where one shift serves a whole (T_q, T_k) block of z:
    None (no shift) when every score lies within SHARED_SHIFT_SPREAD of 0,
    else each block's maximum when no block spreads wider than that;
    (False, None) when some block does (every row needs its own)."""
    block_axes = (-2, -1) if z.ndim >= 2 else (-1,)
    top = z.max(axis=block_axes, keepdims=True)
    bottom = z.min(axis=block_axes, keepdims=True)
    if float(top.max()) <= SHARED_SHIFT_SPREAD and float(bottom.min()) >= -SHARED_SHIFT_SPREAD:
        return True, None
    return float((top - bottom).max()) <= SHARED_SHIFT_SPREAD, top


def attention_softmax_reference(scores, mask=None, scale=1.0):
    """P = softmax(scale * scores) over the last axis, 0 where ``mask``
    (True = may attend) is False: ``masked_softmax``, or ``softmax`` without
    a mask. A row with nothing to attend to is all zeros. (Attention's scale
    is 1 / sqrt(d_k).)"""
    scaled = scores * scale
    return softmax(scaled) if mask is None else masked_softmax(scaled, mask)


def attention_softmax_fast(scores, mask=None, scale=1.0):
    """``softmax_in_place`` of the scores, scaled in place first."""
    if scale != 1.0:
        scores *= scale
    return softmax_in_place(scores, mask)


def attention_softmax_backward_reference(P, dP, scale=1.0):
    """dS = scale * P * (dP - rowsum(dP * P)): the gradient of the scores
    before their scaling, from P = attention_softmax(scores, mask, scale)."""
    return softmax_backward(P, dP) * scale


def attention_softmax_backward_fast(P, dP, scale=1.0):
    """``softmax_backward_in_place``, written into dP and scaled there."""
    dS = softmax_backward_in_place(P, dP)
    dS *= scale
    return dS


# ------------------------------------------- the device versions: fused kernels
# Each row's maximum and sum is a fused reduction (minitrans.core.fusion),
# the masking, scaling and exponentials inside it: three launches forward,
# the last recomputing the exponentials rather than keeping them, and two
# backward. ``kept`` is the mask, or True (keep everything) without one.


@fusion.fused("softmax_row_max")
def row_max(z, kept, scale):
    """The shift of each row, (...,): the largest kept scaled score, or 0 where
    nothing is kept (max -inf), as ``_row_max`` gives the reference."""
    xp = backend.get_xp()
    largest = xp.max(xp.where(kept, z * scale, -xp.inf), axis=-1)
    return xp.where(xp.isfinite(largest), largest, 0.0)


@fusion.fused("softmax_row_total")
def row_total(z, kept, scale, shift):
    """Each row's sum of exp(scale * z - shift) over the kept entries (exp(-inf)
    = 0 drops the rest), (...,); 1 where it is 0 (nothing kept), so that such
    a row divides 0 by 1 into zeros."""
    xp = backend.get_xp()
    total = xp.sum(xp.exp(xp.where(kept, z * scale, -xp.inf) - shift), axis=-1)
    return xp.where(total > 0.0, total, 1.0)


@fusion.fused("softmax_normalise")
def normalised(z, kept, scale, shift, total):
    """P = exp(scale * z - shift) / total, 0 where not kept."""
    xp = backend.get_xp()
    return xp.exp(xp.where(kept, z * scale, -xp.inf) - shift) / total


def attention_softmax_device(scores, mask=None, scale=1.0):
    """The reference's softmax as two fused row reductions and one fused kernel."""
    kept = True if mask is None else mask
    shift = row_max(scores, kept, scale)[..., None]  # (..., 1), a view
    total = row_total(scores, kept, scale, shift)[..., None]
    return normalised(scores, kept, scale, shift, total)


@fusion.fused("softmax_backward_row_sums")
def row_sums_of_products(P, dP):
    """rowsum(dP * P), (...,)."""
    return backend.get_xp().sum(dP * P, axis=-1)


@fusion.fused("softmax_backward")
def scaled_softmax_backward(P, dP, row_sums, scale):
    """dS = scale * P * (dP - rowsum(dP * P)), given each row's sum of dP * P."""
    return P * (dP - row_sums) * scale


def attention_softmax_backward_device(P, dP, scale=1.0):
    """The reference's dS as one fused row sum and one fused kernel."""
    return scaled_softmax_backward(P, dP, row_sums_of_products(P, dP)[..., None], scale)


attention_softmax = kernels.pair(attention_softmax_reference, attention_softmax_fast,
                                 device=attention_softmax_device)
attention_softmax_backward = kernels.pair(attention_softmax_backward_reference,
                                          attention_softmax_backward_fast,
                                          device=attention_softmax_backward_device)


def log_softmax(z, axis=-1):
    """log y_i = z_i - max z - log sum_j exp(z_j - max z)  (log-sum-exp)."""
    xp = backend.get_xp()
    shifted = z - z.max(axis=axis, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))


def log_softmax_backward(log_y, dlog_y, axis=-1):
    """dz = dlog_y - softmax(z) * sum(dlog_y)."""
    xp = backend.get_xp()
    return dlog_y - xp.exp(log_y) * dlog_y.sum(axis=axis, keepdims=True)

"""Inverted dropout (Srivastava et al., 2014; paper §5.4)."""

from minitrans.core import backend, checks, fusion, kernels
from minitrans.layers.module import Module
from minitrans.ops.random_bits import (
    element_indices, random_uint16, random_uint16_at, random_uniform, stream_key,
)

MASK_LEVELS = 2**16  # the values a 16-bit random integer can take


class Dropout(Module):
    """Zeroes each element with probability p during training.

    Forward (training):  y = x * m / (1 - p),  m_i ~ Bernoulli(1 - p)
    Forward (eval):      y = x
    Backward:            dx = dy * m / (1 - p)   (dx = dy in eval)

    Dividing by (1 - p) while training ("inverted" dropout) keeps the expected
    value of y equal to x, so nothing needs rescaling at evaluation time.

    The mask is drawn on the current device from a counter-based stream
    (``minitrans.ops.random_bits``) keyed by (``seed``, step, the number of
    masks drawn since): ``seed`` is given or drawn from ``rng``,
    ``reset_rng()`` starts the sequence of masks again, which gradient
    checks use to get the same mask at every forward, and ``reset_rng(step)``
    gives each training step its own. The masks are the same on NumPy and on
    the strict backend, and on CuPy (integer arithmetic that both define
    alike; 20 steps with dropout agreed to 1e-7 on an H200). They are drawn by a kernel pair,
    ``dropout_keep_mask``: the fast one draws other masks than the reference
    for the same key (see below). On a device the fast set draws the fast
    mask and applies it in one kernel (``dropout_forward``), from each
    element's number alone: the same masks, one launch instead of thirteen.

    Inputs:
        x: any shape
    Returns:
        y: the shape of x
    """

    def __init__(self, p=0.1, rng=None):
        super().__init__()
        checks.check_probability("p", p)
        self.p = float(p)
        self.seed = int(backend.host_rng(rng).integers(2**31))
        self.reset_rng()

    def reset_rng(self, step=None):
        """Restart the masks: from the seed alone, or from (seed, step).

        The trainer calls ``reset_rng(step)`` before every step, so the masks
        of a step depend only on the seed and the step number. A run resumed
        from a checkpoint then draws exactly the masks the uninterrupted run
        drew, with no generator state to save.
        """
        self.stream = (self.seed, 0 if step is None else int(step) + 1)
        self.draws = 0  # masks drawn from this stream so far

    @property
    def dropping(self):
        """Whether forward drops anything: in training, with p > 0."""
        return self.training and self.p > 0.0

    def forward(self, x):
        checks.check_array("x", x)
        if not self.dropping:
            self.cache = (None, x.shape)
            return x
        y, keep = dropout_forward(x, self._next_key(), self.p)
        self.cache = (keep, x.shape)
        return y

    def forward_added(self, x, residual, bias=None):
        """residual + forward(x), the residual connection's sum, for a
        dropping layer: on a device the mask, the scale and the addition are
        one kernel. Given ``bias``, the sub-layer's last bias that its
        forward left out, residual + forward(x + bias), with x + bias made
        in that kernel too. ``backward`` is forward's."""
        checks.check_array("x", x)
        if not self.dropping:
            raise RuntimeError("forward_added: only while dropping (see .dropping)")
        total, keep = residual_dropout_forward(residual, x, self._next_key(), self.p, bias)
        self.cache = (keep, x.shape)
        return total

    def backward(self, dy):
        keep, x_shape = self.saved()
        checks.check_same_shape("dy", dy, x_shape)
        if keep is None:
            return dy
        return dropout_scale(dy, keep, 1.0 / (1.0 - self.p))

    def _next_key(self):
        """The key of the stream's next mask (``random_bits.stream_key``)."""
        key = stream_key(*self.stream, self.draws)
        self.draws += 1
        return key


def dropout_keep_mask_reference(key, shape, p):
    """m ~ Bernoulli(1 - p), boolean, of ``shape``: a uniform number in
    [0, 1) for each element, kept where it is at least p. ``key``: the
    stream's key (``random_bits.stream_key``)."""
    return random_uniform(key, shape) >= p


def dropout_keep_mask_fast(key, shape, p):
    """The same distribution, from 16-bit random integers compared with
    p * 65536: up to rounding p to a multiple of 1/65536 (0.1 becomes
    0.100006). Each 64-bit hash gives four 16-bit integers where the
    reference spends one hash and a float per element, and dropout draws a
    mask on every sub-layer of every step. Timed against the reference by
    ``python benchmarks/kernels.py``.

    NOT the same masks as the reference for a key: the two read the
    stream's bits differently. Runs are reproducible within one kernel
    set; the losses of a seed differ between the sets by which elements
    dropout dropped.
    """
    return random_uint16(key, shape) >= keep_threshold(p)


def keep_threshold(p):
    """The fast masks keep a 16-bit draw that is at least this: p * 65536,
    rounded, and below 65536 so that p < 1 keeps some."""
    return min(round(p * MASK_LEVELS), MASK_LEVELS - 1)


dropout_keep_mask = kernels.pair(dropout_keep_mask_reference, dropout_keep_mask_fast)


# Applying a mask: y = a * m / (1 - p), the forward's and the backward's one
# formula, alone or with the residual connection's addition after it.


def dropout_scale_reference(a, keep, scale):
    """a * m * scale, scale = 1 / (1 - p)."""
    return a * keep * scale


def dropout_scale_fast(a, keep, scale):
    """The reference, with the scale applied in place: one new array, not two."""
    result = a * keep
    result *= scale
    return result


def residual_dropout_reference(residual, a, keep, scale):
    """residual + a * m * scale: x + Dropout(F(x)), with a = F(x)."""
    return residual + a * keep * scale


def residual_dropout_fast(residual, a, keep, scale):
    """The reference in one new array: a * m, scaled and added to in place."""
    result = dropout_scale_fast(a, keep, scale)
    result += residual
    return result


# On a device the reference itself, fused: it is already one element-wise expression
dropout_scale_device = fusion.fused("dropout_scale")(dropout_scale_reference)
residual_dropout_device = fusion.fused("residual_dropout")(residual_dropout_reference)
dropout_scale = kernels.pair(dropout_scale_reference, dropout_scale_fast,
                             device=dropout_scale_device)
residual_dropout = kernels.pair(residual_dropout_reference, residual_dropout_fast,
                                device=residual_dropout_device)


# Drawing a mask and applying it, as the forward does: on NumPy (and in the
# reference set everywhere) the two kernels above, one after the other; on a
# device in the fast set ONE kernel that hashes each element's 16 random bits
# from its element number, compares them with the threshold and scales: the
# fast set's masks, bit for bit, without a mask-drawing launch per operation.
# The mask comes back too: backward applies it with ``dropout_scale``.


def dropout_forward_reference(x, key, p):
    """(x * m / (1 - p), m), m the mask of stream ``key``: drawn and applied
    by the two kernels of the active set (``dropout_keep_mask``, ``dropout_scale``)."""
    keep = dropout_keep_mask(key, x.shape, p)
    return dropout_scale(x, keep, 1.0 / (1.0 - p)), keep


def residual_dropout_forward_reference(residual, x, key, p, bias=None):
    """(residual + x * m / (1 - p), m): the residual connection's sum, the
    same way. Given ``bias`` (a sub-layer's last bias, which it left out),
    x + bias in x's place."""
    keep = dropout_keep_mask(key, x.shape, p)
    if bias is not None:
        x = x + bias
    return residual_dropout(residual, x, keep, 1.0 / (1.0 - p)), keep


@fusion.fused("dropout_forward")
def draw_and_scale(x, index, key, threshold, scale):
    """x * m * scale and m, m kept where element j's 16-bit draw (``index``
    holds j) is at least ``threshold``."""
    keep = random_uint16_at(index, key) >= threshold
    return x * keep * scale, keep


@fusion.fused("residual_dropout_forward")
def draw_scale_and_add(residual, x, index, key, threshold, scale):
    """residual + x * m * scale and m, m as ``draw_and_scale`` draws it."""
    keep = random_uint16_at(index, key) >= threshold
    return residual + x * keep * scale, keep


@fusion.fused("residual_bias_dropout_forward")
def draw_scale_and_add_with_bias(residual, x, bias, index, key, threshold, scale):
    """residual + (x + bias) * m * scale and m: the same kernel, adding the
    sub-layer's bias as it reads x."""
    keep = random_uint16_at(index, key) >= threshold
    return residual + (x + bias) * keep * scale, keep


def dropout_forward_device(x, key, p):
    """The fast set's ``dropout_forward`` in one kernel. The key and the
    threshold go in as uint64 scalars: a Python int above 2^63 is no int64,
    and a uint64 compared with an int64 would be compared as float64."""
    xp = backend.get_xp()
    return draw_and_scale(x, element_indices(x.shape), xp.uint64(key),
                          xp.uint64(keep_threshold(p)), 1.0 / (1.0 - p))


def residual_dropout_forward_device(residual, x, key, p, bias=None):
    """The fast set's ``residual_dropout_forward`` in one kernel, the bias
    (if any) added in it: the same mask either way."""
    xp = backend.get_xp()
    draw = (element_indices(x.shape), xp.uint64(key), xp.uint64(keep_threshold(p)),
            1.0 / (1.0 - p))
    if bias is None:
        return draw_scale_and_add(residual, x, *draw)
    return draw_scale_and_add_with_bias(residual, x, bias, *draw)


# The reference calls the active set's kernels, so it is also the fast version
dropout_forward = kernels.pair(dropout_forward_reference, dropout_forward_reference,
                               device=dropout_forward_device)
residual_dropout_forward = kernels.pair(residual_dropout_forward_reference,
                                        residual_dropout_forward_reference,
                                        device=residual_dropout_forward_device)

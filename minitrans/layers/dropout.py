"""Inverted dropout (Srivastava et al., 2014; paper §5.4)."""

from minitrans.core import backend, checks, fusion, kernels
from minitrans.layers.module import Module
from minitrans.ops.random_bits import random_uint16, random_uniform, stream_key

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
    for the same key (see below).

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
        keep = self._draw_keep_mask(x.shape)
        self.cache = (keep, x.shape)
        return dropout_scale(x, keep, 1.0 / (1.0 - self.p))

    def forward_added(self, x, residual):
        """residual + forward(x), the residual connection's sum, for a
        dropping layer: on a device the mask, the scale and the addition are
        one kernel. ``backward`` is forward's."""
        checks.check_array("x", x)
        if not self.dropping:
            raise RuntimeError("forward_added: only while dropping (see .dropping)")
        keep = self._draw_keep_mask(x.shape)
        self.cache = (keep, x.shape)
        return residual_dropout(residual, x, keep, 1.0 / (1.0 - self.p))

    def backward(self, dy):
        keep, x_shape = self.saved()
        checks.check_same_shape("dy", dy, x_shape)
        if keep is None:
            return dy
        return dropout_scale(dy, keep, 1.0 / (1.0 - self.p))

    def _draw_keep_mask(self, shape):
        """m ~ Bernoulli(1 - p), as a boolean array: the next mask of the stream."""
        key = stream_key(*self.stream, self.draws)
        self.draws += 1
        return dropout_keep_mask(key, shape, self.p)


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
    threshold = min(round(p * MASK_LEVELS), MASK_LEVELS - 1)
    return random_uint16(key, shape) >= threshold


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

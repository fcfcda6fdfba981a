"""Inverted dropout (Srivastava et al., 2014; paper §5.4)."""

from minitrans.core import backend, checks
from minitrans.layers.module import Module

MASK_LEVELS = 2**16  # the values a 16-bit random integer can take


class Dropout(Module):
    """Zeroes each element with probability p during training.

    Forward (training):  y = x * m / (1 - p),  m_i ~ Bernoulli(1 - p)
    Forward (eval):      y = x
    Backward:            dx = dy * m / (1 - p)   (dx = dy in eval)

    Dividing by (1 - p) while training ("inverted" dropout) keeps the expected
    value of y equal to x, so nothing needs rescaling at evaluation time.

    The mask is drawn on the current device from a generator seeded by
    ``seed`` (or by a number drawn from ``rng``); ``reset_rng()`` starts the
    sequence of masks again, which gradient checks use to get the same mask at
    every forward, and ``reset_rng(step)`` gives each training step its own.

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
        drew, with no generator state to save (CuPy's cannot be saved).
        """
        self.rng = backend.device_rng(self.seed if step is None else [self.seed, int(step)])

    def moved(self):
        self.reset_rng()  # a generator that draws on the new device

    def forward(self, x):
        checks.check_array("x", x)
        if not self.training or self.p == 0.0:
            self.cache = (None, x.shape)
            return x
        keep = self._draw_keep_mask(x.shape)
        self.cache = (keep, x.shape)
        return self._masked(x, keep)

    def backward(self, dy):
        keep, x_shape = self.saved()
        checks.check_same_shape("dy", dy, x_shape)
        if keep is None:
            return dy
        return self._masked(dy, keep)

    def _masked(self, a, keep):
        """a * m / (1 - p): the forward's and the backward's one formula."""
        result = a * keep
        result *= 1.0 / (1.0 - self.p)  # in place: one new array, not two
        return result

    def _draw_keep_mask(self, shape):
        """m ~ Bernoulli(1 - p), as a boolean array.

        The plain way is ``rng.random(shape) >= p``. A random 16-bit integer
        compared with p * 65536 gives the same mask, up to rounding p to a
        multiple of 1/65536 (0.1 becomes 0.100006), and costs a third as
        much to draw as a float32: 0.6 ms against 1.7 ms for (2048, 256) on
        the CPU, and dropout draws a mask on every sub-layer of every step.
        """
        threshold = min(round(self.p * MASK_LEVELS), MASK_LEVELS - 1)
        draws = backend.random_uint16(self.rng, shape)
        return draws >= threshold

"""The output side: log-softmax and cross-entropy with label smoothing."""

import math

from minitrans.core import backend, checks, kernels
from minitrans.layers.loss_device import (
    bad_value_count, exponentials, smoothed_cross_entropy_backward_device,
    smoothed_cross_entropy_device, token_weights_device,
)
from minitrans.layers.module import Module
from minitrans.ops.softmax import log_softmax, log_softmax_backward
from minitrans.ops.sums import mean_last_fast, sum_last_fast


class LogSoftmax(Module):
    """log p = z - logsumexp(z) over the vocabulary (last) axis.

    Turns the final projection's logits into log-probabilities, used when
    decoding. Computed with log-sum-exp, so logits of 1e4 stay finite.
    Backward: dz = dlogp - softmax(z) * sum(dlogp).

    Inputs:
        logits: (..., V)
    Returns:
        log_probs: (..., V)
    """

    def forward(self, logits):
        checks.check_array("logits", logits, min_ndim=1)
        log_probs = log_softmax(logits)
        self.cache = log_probs
        return log_probs

    def backward(self, dlog_probs):
        log_probs = self.saved()
        checks.check_same_shape("dlog_probs", dlog_probs, log_probs.shape)
        return log_softmax_backward(log_probs, dlog_probs)


class LabelSmoothedCrossEntropy(Module):
    """Mean cross-entropy between smoothed targets and softmax(logits).

    Label smoothing (paper §5.4, eps_ls = 0.1; Szegedy et al., 2016) trains
    towards q = (1 - eps) * one_hot(target) + eps / V instead of the one-hot
    target, so the model is rewarded for being a little unsure:

        loss_t = -sum_v q_v log p_v = (1 - eps) * (-log p_target) + eps * mean_v(-log p_v)
        loss   = sum over non-padding positions of loss_t / (their number)

    This is the definition of PyTorch's ``CrossEntropyLoss(label_smoothing=eps,
    ignore_index=pad_id)``. Positions whose target is ``pad_id`` are ignored;
    when every target is padding the loss is 0 (there is nothing to learn).
    Log-softmax and the loss are computed together from the logits, with
    log-sum-exp, so their gradient is the short form:

        dlogits_t = (softmax(logits_t) - q_t) / (number of non-padding positions)

    Both are kernel pairs: ``smoothed_cross_entropy_reference`` and
    ``smoothed_cross_entropy_backward_reference`` below read as these
    equations, the ``_fast`` versions beside them form neither q nor log p,
    and the ``_device`` versions (``layers.loss_device``) fuse them for a GPU,
    where the forward keeps no exponentials and the backward computes them
    again from the logits.

    Inputs:
        logits:  (..., V) float
        targets: (...) integer token ids in [0, V)
    Returns:
        loss: a 0-d array
    ``backward(dloss=1.0)`` returns dlogits; targets get no gradient.
    """

    def __init__(self, label_smoothing=0.1, pad_id=None):
        super().__init__()
        checks.check_probability("label_smoothing", label_smoothing)
        checks.check_int("pad_id", pad_id, low=0, allow_none=True)
        self.eps = float(label_smoothing)
        self.pad_id = pad_id
        self._exps_buffer = None  # see _exps_array

    def moved(self):
        self._exps_buffer = None  # made again on the new device

    def forward(self, logits, targets):
        checks.check_array("logits", logits, min_ndim=1, floating=True)  # not ints, not complex
        checks.check_token_ids("targets", targets)
        checks.check_same_shape("targets", targets, logits.shape[:-1])
        weights = token_weights(targets, self.pad_id, logits.dtype)  # 1/count at real, 0 at pad
        # ids out of range are refused below, once the loss is known; until
        # then each version keeps them from indexing outside the logits
        buffer = None if backend.on_device() else self._exps_array(logits)  # the CPU's fast one
        loss, exps, total = smoothed_cross_entropy(logits, targets, weights, self.eps, buffer)
        self._check_values(logits, targets, loss)
        self.cache = (exps, total, targets, weights)
        return loss

    def backward(self, dloss=1.0):
        """dlogits = (p - q) * weight * dloss, q = (1 - eps) one_hot + eps / V."""
        exps, total, targets, weights = self.saved()
        if hasattr(dloss, "shape"):
            checks.check_same_shape("dloss", dloss, ())  # the loss is a scalar
            dloss = dloss.astype(total.dtype)  # a float64 0-d array would upcast
        return smoothed_cross_entropy_backward(dloss, exps, total, targets, weights, self.eps)

    def _check_values(self, logits, targets, loss):
        """Targets in [0, V) and finite logits, both in one wait for the device
        (a training step makes five in all); on failure, each check's own message.

        The logits are checked through the loss: a NaN or +inf logit makes
        it NaN, and so does -inf at a target (or anywhere, with label
        smoothing), which saves a pass over the (..., V) logits. A -inf
        logit elsewhere is a probability of exactly 0, which the loss and
        its gradient take as they are (as PyTorch's cross-entropy does)."""
        xp = backend.get_xp()
        if backend.on_device():  # one fused kernel, where each operation is a launch
            bad = bad_value_count(targets, logits.shape[-1], loss)
        else:
            bad = ((targets < 0) | (targets >= logits.shape[-1])).any() | ~xp.isfinite(loss)
        if bool(bad):
            checks.check_token_ids("targets", targets, logits.shape[-1])
            checks.check_finite("logits", logits)
            checks.check_finite("loss", loss)  # not reached: the logits explain it

    def _exps_array(self, logits):
        """An array the shape of the logits, (..., V), for exp(shifted): the
        same one from step to step. A fresh one would be fresh memory every
        step, which the system hands out page by page on first touch: on the
        base config's (2048, 8000) logits, 65 MB every step (``python
        benchmarks/kernels.py`` times both; benchmarks/results/kernels/).
        Only this layer's cache holds it."""
        buffer = self._exps_buffer
        if (buffer is None or buffer.shape != logits.shape or buffer.dtype != logits.dtype
                or type(buffer) is not type(logits)):
            buffer = self._exps_buffer = backend.get_xp().empty_like(logits)
        return buffer

    def num_targets(self, targets):
        """How many targets count in the mean: those that are not ``pad_id``
        (a Python int). ``DataParallel`` weighs each shard's loss by it."""
        if self.pad_id is None:
            return int(targets.size)
        return int((targets != self.pad_id).sum())


def token_weights_reference(targets, pad_id, dtype):
    """1 / (number of non-padding targets) at each real target, 0 at padding
    (``pad_id`` None: every target is real)."""
    xp = backend.get_xp()
    if pad_id is None:
        real = xp.ones(targets.shape, dtype=dtype)
    else:
        real = (targets != pad_id).astype(dtype)
    count = real.sum()
    return real / xp.maximum(count, 1.0)


# a pair for its device version (layers/loss_device.py); the reference is fast on a CPU
token_weights = kernels.pair(token_weights_reference, token_weights_reference,
                             device=token_weights_device)


def smoothed_targets(targets, vocab_size, eps, dtype=None):
    """q = (1 - eps) * one_hot(targets) + eps / V, shape (..., V): the target
    distribution of label smoothing, spelled out (``dtype``: default the
    backend's)."""
    xp = backend.get_xp()
    one_hot = (targets[..., None] == xp.arange(vocab_size)).astype(dtype or backend.get_dtype())
    return one_hot * (1.0 - eps) + eps / vocab_size


# The loss and its gradient are kernel pairs. Every version returns the loss
# with exps = exp(logits - shift) and their row sums, for the backward's
# p = softmax(logits) = exps / total: the reference shifts each row by its
# maximum, the fast version by 0 where that is safe (below). The device
# version returns the exps named, not formed (``loss_device.ShiftedLogits``):
# ``exponentials(exps)`` is the array either way.

# Without a shift, exp(logits) is kept where every row's sum of exponentials
# lies within exp(-60) and exp(60). Then no row's largest logit is above 60
# (its exponential is part of the sum), so exp overflowed nowhere, and none
# is below -60 - log V, so no row lost everything to underflow: with a
# vocabulary of a million, exp(-74) is still a normal float32 number (the
# smallest is about exp(-87)). A NaN logit makes its row's sum NaN, which
# fails the test too.
UNSHIFTED_RANGE = 60.0


def smoothed_cross_entropy_reference(logits, targets, weights, eps, exps_buffer=None):
    """(loss, exps, total): loss = sum_t weight_t * (-sum_v q_tv log p_tv).

    Inputs:
        logits: (..., V), targets: (...) ids, weights: (...) 1/count or 0
        exps_buffer: ignored here; the fast version writes exps into it
    """
    xp = backend.get_xp()
    shifted = logits - logits.max(axis=-1, keepdims=True)  # (..., V)
    exps = xp.exp(shifted)
    total = exps.sum(axis=-1, keepdims=True)  # (..., 1)
    log_p = shifted - xp.log(total)  # log-softmax, by log-sum-exp
    q = smoothed_targets(targets, logits.shape[-1], eps, logits.dtype)
    per_token = -(q * log_p).sum(axis=-1)  # (...)
    return xp.asarray((per_token * weights).sum()), exps, total


def smoothed_cross_entropy_fast(logits, targets, weights, eps, exps_buffer):
    """The reference's loss with no (..., V) array but exps, written into
    ``exps_buffer`` (the layer's, the same from step to step) and no q:
    only two statistics of log p are needed, the target's log p and the
    mean log p over the vocabulary,

        loss_t = (1 - eps) * (-log p_target) + eps * mean_v(-log p_v),

    and the sums over V are matrix products (minitrans.ops.sums).

    On the CPU the logits are usually not shifted at all: log-sum-exp holds
    for any shift, so exp is first taken of the logits themselves, and kept
    where every row's sum of exponentials lies within exp(+-UNSHIFTED_RANGE)
    (above). That saves a pass over the (..., V) logits, the largest array
    of a step, which the row maxima would take. Otherwise (and on a
    device, where deciding would make the CPU wait) each row is shifted by
    its maximum, as in the reference. Timed against the reference by
    ``python benchmarks/kernels.py``.
    """
    xp = backend.get_xp()
    # ids out of range are refused by the layer once the loss is known;
    # until then they must not index outside the logits
    targets = xp.clip(targets, 0, logits.shape[-1] - 1)
    unshifted = None if backend.on_device() else unshifted_exps(logits, exps_buffer)
    if unshifted is None:  # each row shifted by its maximum, as in the reference
        shifted = xp.subtract(logits, logits.max(axis=-1, keepdims=True), out=exps_buffer)
    else:
        shifted = logits  # shift 0: the buffer already holds exp(logits)
    target_shifted = xp.take_along_axis(shifted, targets[..., None], axis=-1)[..., 0]
    # without smoothing the mean is not needed: a pass over (..., V) saved
    mean_shifted = mean_last_fast(shifted)[..., 0] if eps else 0.0
    if unshifted is None:
        exps = xp.exp(shifted, out=exps_buffer)  # over shifted itself
        total = sum_last_fast(exps)
    else:
        exps, total = unshifted
    log_total = xp.log(total[..., 0])
    per_token = (1.0 - eps) * (log_total - target_shifted)  # (1 - eps) * (-log p_target)
    if eps:
        per_token += eps * (log_total - mean_shifted)  # eps * mean_v(-log p_v)
    return xp.asarray((per_token * weights).sum()), exps, total


def unshifted_exps(logits, exps_buffer):
    """(exps, total): exp(logits) in ``exps_buffer`` and its row sums, (..., 1),
    where no shift is needed (every row's sum within exp(+-UNSHIFTED_RANGE));
    else None, and the buffer is scratch."""
    xp = backend.get_xp()
    with backend.overflow_ignored():  # an overflow fails the test below: shifted instead
        exps = xp.exp(logits, out=exps_buffer)
    total = sum_last_fast(exps)
    low, high = math.exp(-UNSHIFTED_RANGE), math.exp(UNSHIFTED_RANGE)
    return (exps, total) if bool(((total >= low) & (total <= high)).all()) else None


def smoothed_cross_entropy_backward_reference(dloss, exps, total, targets, weights, eps):
    """dlogits = (p - q) * weight * dloss, (..., V)."""
    p = exponentials(exps) / total
    q = smoothed_targets(targets, p.shape[-1], eps, p.dtype)
    return (p - q) * (weights[..., None] * dloss)


def smoothed_cross_entropy_backward_fast(dloss, exps, total, targets, weights, eps):
    """The reference's numbers without forming q or p: dlogits =
    exps * (weight / total) - weight * eps / V, less weight * (1 - eps) at
    each row's target: two passes over the (..., V) array. Timed against
    the reference by ``python benchmarks/kernels.py``."""
    xp = backend.get_xp()
    exps = exponentials(exps)  # the array, whichever version's forward made exps
    vocab_size = exps.shape[-1]
    row_weights = weights[..., None] * dloss  # (..., 1)
    dlogits = exps * (row_weights / total)  # p * weight
    if eps:  # a pass over (..., V) that no smoothing needs not make
        dlogits -= row_weights * (eps / vocab_size)
    rows = dlogits.reshape(-1, vocab_size)  # a view: writes reach dlogits
    rows[xp.arange(rows.shape[0]), targets.reshape(-1)] -= row_weights.reshape(-1) * (1.0 - eps)
    return dlogits


# the device versions, fused kernels: layers/loss_device.py
smoothed_cross_entropy = kernels.pair(
    smoothed_cross_entropy_reference, smoothed_cross_entropy_fast,
    device=smoothed_cross_entropy_device,
)
smoothed_cross_entropy_backward = kernels.pair(
    smoothed_cross_entropy_backward_reference, smoothed_cross_entropy_backward_fast,
    device=smoothed_cross_entropy_backward_device,
)

"""The output side: log-softmax and cross-entropy with label smoothing."""

from minitrans import backend, checks
from minitrans.module import Module
from minitrans.softmax import log_softmax, log_softmax_backward


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
        if pad_id is not None and (isinstance(pad_id, bool) or not isinstance(pad_id, int) or pad_id < 0):
            raise ValueError(f"pad_id: expected a non-negative integer or None, got {pad_id!r}")
        self.eps = float(label_smoothing)
        self.pad_id = pad_id

    def forward(self, logits, targets):
        checks.check_array("logits", logits, min_ndim=1)
        vocab_size = logits.shape[-1]
        checks.check_token_ids("targets", targets, vocab_size)
        checks.check_same_shape("targets", targets, logits.shape[:-1])
        xp = backend.get_xp()

        log_probs = log_softmax(logits)  # (..., V)
        target_log_prob = xp.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
        per_token = -(1.0 - self.eps) * target_log_prob - self.eps * log_probs.mean(axis=-1)
        weights = self._weights(targets, logits.dtype)  # 1/count at real tokens, 0 at padding
        self.cache = (log_probs, targets, weights)
        return xp.asarray((per_token * weights).sum())

    def backward(self, dloss=1.0):
        log_probs, targets, weights = self.saved()
        if hasattr(dloss, "shape"):
            checks.check_same_shape("dloss", dloss, ())  # the loss is a scalar
            dloss = dloss.astype(log_probs.dtype)  # a float64 0-d array would upcast
        xp = backend.get_xp()
        vocab_size = log_probs.shape[-1]
        one_hot = (targets[..., None] == xp.arange(vocab_size)).astype(log_probs.dtype)  # (..., V)
        smoothed = one_hot * (1.0 - self.eps) + self.eps / vocab_size  # q
        return (xp.exp(log_probs) - smoothed) * (weights[..., None] * dloss)

    def _weights(self, targets, dtype):
        """1 / (number of non-padding targets) at each real target, 0 at padding."""
        xp = backend.get_xp()
        if self.pad_id is None:
            real = xp.ones(targets.shape, dtype=dtype)
        else:
            real = (targets != self.pad_id).astype(dtype)
        count = real.sum()
        return real / xp.maximum(count, 1.0)

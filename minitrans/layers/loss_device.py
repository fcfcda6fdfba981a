"""The label-smoothed cross-entropy's device versions: ``layers.loss`` has
the layer, the reference versions that read as its equations and the fast
ones for the CPU; here the work is fused into a few kernels, each at most
one reduction (``minitrans.core.fusion``), for a GPU, where a launch costs
more than its arithmetic.

With m = max_v logit_v and Z = sum_v exp(logit_v - m) for each row, and
q_v = (1 - eps) [v = target] + eps / V the smoothed target (sum_v q_v = 1),

    -log p_v = log Z - (logit_v - m)
    loss_t   = -sum_v q_v log p_v = log Z - sum_v q_v (logit_v - m)
    dlogits  = (exp(logit - m) / Z - q) * weight * dloss

Forward: four kernels, each one reduction: the row maxima, the row sums of
exponentials, the rows' q-weighted sums of the shifted logits (q formed in
the kernel from the ids 0..V-1, made once for each V: no gather of the
targets, so no target needs clipping into [0, V) first) and the sum of
the loss over the tokens. No (..., V) array is written: the exponentials
are not kept but named, ``ShiftedLogits(logits, m)``, and the backward,
one fused kernel, computes them again where it needs them.
The weights of the tokens, 1 / (number of real targets) at each real
target, take two kernels: the count, a fused reduction, and the division.
Each row is shifted by its maximum, as in the reference: on a GPU the
fast version's test for a row that needs no shift would make the CPU wait.
"""

from collections import namedtuple

from minitrans.core import backend, fusion

ShiftedLogits = namedtuple("ShiftedLogits", "logits shift")
ShiftedLogits.__doc__ = """The exponentials exp(logits - shift) that a forward
did not keep, named instead: ``exponentials`` forms them, a fused backward
computes them inside its kernel. ``shift``: (..., 1), each row's maximum."""


def exponentials(exps):
    """The (..., V) array exp(logits - shift) that ``exps`` is or names."""
    if isinstance(exps, ShiftedLogits):
        return backend.get_xp().exp(exps.logits - exps.shift)
    return exps


@fusion.fused("cross_entropy_exp_total")
def exp_total(logits, row_max):
    """Z = sum_v exp(logit_v - m), shape (...): the exponentials are not kept."""
    xp = backend.get_xp()
    return xp.sum(xp.exp(logits - row_max), axis=-1)


@fusion.fused("cross_entropy_weighted_logits")
def weighted_shifted_logits(logits, row_max, ids, target, target_weight, other_weight, floor):
    """sum_v q_v (logit_v - m), shape (...): q_v is ``target_weight`` where
    v is the target, ``other_weight`` elsewhere. Without smoothing the
    other weight is 0 and ``floor`` 0.0: a logit of -inf there, a
    probability of 0, would give 0 * -inf = NaN, so each shifted logit
    (never above 0) is raised to the floor first. With smoothing ``floor``
    is -inf and changes nothing. (q by ``where``: a comparison times a
    Python number would be float64.)"""
    xp = backend.get_xp()
    shifted = logits - row_max
    others = xp.maximum(shifted, floor) * other_weight
    return xp.sum(xp.where(ids == target, shifted * target_weight, others), axis=-1)


@fusion.fused("cross_entropy_loss")
def weighted_loss(total, weighted_logits, weights):
    """sum over tokens of weight * loss_t, loss_t = log Z - sum_v q_v (logit_v - m):
    one reduction over every token (a 0-d array)."""
    xp = backend.get_xp()
    return xp.sum(weights * (xp.log(total) - weighted_logits))


def smoothed_cross_entropy_device(logits, targets, weights, eps, exps_buffer=None):
    """(loss, exps, total) as the reference returns them, in four kernels,
    with ``exps`` a ``ShiftedLogits``, not an array; ``exps_buffer`` is
    not used. Targets outside [0, V) are never indexed with: their rows'
    weighted sums leave out the (1 - eps) of the target (the layer then
    refuses them)."""
    xp = backend.get_xp()
    vocab_size = logits.shape[-1]
    row_max = logits.max(axis=-1, keepdims=True)  # (..., 1)
    total = exp_total(logits, row_max)  # (...)
    other_weight = eps / vocab_size
    floor = -float("inf") if eps else 0.0
    weighted = weighted_shifted_logits(logits, row_max, vocabulary_ids(vocab_size),
                                       targets[..., None], 1.0 - eps + other_weight,
                                       other_weight, floor)
    loss = weighted_loss(total, weighted, weights)
    return xp.asarray(loss), ShiftedLogits(logits, row_max), total[..., None]


@fusion.fused("cross_entropy_backward")
def smoothed_cross_entropy_gradient(logits, row_max, total, ids, target, row_weight, dloss, eps,
                                    eps_per_id):
    """dlogits = (p - q) * weight * dloss, p = exp(logit - m) / Z,
    q = (1 - eps) [v = target] + eps / V: the exponentials computed again
    here, not read from memory. (q by ``where``: a comparison times a
    Python number would be float64.)"""
    xp = backend.get_xp()
    p = xp.exp(logits - row_max) / total
    p_less_q = xp.where(ids == target, p - (1.0 - eps + eps_per_id), p - eps_per_id)
    return p_less_q * (row_weight * dloss)


@fusion.fused("cross_entropy_backward_kept")
def smoothed_cross_entropy_gradient_kept(exps, total, ids, target, row_weight, dloss, eps,
                                         eps_per_id):
    """``smoothed_cross_entropy_gradient`` from exponentials a forward kept
    (the reference's or the fast version's): p = exps / Z."""
    p = exps / total
    p_less_q = backend.get_xp().where(ids == target, p - (1.0 - eps + eps_per_id), p - eps_per_id)
    return p_less_q * (row_weight * dloss)


def smoothed_cross_entropy_backward_device(dloss, exps, total, targets, weights, eps):
    """The reference's dlogits as one fused kernel: from the logits where
    ``exps`` is a ``ShiftedLogits`` (the device forward's), else from the
    array of exponentials a forward kept."""
    kept = not isinstance(exps, ShiftedLogits)
    vocab_size = exps.shape[-1] if kept else exps.logits.shape[-1]
    ids = vocabulary_ids(vocab_size)  # v, to compare with each row's target
    rest = (ids, targets[..., None], weights[..., None], dloss, eps, eps / vocab_size)
    if kept:
        return smoothed_cross_entropy_gradient_kept(exps, total, *rest)
    return smoothed_cross_entropy_gradient(exps.logits, exps.shift, total, *rest)


_vocabularies = {}  # (backend name, V) -> the ids 0 .. V-1, made once: a constant


def vocabulary_ids(vocab_size):
    """arange(V), kept from step to step: on a device making it anew is a
    launch every step. Read only: it is shared."""
    key = (backend.backend_name(), vocab_size)
    if key not in _vocabularies:
        _vocabularies[key] = backend.get_xp().arange(vocab_size)
    return _vocabularies[key]


# ------------------------------------------------ the weights of the tokens


@fusion.fused("cross_entropy_real_count")
def real_count(targets, pad_id):
    """How many targets are not ``pad_id``, at least 1 (a 0-d integer array)."""
    xp = backend.get_xp()
    return xp.maximum(xp.sum(targets != pad_id), 1)


_weight_kernels = {}  # dtype name -> the fused division, which casts to that dtype


def real_weights(dtype):
    """The fused kernel (targets, pad_id, count) -> 1 / count at each real target,
    0 at padding, in ``dtype``: a kernel casts to a dtype written in its body."""
    name = backend.get_xp().dtype(dtype).name
    if name not in _weight_kernels:
        def weights(targets, pad_id, count):
            return (targets != pad_id).astype(name) / count.astype(name)
        weights.__doc__ = f"1 / count at each target that is not pad_id, 0 elsewhere, {name}."
        _weight_kernels[name] = fusion.fused(f"cross_entropy_weights_{name}")(weights)
    return _weight_kernels[name]


def token_weights_device(targets, pad_id, dtype):
    """The reference's weights in two kernels: the count and the division
    (one filling kernel without padding)."""
    if pad_id is None:
        return backend.get_xp().full(targets.shape, 1.0 / max(targets.size, 1), dtype=dtype)
    return real_weights(dtype)(targets, pad_id, real_count(targets, pad_id))


@fusion.fused("cross_entropy_bad_values")
def bad_value_count(targets, vocab_size, loss):
    """How many targets lie outside [0, V), or every target where the loss is
    not finite: 0 when all is well (a 0-d integer array)."""
    xp = backend.get_xp()
    return xp.sum((targets < 0) | (targets >= vocab_size) | ~xp.isfinite(loss))

"""The label-smoothed cross-entropy's device versions: ``layers.loss`` has
the layer, the reference versions that read as its equations and the fast
ones for the CPU; here the element-wise work between the row reductions is
fused into one kernel at a time (``minitrans.core.fusion``), for a GPU,
where a launch costs more than its arithmetic.

With m = max_v logit_v and Z = sum_v exp(logit_v - m) for each row,

    log p_v = logit_v - m - log Z
    loss_t  = (1 - eps) * (-log p_target) + eps * mean_v(-log p_v)
    dlogits = (exp(logit - m) / Z - q) * weight * dloss,
              q = (1 - eps) * [v = target] + eps / V

Forward: three row reductions, a gather, a fused kernel and a fused sum
of the loss over the tokens; backward: one fused kernel (with the ids
0..V-1 it compares with, made once for each V). The weights of the
tokens, 1 / (number of real targets) at each real target, take two
kernels: the count, a fused reduction, and the division.
Each row is shifted by its maximum, as in the reference: on a GPU the
fast version's test for a row that needs no shift would make the CPU wait.
"""

from minitrans.core import backend, fusion


@fusion.fused("cross_entropy_exp")
def shifted_exp(logits, row_max):
    """exps = exp(logits - m): the largest of each row is exp(0) = 1."""
    return backend.get_xp().exp(logits - row_max)


@fusion.fused("cross_entropy_loss")
def weighted_loss(total, row_max, target_logit, mean_logit, weights, eps):
    """sum over tokens of weight * loss_t, with -log p_v = log Z - (logit_v - m):
    one reduction over every token (a 0-d array)."""
    xp = backend.get_xp()
    log_total = xp.log(total)
    target_term = log_total - (target_logit - row_max)  # -log p_target
    mean_term = log_total - (mean_logit - row_max)  # mean_v(-log p_v)
    return xp.sum(weights * ((1.0 - eps) * target_term + eps * mean_term))


def smoothed_cross_entropy_device(logits, targets, weights, eps, exps_buffer=None):
    """(loss, exps, total) as the reference returns them; ``exps_buffer`` is
    not used: the fused kernel writes a fresh array."""
    xp = backend.get_xp()
    row_max = logits.max(axis=-1, keepdims=True)  # (..., 1)
    exps = shifted_exp(logits, row_max)
    total = exps.sum(axis=-1, keepdims=True)  # (..., 1)
    target_logit = xp.take_along_axis(logits, targets[..., None], axis=-1)
    # without smoothing the mean is not needed: a pass over (..., V) saved
    mean_logit = logits.mean(axis=-1, keepdims=True) if eps else 0.0
    loss = weighted_loss(total, row_max, target_logit, mean_logit, weights[..., None], eps)
    return xp.asarray(loss), exps, total


@fusion.fused("cross_entropy_backward")
def smoothed_cross_entropy_gradient(exps, total, ids, target, row_weight, dloss, eps, eps_per_id):
    """dlogits = (p - q) * weight * dloss, p = exps / Z, q = (1 - eps) [v = target] + eps / V.
    (q by ``where``: a comparison times a Python number would be float64.)"""
    p = exps / total
    p_less_q = backend.get_xp().where(ids == target, p - (1.0 - eps + eps_per_id), p - eps_per_id)
    return p_less_q * (row_weight * dloss)


def smoothed_cross_entropy_backward_device(dloss, exps, total, targets, weights, eps):
    """The reference's dlogits as one fused kernel."""
    vocab_size = exps.shape[-1]
    ids = vocabulary_ids(vocab_size)  # v, to compare with each row's target
    return smoothed_cross_entropy_gradient(exps, total, ids, targets[..., None],
                                           weights[..., None], dloss, eps, eps / vocab_size)


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

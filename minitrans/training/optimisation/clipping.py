"""Gradient clipping by the global norm: all of a model's gradients scaled
together when their joint length passes a limit, so that one bad batch
cannot throw the weights far (``TrainConfig.clip_norm``, 1.0 by default)."""

import math

from minitrans.core import backend, checks


def global_grad_norm(model):
    """sqrt(sum of g^2 over every gradient of the model), a Python float.
    ``model``: anything with ``named_parameters()``, a model or an optimiser.

    The sum of squares of each gradient stays on the device and only their
    total comes back: one wait for the GPU, not one per parameter. The total
    is added up in the gradients' dtype (float32 in training; a float64 array
    would upcast the step), the same norm to about 1e-7."""
    xp = backend.get_xp()
    squares = [xp.vdot(grad, grad) for _, _, grad in model.named_parameters()]  # BLAS, one pass
    return math.sqrt(float(xp.stack(squares).sum())) if squares else 0.0


def clip_grad_norm(model, max_norm):
    """Scale all gradients by max_norm / norm when their global norm exceeds
    max_norm, keeping their direction; ``max_norm`` None clips nothing.
    ``model``: a model, or its optimiser (the same parameters, without
    walking the tree). Returns the norm before clipping."""
    # NaN would never clip (every comparison is False) and 0 would zero every gradient
    checks.check_number("max_norm", max_norm, low=0, low_open=True, allow_none=True)
    norm = global_grad_norm(model)
    if max_norm is not None and math.isfinite(norm) and norm > max_norm:
        scale = max_norm / norm
        for _, _, grad in model.named_parameters():
            grad *= scale
    return norm

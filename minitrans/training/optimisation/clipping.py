"""Gradient clipping by the global norm: all of a model's gradients scaled
together when their joint length passes a limit, so that one bad batch
cannot throw the weights far (``TrainConfig.clip_norm``, 1.0 by default).

On a device, where every gradient of a small model is a view of one flat
array (``optimisation.flat_state``, reached through the optimiser's
``flat_gradient()``), the norm is one reduction over that array; and the
clipping, given the optimiser, is no pass of its own: Adam records the
scale and its one kernel multiplies each gradient by it as it reads it
(``Adam.scale_gradients``). One launch, where each gradient apart would be
two of its own."""

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
    flat = flat_gradient(model)
    if flat is not None:  # a scale the optimiser has yet to apply counts in
        return math.sqrt(float(xp.vdot(flat, flat))) * getattr(model, "gradient_scale", 1.0)
    squares = [xp.vdot(grad, grad) for _, _, grad in model.named_parameters()]  # BLAS, one pass
    return math.sqrt(float(xp.stack(squares).sum())) if squares else 0.0


def clip_grad_norm(model, max_norm):
    """Scale all gradients by max_norm / norm when their global norm exceeds
    max_norm, keeping their direction; ``max_norm`` None clips nothing.
    ``model``: a model, or its optimiser (the same parameters, without
    walking the tree; it scales them: on a device Adam applies the scale in
    its next step, as it reads the gradients). Returns the norm before
    clipping."""
    # NaN would never clip (every comparison is False) and 0 would zero every gradient
    checks.check_number("max_norm", max_norm, low=0, low_open=True, allow_none=True)
    norm = global_grad_norm(model)
    if max_norm is not None and math.isfinite(norm) and norm > max_norm:
        scale = max_norm / norm
        if hasattr(model, "scale_gradients"):  # an optimiser
            model.scale_gradients(scale)
        else:
            for _, _, grad in model.named_parameters():
                grad *= scale
    return norm


def flat_gradient(model):
    """On a device, the flat array that all of ``model``'s gradients are
    views of, where it has one (an Adam optimiser after its first flat
    step); otherwise None. The CPU keeps the per-gradient sums: their order
    of additions gives the numbers it always has."""
    if not backend.on_device() or not hasattr(model, "flat_gradient"):
        return None
    return model.flat_gradient()

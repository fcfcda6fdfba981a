"""Adam's step on a device, as fused kernels (``minitrans.core.fusion``).

On a GPU every array operation is a kernel launch. ``adam_update_device``,
the device version of the kernel pair ``adam.adam_update``, runs the
update of one parameter as two kernels: the moments with the step, then the
parameter. ``adam_update_flat_device`` runs the same two bodies as ONE
kernel over flat arrays that hold every parameter, gradient, m and v of a
small model at once (``optimisation.flat_state``): the whole update in one
launch, where one kernel per parameter would be 82 for the tiny config.
"""

from minitrans.core import backend, fusion


@fusion.fused("adam_step")
def adam_step_device(grad, m, v, beta1, beta2, lr, m_hat_scale, v_hat_scale, eps):
    """m and v updated in place, and the step returned, in one kernel:

        m <- beta1 m + (1 - beta1) g,    v <- beta2 v + (1 - beta2) g^2
        step = lr * m_hat / (sqrt(v_hat) + eps),
        m_hat = m * m_hat_scale,  v_hat = v * v_hat_scale

    with the bias corrections m_hat_scale = 1 / (1 - beta1^t) and
    v_hat_scale = 1 / (1 - beta2^t) passed in as numbers, or as arrays of
    one number in grad's dtype (``Adam.flat_device_step``: the same
    numbers, read from device memory)."""
    m += (1.0 - beta1) * (grad - m)  # beta1 m + (1 - beta1) g, without a second read of m
    v += (1.0 - beta2) * (grad * grad - v)
    return lr * (m * m_hat_scale) / (backend.get_xp().sqrt(v * v_hat_scale) + eps)


@fusion.fused("adam_apply_step")
def apply_adam_step_device(param, step, decay):
    """w <- w - step - decay * w, in place: decay = lr * weight_decay, AdamW's."""
    param -= step + decay * param


@fusion.fused("adam_flat_update")
def adam_update_flat_device(param, grad, m, v, decay_mask, beta1, beta2, lr, m_hat_scale,
                            v_hat_scale, eps, decay, grad_scale):
    """``adam_step_device`` and then ``apply_adam_step_device``, in one
    kernel, with each number's decay ``decay * decay_mask``: decay_mask is 1
    where a number's parameter is decayed and 0 where it is not
    (``flat_state.is_decayed``). The step never goes to memory.

    The gradient is multiplied by ``grad_scale`` as it is read (gradient
    clipping's scale, 1 where nothing was clipped): the same product that
    scaling the gradient in memory first would store, without that pass."""
    grad = grad * grad_scale
    step = adam_step_device.body(grad, m, v, beta1, beta2, lr, m_hat_scale, v_hat_scale, eps)
    apply_adam_step_device.body(param, step, decay * decay_mask)


def adam_step_values(t, lr, betas, weight_decay, grad_scale=1.0):
    """The numbers of step t that change with the step: lr, the bias
    corrections 1 / (1 - beta1^t) and 1 / (1 - beta2^t), AdamW's decay
    factor lr * weight_decay, and the scale of the gradients (gradient
    clipping's; 1.0 where nothing was clipped)."""
    beta1, beta2 = betas
    return [lr, 1.0 / (1.0 - beta1**t), 1.0 / (1.0 - beta2**t), lr * weight_decay, grad_scale]


def adam_step_of(grad, m, v, t, lr, betas, eps):
    """``adam_step_device`` at step t: the bias corrections worked out here."""
    lr, m_hat_scale, v_hat_scale = adam_step_values(t, lr, betas, 0.0)[:3]
    return adam_step_device(grad, m, v, *betas, lr, m_hat_scale, v_hat_scale, eps)


def adam_update_device(param, grad, m, v, t, lr, betas, eps, weight_decay=0.0, scratch=None):
    """The reference's step as two fused kernels, the moments with the step
    and then the parameter (``scratch`` is ignored: the step is the first
    kernel's output)."""
    apply_adam_step_device(param, adam_step_of(grad, m, v, t, lr, betas, eps), lr * weight_decay)

"""Solutions to the exercises of lesson 13 (13_adam_and_warmup): one Adam
step, the paper's learning-rate schedule and clipping by the global norm,
in plain NumPy."""

import numpy as np


def adam_step(param, grad, m, v, t, lr, beta1, beta2, eps):
    """One Adam step at step t = 1, 2, ... (m and v start at zero at t = 1).

    param, grad, m, v: arrays of one shape. Returns (new_param, new_m, new_v),
    new arrays of that shape; the inputs are left as they are.
    """
    m = beta1 * m + (1 - beta1) * grad  # running mean of g
    v = beta2 * v + (1 - beta2) * grad**2  # running mean of g^2
    m_hat = m / (1 - beta1**t)  # bias corrections: m, v started at 0
    v_hat = v / (1 - beta2**t)
    return param - lr * m_hat / (np.sqrt(v_hat) + eps), m, v


def learning_rate(steps, d_model, warmup, factor):
    """factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) for each
    step of ``steps`` (int array, steps count from 1); same shape, floats."""
    steps = np.asarray(steps, dtype=np.float64)  # floats: 10^9 squared overflows no int
    return factor * d_model**-0.5 * np.minimum(steps**-0.5, steps * warmup**-1.5)


def clip_by_global_norm(grads, max_norm):
    """grads: a list of arrays of any shapes. If the norm of all of them
    together, sqrt(sum of every g^2), exceeds max_norm, return each times
    max_norm / norm (same direction, norm max_norm); else return them as
    they are. Returns a list, in the order of grads."""
    norm = np.sqrt(sum(float(np.sum(g * g)) for g in grads))
    if norm <= max_norm:
        return list(grads)
    return [g * (max_norm / norm) for g in grads]

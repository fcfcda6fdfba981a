"""The learning rate of training: the paper's (§5.3), warmup then 1 / sqrt(step), and
GPT's, warmup then a cosine down to a floor."""

import math

from minitrans.core import checks


def transformer_lr(step, d_model, warmup, factor=1.0):
    """The paper's schedule (§5.3):

        lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)

    It rises linearly for ``warmup`` steps, peaks at
    factor * (d_model * warmup)^-0.5, then decays as 1 / sqrt(step).
    Steps count from 1.
    """
    checks.check_int("step", step, low=1)  # the schedule counts steps from 1
    checks.check_positive_int("d_model", d_model)
    checks.check_positive_int("warmup", warmup)
    checks.check_number("factor", factor, low=0, low_open=True)  # NaN or inf: NaN weights
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def cosine_lr(step, peak, min_lr, warmup, total):
    """GPT's schedule (as in nanoGPT): a linear warm-up, then half a cosine.

        step <= warmup:          peak * step / warmup
        warmup < step <= total:  min_lr + (peak - min_lr) * (1 + cos(pi * p)) / 2,
                                 p = (step - warmup) / (total - warmup)
        step > total:            min_lr

    Steps count from 1. The cosine starts at peak (p = 0, step warmup) and
    ends at min_lr (p = 1, step total); it falls slowly at both ends and
    fastest halfway, where the rate is the mean of peak and min_lr.
    """
    checks.check_int("step", step, low=1)  # the schedule counts steps from 1
    checks.check_number("peak", peak, low=0, low_open=True)
    checks.check_number("min_lr", min_lr, low=0, high=peak)
    checks.check_int("warmup", warmup, low=0)
    checks.check_int("total", total, low=max(warmup, 1))
    if step <= warmup:
        return peak * step / warmup
    if step >= total:
        return min_lr
    progress = (step - warmup) / (total - warmup)
    return min_lr + (peak - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))

"""The learning rate of the paper's training (§5.3): warmup, then 1 / sqrt(step)."""

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

"""The training exercises (lessons 13 and 21): each checker passes its
solution on many seeds and fails a learner's typical slips in the case that
is there to catch them."""

import numpy as np
import pytest

from minitrans_course import exercises_training as training
from minitrans_course.exercises import CHECKERS
from tests.course.conftest import assert_fails_in_case

# ---- slips a learner might make


def _adam(
    param, grad, m, v, t, lr, beta1, beta2, eps, correct=True, eps_inside=False, paper_betas=False
):
    if paper_betas:  # the paper's constants written in, whatever is passed
        beta1, beta2, eps = 0.9, 0.98, 1e-9
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad**2
    m_hat, v_hat = (m / (1 - beta1**t), v / (1 - beta2**t)) if correct else (m, v)
    denominator = np.sqrt(v_hat + eps) if eps_inside else np.sqrt(v_hat) + eps
    return param - lr * m_hat / denominator, m, v


def _rate(steps, d_model, warmup, factor, use_max=False, use_factor=True, width=True):
    steps = np.asarray(steps, dtype=np.float64)
    pick = np.maximum if use_max else np.minimum
    scale = (factor if use_factor else 1.0) * (d_model**-0.5 if width else 1.0)
    return scale * pick(steps**-0.5, steps * warmup**-1.5)


def _clip(grads, max_norm, per_array=False, always=False, sum_of_norms=False):
    if per_array:
        return [g * min(1.0, max_norm / max(np.linalg.norm(g), 1e-30)) for g in grads]
    norms = [np.linalg.norm(g) for g in grads]
    norm = sum(norms) if sum_of_norms else np.sqrt(sum(n * n for n in norms))
    if norm <= max_norm and not always:
        return list(grads)
    return [g * (max_norm / max(norm, 1e-30)) for g in grads]


def _combine(grads, counts, equal=False, divide=True):
    total = sum(counts)
    weights = (
        [1 / len(grads)] * len(grads) if equal else [n / total if divide else n for n in counts]
    )
    return sum(w * g for w, g in zip(weights, grads))


WRONG = [
    ("adam_step", lambda *a: _adam(*a, correct=False), "step t = 1, m = v = 0"),
    ("adam_step", lambda *a: _adam(*a, eps_inside=True), "tiny gradients (1e-6): eps counts"),
    ("adam_step", lambda *a: _adam(*a, paper_betas=True), "other betas and eps"),
    ("learning_rate", lambda *a: _rate(*a, use_max=True), "random steps"),
    ("learning_rate", lambda *a: _rate(*a, width=False), "random steps"),
    ("learning_rate", lambda *a: _rate(*a, use_factor=False), "a factor"),
    ("clip_by_global_norm", lambda *a: _clip(*a, per_array=True), "over the norm"),
    ("clip_by_global_norm", lambda *a: _clip(*a, always=True), "under the norm: unchanged"),
    ("clip_by_global_norm", lambda *a: _clip(*a, sum_of_norms=True), "over the norm"),
    ("combine_shard_gradients", lambda *a: _combine(*a, equal=True), "shards of different sizes"),
    ("combine_shard_gradients", lambda *a: _combine(*a, divide=False), "shards of different sizes"),
    ("combine_shard_gradients", _combine, "no real token in the batch"),  # 0 / 0 is NaN
]


@pytest.mark.parametrize("name, wrong, case", WRONG, ids=[f"{n}-{c}" for n, _, c in WRONG])
def test_a_typical_mistake_fails_in_its_case(name, wrong, case):
    assert_fails_in_case(CHECKERS[name], wrong, case)


def test_the_references_agree_with_minitrans():
    """The references are worked out by hand, the same numbers as minitrans's
    adam_update, transformer_lr and clip_grad_norm conventions."""
    from minitrans.core import backend
    from minitrans.training.optimisation.schedule import transformer_lr
    from minitrans.training.optimisation.adam import adam_update_reference

    rng = np.random.default_rng(0)
    w, g, m, v = (rng.standard_normal(5) for _ in range(4))
    v = v**2
    expected = training.adam_step(w, g, m, v, 3, 0.01, 0.9, 0.98, 1e-9)
    with backend.using("numpy", dtype="float64"):
        adam_update_reference(w, g, m, v, 3, 0.01, (0.9, 0.98), 1e-9)
    assert all(np.allclose(a, b, rtol=1e-12) for a, b in zip(expected, (w, m, v)))
    steps = [1, 7, 400, 401, 10**6]
    rates = training.learning_rate(np.array(steps), 64, 400, 2.0)
    assert np.allclose(rates, [transformer_lr(s, 64, 400, 2.0) for s in steps], rtol=1e-13)
    clipped = training.clip_by_global_norm([np.full(4, 3.0), np.full(9, 4.0 / 3.0)], 1.0)
    assert np.isclose(np.sqrt(sum(float((c**2).sum()) for c in clipped)), 1.0)

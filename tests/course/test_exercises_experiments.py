"""Lesson 18's exercise, perplexity: the slips a learner is likely to make
fail in the case that shows them (that the solution passes on seeds 0 to 20
is tested with every checker's in test_exercises.py)."""

import math

import numpy as np
import pytest

from minitrans.core import backend
from minitrans.layers.loss import LabelSmoothedCrossEntropy
from minitrans_course.exercises import CHECKERS
from minitrans_course.exercises_experiments import check_perplexity, perplexity


def test_the_checker_is_registered():
    assert CHECKERS["perplexity"] is check_perplexity


def test_the_reference_agrees_with_minitrans_loss():
    """exp of minitrans's unsmoothed loss (token-weighted, padding ignored)
    is the reference's perplexity: two ways, one number."""
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((3, 5, 7))
    targets = rng.integers(1, 7, size=(3, 5))
    targets[1, 3:] = 0
    targets[2, 1:] = 0
    with backend.using("numpy", dtype="float64"):
        loss = float(LabelSmoothedCrossEntropy(0.0, pad_id=0).forward(logits, targets))
    assert math.isclose(perplexity(logits, targets, 0), math.exp(loss), rel_tol=1e-12)


def _log_probs(logits):
    z = logits.astype(np.float64) - logits.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def _picked(logits, targets):
    return np.take_along_axis(_log_probs(logits), targets[..., None], axis=-1)[..., 0]


def _with_padding(logits, targets, pad_id):  # averages the padding's losses too
    return float(np.exp(-_picked(logits, targets).mean()))


def _sentence_mean(logits, targets, pad_id):  # the mean of each sentence's mean
    real = targets != pad_id
    per_sentence = (_picked(logits, targets) * real).sum(axis=1) / real.sum(axis=1)
    return float(np.exp(-per_sentence.mean()))


def _pad_zero(logits, targets, pad_id):  # padding taken to be id 0 whatever pad_id says
    real = targets != 0
    return float(np.exp(-_picked(logits, targets)[real].mean()))


def _no_shift(logits, targets, pad_id):  # exp(1000) overflows: inf / inf
    z = logits.astype(np.float64)
    log_probs = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
    return float(np.exp(-picked[targets != pad_id].mean()))


def _no_exp(logits, targets, pad_id):  # the loss, not its perplexity
    return float(-_picked(logits, targets)[targets != pad_id].mean())


@pytest.mark.parametrize(
    "wrong, case",
    [
        (_with_padding, "random logits, padded rows"),
        (_sentence_mean, "random logits, padded rows"),
        (_pad_zero, "pad_id is not 0"),
        (_no_shift, "logits up to 1000"),
        (_no_exp, "random logits, padded rows"),
        (lambda logits, targets, pad_id: 0.0, "random logits, padded rows"),  # the skeleton
    ],
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_typical_slips_fail_in_their_case(wrong, case, seed):
    result = check_perplexity(wrong, quiet=True, seed=seed)
    assert not result.passed and result.case.startswith(f"case '{case}'"), result.message
    assert "Hint" in result.message

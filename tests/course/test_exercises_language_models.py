"""The language-model exercises (lesson 16): each checker passes its
solution on many seeds and fails a learner's typical slips in the case that
is there to catch them."""

import numpy as np
import pytest

from minitrans.core import backend
from minitrans.data.batches import make_lm_batch
from minitrans.decoding.sampling import top_k_filter as minitrans_top_k
from minitrans.ops.softmax import softmax
from minitrans_course import exercises_language_models as lm
from minitrans_course.exercises import CHECKERS
from tests.course.conftest import assert_fails_in_case

NAMES = ["next_token_targets", "top_k_filter"]


def test_the_checkers_are_registered():
    assert sorted(lm.CHECKERS) == NAMES
    assert all(CHECKERS[name] is lm.CHECKERS[name] for name in NAMES)


# ---- slips a learner might make


def _targets(sequences, bos, eos, pad, pad_first=False, no_bos=False):
    rows = [([] if no_bos else [bos]) + list(s) + [eos] for s in sequences]
    width = max(map(len, rows))
    full = np.array([row + [pad] * (width - len(row)) for row in rows])
    if pad_first:  # the lesson's quick ids[:, :-1], ids[:, 1:] of padded rows
        return full[:, :-1], full[:, 1:]
    cut = [(row[:-1], row[1:]) for row in rows]
    return tuple(
        np.array([part[i] + [pad] * (width - 1 - len(part[i])) for part in cut]) for i in (0, 1)
    )


def _top_k(probs, k, ties_kept=False, renormalise=True, smallest=False):
    if ties_kept:  # everything at least the k-th largest value
        kth = -np.sort(-probs, axis=-1)[:, min(k, probs.shape[1]) - 1 : min(k, probs.shape[1])]
        kept = np.where(probs >= kth, probs, 0.0)
    else:
        order = np.argsort(probs if smallest else -probs, axis=-1, kind="stable")
        kept = np.zeros_like(probs)
        np.put_along_axis(kept, order[:, :k], np.take_along_axis(probs, order[:, :k], -1), -1)
    return kept / kept.sum(axis=-1, keepdims=True) if renormalise else kept


WRONG = [
    ("next_token_targets", lambda *a: _targets(*a, pad_first=True), "rows of different lengths"),
    ("next_token_targets", lambda *a: _targets(*a, no_bos=True), "rows of different lengths"),
    ("next_token_targets", lambda s, b, e, p: _targets(s, 1, 2, 0), "other special ids"),
    ("top_k_filter", lambda *a: _top_k(*a, renormalise=False), "random rows"),
    ("top_k_filter", lambda *a: _top_k(*a, smallest=True), "random rows"),
    (
        "top_k_filter",
        lambda *a: _top_k(*a, ties_kept=True),
        "ties: exactly k, the lower index first",
    ),
]


@pytest.mark.parametrize("name, wrong, case", WRONG, ids=[f"{n}-{c}" for n, _, c in WRONG])
def test_a_typical_mistake_fails_in_its_case(name, wrong, case):
    assert_fails_in_case(CHECKERS[name], wrong, case)


def test_the_references_are_what_minitrans_computes():
    """The exercise asks for minitrans's conventions: make_lm_batch's inputs
    and targets, and softmax after top_k_filter on the logits (ties included)."""
    sequences = [[5, 6, 7], [], [8]]
    inputs, targets = lm.next_token_targets(sequences, 1, 2, 0)
    batch = make_lm_batch(sequences)
    assert np.array_equal(inputs, np.asarray(batch.tgt_in))
    assert np.array_equal(targets, np.asarray(batch.tgt_out))
    logits = np.log(np.array([[0.1, 0.2, 0.2, 0.2, 0.2, 0.1], [0.3, 0.1, 0.05, 0.05, 0.2, 0.3]]))
    with backend.using("numpy", dtype="float64"):
        for k in (1, 2, 5, 9):
            filtered = np.asarray(softmax(minitrans_top_k(logits, k)))
            assert np.allclose(lm.top_k_filter(np.exp(logits), k), filtered, rtol=1e-12)

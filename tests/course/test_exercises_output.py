"""The exercise checkers of lessons 10 and 12 (the feed-forward backward, the
label-smoothed loss's gradient, the shifted decoder input and target) pass
the solutions for many seeds and fail the mistakes a learner is likely to
make, each in the case built to show it."""

import pathlib

import numpy as np
import pytest

from minitrans.core import backend
from minitrans.data.batches import make_seq2seq_batch
from minitrans.data.vocab import BOS_ID, EOS_ID, PAD_ID
from minitrans.layers.feedforward import FeedForward
from minitrans.layers.loss import LabelSmoothedCrossEntropy
from minitrans_course import exercises_output as ex
from minitrans.gradcheck import relative_error
from tests.course.conftest import assert_fails_in_case
from tests.conftest import load_module

SOLUTIONS = pathlib.Path(__file__).resolve().parents[2] / "lessons" / "solutions"
FUNCTIONS = {}
for _stem in ("10_feed_forward_and_output", "12_the_whole_model"):
    _module = load_module(SOLUTIONS / f"{_stem}.py", f"solutions_{_stem}_for_output_tests")
    FUNCTIONS.update({n: getattr(_module, n) for n in ex.CHECKERS if hasattr(_module, n)})


def _ffn_forward(x, W1, b1, W2, b2):
    return np.maximum(x @ W1 + b1, 0) @ W2 + b2


def test_the_ffn_reference_matches_central_differences():
    rng = np.random.default_rng(3)
    x, dy = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    params = [rng.standard_normal(s) for s in ((4, 8), (8,), (8, 4), (4,))]
    args = [x] + params
    want = ex.feedforward_backward_reference(*args, dy)
    for k, array in enumerate(args):
        numeric = np.zeros_like(array)
        for index in np.ndindex(array.shape):
            saved = array[index]
            array[index] = saved + 1e-6
            up = np.sum(_ffn_forward(*args) * dy)
            array[index] = saved - 1e-6
            down = np.sum(_ffn_forward(*args) * dy)
            array[index] = saved
            numeric[index] = (up - down) / 2e-6
        assert relative_error(want[k], numeric) < 1e-7


def test_the_references_agree_with_minitrans():
    """The references are written apart from minitrans; they follow its conventions."""
    rng = np.random.default_rng(4)
    x, dy = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    logits, targets = rng.standard_normal((2, 3, 6)), np.array([[3, 1, 0], [5, 0, 0]])
    with backend.using("numpy", dtype="float64"):
        ffn = FeedForward(4, 8, rng=0)
        ffn.forward(x)
        dx = ffn.backward(dy)
        ours = ex.feedforward_backward_reference(
            x,
            ffn.W_1.params["W"],
            ffn.W_1.params["b"],
            ffn.W_2.params["W"],
            ffn.W_2.params["b"],
            dy,
        )
        theirs = (
            dx,
            ffn.W_1.grads["W"],
            ffn.W_1.grads["b"],
            ffn.W_2.grads["W"],
            ffn.W_2.grads["b"],
        )
        for a, b in zip(ours, theirs):
            assert np.allclose(a, b, rtol=1e-10, atol=1e-12)
        loss = LabelSmoothedCrossEntropy(0.1, pad_id=0)
        loss.forward(logits, targets)
        assert (
            relative_error(ex.loss_backward_reference(logits, targets, 0, 0.1), loss.backward())
            < 1e-8
        )
    sentences = [[5, 6, 7], [8], []]
    batch = make_seq2seq_batch([([4], s) for s in sentences])
    decoder_input, decoder_target = ex.shift_right_reference(sentences, BOS_ID, EOS_ID, PAD_ID)
    assert np.array_equal(decoder_input, batch.tgt_in)
    assert np.array_equal(decoder_target, batch.tgt_out)


# ---- wrong answers a learner might write, each with the case that must catch it


def _ffn_backward(x, W1, b1, W2, b2, dy, at_zero=False, sum_axes=None):
    a = x @ W1 + b1
    da = dy @ W2.T * ((a >= 0) if at_zero else (a > 0))
    axes = tuple(range(x.ndim - 1)) if sum_axes is None else sum_axes
    dW1 = np.tensordot(x, da, axes=(axes, axes))
    dW2 = np.tensordot(np.maximum(a, 0), dy, axes=(axes, axes))
    return da @ W1.T, dW1, da.sum(axis=axes), dW2, dy.sum(axis=axes)


def _loss_backward(logits, targets, pad_id, eps, mean_all=False, pad_mass=True, smooth=True):
    V = logits.shape[-1]
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    eps = eps if smooth else 0.0
    if pad_mass:
        q = (1 - eps) * (targets[..., None] == np.arange(V)) + eps / V
    else:  # eps spread over the V - 1 words that are not <pad>
        q = (1 - eps) * (targets[..., None] == np.arange(V)) + eps / (V - 1) * (
            np.arange(V) != pad_id
        )
    real = (targets != pad_id)[..., None]
    return (p - q) * real / (targets.size if mean_all else real.sum())


def _shift(sentences, bos, eos, pad, left=False, target_eos=True):
    T = max(len(s) for s in sentences) + 1
    rows_in = [[bos] + list(s) for s in sentences]
    rows_out = [list(s) + ([eos] if target_eos else [pad]) for s in sentences]

    def padded(row):
        fill = [pad] * (T - len(row))
        return fill + row if left else row + fill

    return np.array([padded(r) for r in rows_in]), np.array([padded(r) for r in rows_out])


WRONG = [
    (
        "feedforward_backward",
        lambda *a: _ffn_backward(*a, at_zero=True),
        "a unit exactly at 0 before the ReLU",
    ),
    ("feedforward_backward", lambda *a: _ffn_backward(*a, sum_axes=(0,)), "3-D input (B, T, d)"),
    ("loss_backward", lambda *a: _loss_backward(*a, mean_all=True), "padding"),
    ("loss_backward", lambda *a: _loss_backward(*a, pad_mass=False), "no padding"),
    ("loss_backward", lambda *a: _loss_backward(*a, smooth=False), "no padding"),
    (
        "loss_backward",
        lambda logits, t, pad_id, eps: _loss_backward(logits, t, 0, eps),
        "pad_id = V - 1, not 0",
    ),
    ("shift_right", lambda *a: _shift(*a, left=True), "sentences of varying lengths"),
    ("shift_right", lambda *a: _shift(*a, target_eos=False), "sentences of varying lengths"),
]


@pytest.mark.parametrize("name, wrong, case", WRONG, ids=[f"{n}-{c}" for n, _, c in WRONG])
def test_a_typical_mistake_fails_in_its_case(name, wrong, case):
    assert_fails_in_case(ex.CHECKERS[name], wrong, case)


def test_the_random_ffn_cases_keep_away_from_the_kink():
    """Every random pre-activation is at least 1e-3 from 0, so float32
    rounding cannot move a unit across the ReLU's kink."""
    for seed in range(10):
        for case in ex.feedforward_backward_cases(np.random.default_rng(seed))[:4]:
            x, W1, b1 = (np.asarray(a, np.float64) for a in case.args[:3])
            assert np.abs(x @ W1 + b1).min() >= 1e-3

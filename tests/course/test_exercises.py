"""The exercise checkers pass the solutions and fail wrong answers, naming the
case that shows the mistake. The wrong answers marked "one case passes it"
below get through a checker that tries a single fixed case."""

import math
import pathlib

import numpy as np
import pytest

from minitrans.core import backend
from minitrans.ops import softmax as minitrans_softmax
from minitrans_course import exercise_references as ref
from minitrans_course.exercises import CHECKERS, check_attention, check_softmax
from tests.course.conftest import assert_fails_in_case
from tests.conftest import load_module

SOLUTIONS = pathlib.Path(__file__).resolve().parents[2] / "lessons" / "solutions"


def _solution_functions():
    """{checker name: solution function} from every lessons/solutions/*.py."""
    found = {}
    for path in sorted(SOLUTIONS.glob("*.py")):
        module = load_module(path, f"solutions_{path.stem}")
        found.update({name: getattr(module, name) for name in CHECKERS if hasattr(module, name)})
    return found


FUNCTIONS = _solution_functions()


def test_every_checker_has_a_solution():
    assert sorted(FUNCTIONS) == sorted(CHECKERS)


@pytest.mark.parametrize("name", sorted(CHECKERS))
def test_the_solution_passes(name, capsys):
    """On a fresh seed, printing its verdict, and quietly on seeds 0 to 20."""
    result = CHECKERS[name](FUNCTIONS[name])
    assert result.passed and result.rel_error < 1e-4 and result.case == "", result.message
    out = capsys.readouterr().out
    assert out.startswith(f"{result.name}: correct on all") and f"(seed {result.seed})" in out
    for seed in range(21):
        result = CHECKERS[name](FUNCTIONS[name], quiet=True, seed=seed)
        assert result.passed and result.rel_error < 1e-4, (seed, result.message)


def _scaled(function, factor):
    """A wrong answer: the right one, every output array off by a factor."""
    def wrong(*args):
        out = function(*args)
        return (
            tuple(np.asarray(o) * factor for o in out)
            if isinstance(out, tuple)
            else np.asarray(out) * factor
        )
    return wrong


@pytest.mark.parametrize("name", sorted(CHECKERS))
def test_wrong_answers_fail_with_a_hint(name, capsys):
    for wrong in (
        _scaled(FUNCTIONS[name], 1.01),
        _scaled(FUNCTIONS[name], 0.0),
        _scaled(FUNCTIONS[name], np.nan),
    ):
        result = CHECKERS[name](wrong)
        assert not result.passed
        assert "Hint" in result.message and result.case.startswith("case '")
    assert "not yet" in capsys.readouterr().out


def test_a_wrong_shape_is_reported(capsys):
    result = CHECKERS["softmax"](lambda z: z[..., :-1])
    assert not result.passed and "expected shape" in result.message


# ---- wrong answers a learner might write, each with the case that must catch it


def _softmax_no_max(z):
    e = np.exp(z)  # exp(1000) overflows to inf, inf / inf is NaN
    return e / e.sum(axis=-1, keepdims=True)


def _softmax_axis_0(z):
    e = np.exp(z - z.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def _softmax_axis_1(z):  # one (B, V) case would pass it
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _softmax_backward_no_sum(y, dy):
    return y * dy


def _softmax_backward_axis_1(y, dy):  # one (B, V) case would pass it
    return y * (dy - (dy * y).sum(axis=1, keepdims=True))


def _attention(Q, K, V, mask, fill=-np.inf, scale=True, guard=True):
    """Attention with the learner's possible slips: the fill of masked scores,
    the 1/sqrt(d_k) scale, the guard for rows without any finite score."""
    scores = Q @ np.swapaxes(K, -1, -2) / (np.sqrt(Q.shape[-1]) if scale else 1.0)
    scores = np.where(mask, scores, fill)
    top = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - (np.where(np.isfinite(top), top, 0.0) if guard else top))
    total = e.sum(axis=-1, keepdims=True)
    return e / (np.where(total > 0, total, 1.0) if guard else total) @ V


def _attention_backward(Q, K, V, P, dout, scale=True, rowsum=True):
    factor = 1 / math.sqrt(Q.shape[-1]) if scale else 1.0
    dP = dout @ V.swapaxes(-1, -2)
    dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True)) if rowsum else P * dP
    return dS @ K * factor, dS.swapaxes(-1, -2) @ Q * factor, P.swapaxes(-1, -2) @ dout


def _layernorm(x, gamma, beta, eps, ddof=0, axis=-1):
    mu = x.mean(axis=axis, keepdims=True)
    return gamma * (x - mu) / np.sqrt(x.var(axis=axis, ddof=ddof, keepdims=True) + eps) + beta


def _layernorm_backward(x, gamma, beta, eps, dy, mean_term=True, sum_axes=None):
    mu, var = x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
    x_hat = (x - mu) / np.sqrt(var + eps)
    g = dy * gamma
    dx = g - x_hat * (g * x_hat).mean(axis=-1, keepdims=True)
    if mean_term:
        dx = dx - g.mean(axis=-1, keepdims=True)
    axes = sum_axes if sum_axes is not None else tuple(range(x.ndim - 1))
    return dx / np.sqrt(var + eps), (dy * x_hat).sum(axis=axes), dy.sum(axis=axes)


def _pe(max_len, d_model, swap=False, exponent_j=False):
    j = np.arange(d_model)
    angle = np.arange(max_len)[:, None] / 10000.0 ** ((j if exponent_j else j - j % 2) / d_model)
    even, odd = (np.cos, np.sin) if swap else (np.sin, np.cos)
    return np.where(j % 2 == 0, even(angle), odd(angle))


def _top_p(probs, p, one_too_few=False, renormalise=True):
    order = np.argsort(-probs, axis=-1, kind="stable")
    sorted_probs = np.take_along_axis(probs, order, axis=-1)
    mass = np.cumsum(sorted_probs, axis=-1) - (0 if one_too_few else sorted_probs)
    keep = np.zeros(probs.shape, dtype=bool)
    np.put_along_axis(keep, order, mass < p, axis=-1)
    kept = np.where(keep, probs, 0.0)
    return kept / kept.sum(axis=-1, keepdims=True) if renormalise else kept


WRONG = [
    ("softmax", _softmax_no_max, "logits up to 1000"),
    ("softmax", _softmax_axis_0, "random logits"),
    ("softmax", _softmax_axis_1, "a (B, T, V) batch"),
    ("softmax_backward", _softmax_backward_no_sum, "random"),
    ("softmax_backward", _softmax_backward_axis_1, "a (B, T, V) batch"),
    ("attention", lambda *a: _attention(*a, scale=False), "random, no padding"),
    ("attention", lambda *a: _attention(*a, fill=-1e9), "fully masked row"),  # one case passes it
    ("attention", lambda *a: _attention(*a, guard=False), "fully masked row"),  # one case passes it
    ("attention", lambda *a: _attention(*a, fill=0.0), "padding mask (B, 1, T_k)"),
    ("attention_backward", lambda *a: _attention_backward(*a, scale=False), "random, no padding"),
    ("attention_backward", lambda *a: _attention_backward(*a, rowsum=False), "random, no padding"),
    ("layernorm", lambda *a: _layernorm(*a, ddof=1), "random (B, T, d)"),
    ("layernorm", lambda *a: _layernorm(*a, axis=2), "2-D input (N, d)"),  # one case passes it
    ("layernorm", lambda x, g, b, eps: _layernorm(x, g, b, 0.0), "random (B, T, d)"),
    ("layernorm_backward", lambda *a: _layernorm_backward(*a, mean_term=False), "random (B, T, d)"),
    ("layernorm_backward", lambda *a: _layernorm_backward(*a, sum_axes=(0, 1)),
     "2-D input (N, d)"),  # one case passes it
    ("positional_encoding", lambda *a: _pe(*a, swap=True), "random even d_model"),
    ("positional_encoding", lambda *a: _pe(*a, exponent_j=True), "random even d_model"),
    ("top_p", lambda *a: _top_p(*a, one_too_few=True), "random rows"),
    ("top_p", lambda *a: _top_p(*a, renormalise=False), "random rows"),
]


@pytest.mark.parametrize("name, wrong, case", WRONG, ids=[f"{n}-{c}" for n, _, c in WRONG])
def test_a_typical_mistake_fails_in_its_case(name, wrong, case):
    assert_fails_in_case(CHECKERS[name], wrong, case)


def test_the_minus_1e9_fill_is_named_in_the_verdict(capsys):
    """Lesson 6's point: -1e9 turns a fully masked row into a uniform average
    of the values instead of zeros; the verdict names the case and the fill."""
    result = check_attention(lambda *a: _attention(*a, fill=-1e9), seed=5)
    out = capsys.readouterr().out
    assert not result.passed and "case 'fully masked row' (B=1, T_q=3" in out and "-1e9" in out


def test_a_function_that_raises_is_a_verdict_not_a_crash():
    def broken(z):
        raise IndexError("my bug")

    result = check_softmax(broken, quiet=True, seed=0)
    assert not result.passed and "raised IndexError: my bug" in result.message


def test_the_seed_gives_the_same_cases():
    first = check_softmax(_softmax_axis_1, quiet=True, seed=7)
    assert first.seed == 7 and first == check_softmax(_softmax_axis_1, quiet=True, seed=7)


def test_minitrans_own_softmax_passes_though_the_reference_is_independent():
    def with_minitrans(z):
        with backend.using("numpy", dtype="float64"):
            return np.asarray(minitrans_softmax.softmax(np.asarray(z, dtype=np.float64)))

    assert check_softmax(with_minitrans, quiet=True, seed=0).passed


def test_the_references_agree_with_the_convention_for_a_fully_masked_row():
    Q, K, V = np.ones((1, 2, 3)), np.ones((1, 4, 3)), np.arange(24.0).reshape(1, 4, 6)
    mask = np.array([[[True, False, True, False], [False] * 4]])
    out = ref.attention(Q, K, V, mask)
    assert np.allclose(out[0, 0], (V[0, 0] + V[0, 2]) / 2) and np.all(out[0, 1] == 0)

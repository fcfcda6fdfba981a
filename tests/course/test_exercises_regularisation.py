"""The checkers of lesson 17's exercises (inverted dropout, the GELU's
backward, Xavier's initialisation) pass the solutions for many seeds and fail
the mistakes a learner makes, in the case that shows each one."""

import math

import numpy as np
import pytest

from minitrans.core import backend
from minitrans.layers.dropout import Dropout
from minitrans.layers.init import xavier_uniform
from minitrans_course import exercises_regularisation as reg
from minitrans_course.exercises import CHECKERS

NAMES = sorted(reg.CHECKERS)


def test_the_checkers_are_registered():
    assert all(CHECKERS[name] is reg.CHECKERS[name] for name in NAMES)


# ---- wrong answers a learner might write, each with the case that must catch it


def _dropout(x, u, p, dy, keep_if=np.greater_equal, scale="inverse", mask_backward=True):
    keep = keep_if(u, p)
    factor = {"inverse": 1 / (1 - p), "none": 1.0, "times": 1 - p}[scale]
    return x * keep * factor, dy * (keep if mask_backward else 1.0) * factor


def _gelu_backward(x, dy, cubic_term=True, product_rule=True, tanh=np.tanh):
    c = math.sqrt(2 / math.pi)
    t = tanh(c * (x + 0.044715 * x**3))
    du = c * (1 + (3 * 0.044715 * x**2 if cubic_term else 0.0))
    return dy * (0.5 * (1 + t) + (0.5 * x * (1 - t**2) * du if product_rule else 0.0))


def _exact_gelu_derivative(x, dy):
    """Phi(x) + x phi(x): the derivative of the exact GELU, not of its tanh form."""
    phi = np.exp(-0.5 * x**2) / math.sqrt(2 * math.pi)
    Phi = 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    return dy * (Phi + x * phi)


def _tanh_by_hand(u):
    return (np.exp(u) - np.exp(-u)) / (np.exp(u) + np.exp(-u))  # inf / inf for |u| > 710


def _xavier(u, bound):
    fan_in, fan_out = u.shape
    return bound(fan_in, fan_out) * (2 * u - 1)


WRONG = [
    ("dropout", lambda *a: _dropout(*a, scale="none"), "random, p = 0.1"),
    ("dropout", lambda *a: _dropout(*a, scale="times"), "random, p = 0.1"),
    ("dropout", lambda *a: _dropout(*a, keep_if=np.less), "random, p = 0.1"),
    ("dropout", lambda *a: _dropout(*a, mask_backward=False), "random, p = 0.1"),
    # u > p drops a draw of exactly 0 at p = 0 (rng.random can return 0.0)
    ("dropout", lambda *a: _dropout(*a, keep_if=np.greater), "p = 0 (nothing dropped)"),
    ("gelu_backward", _exact_gelu_derivative, "random"),
    ("gelu_backward", lambda *a: _gelu_backward(*a, cubic_term=False), "random"),
    ("gelu_backward", lambda *a: _gelu_backward(*a, product_rule=False), "random"),
    (
        "gelu_backward",
        lambda *a: _gelu_backward(*a, tanh=_tanh_by_hand),
        "large |x| (tanh saturates)",
    ),
    ("xavier_init", lambda u: _xavier(u, lambda i, o: math.sqrt(6 / i)), "random sizes"),  # He
    ("xavier_init", lambda u: _xavier(u, lambda i, o: math.sqrt(3 / i)), "random sizes"),
    ("xavier_init", lambda u: _xavier(u, lambda i, o: 6 / (i + o)), "random sizes"),
    ("xavier_init", lambda u: _xavier(u, lambda i, o: math.sqrt(2 / (i + o))), "random sizes"),
    ("xavier_init", lambda u: math.sqrt(6 / sum(u.shape)) * u, "random sizes"),  # U[0, a)
]


@pytest.mark.parametrize("name, wrong, case", WRONG, ids=[f"{n}-{c}" for n, _, c in WRONG])
def test_a_typical_mistake_fails_in_its_case(name, wrong, case):
    for seed in (0, 1, 2, 3):
        result = reg.CHECKERS[name](wrong, quiet=True, seed=seed)
        assert not result.passed and result.case.startswith(f"case '{case}' ("), result.message


def test_fan_in_only_passes_only_a_square_matrix():
    """The bound sqrt(3 / fan_in) equals Xavier's when fan_in == fan_out, so
    the checker's first case must have two different fans."""
    for seed in range(5):
        first, *_ = reg.xavier_cases(np.random.default_rng(seed))
        fan_in, fan_out = first.args[0].shape
        assert fan_in != fan_out


# ---- the references agree with minitrans, though computed another way


def test_the_dropout_reference_is_minitrans_dropout():
    """With the same keep mask, minitrans's Dropout gives the reference's y and dx."""
    rng = np.random.default_rng(0)
    x, dy = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 4, 5))
    with backend.using("numpy", dtype="float64"):
        layer = Dropout(0.3, rng=0)
        y = layer.forward(x)
        keep, _ = layer.cache
        dx = layer.backward(dy)
    u = np.where(keep, 0.9, 0.1)  # draws that reproduce the layer's mask at p = 0.3
    want_y, want_dx = reg.dropout_reference(x, u, 0.3, dy)
    assert np.allclose(y, want_y, rtol=1e-14) and np.allclose(dx, want_dx, rtol=1e-14)


def test_the_gelu_reference_is_the_derivative_by_central_differences():
    x = np.concatenate([np.linspace(-6, 6, 49), [0.0, 1e-3, -30.0, 30.0]])

    def gelu(v):
        return 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))

    h = 1e-6
    numeric = (gelu(x + h) - gelu(x - h)) / (2 * h)
    assert np.allclose(reg.gelu_backward_reference(x, np.ones_like(x)), numeric, atol=1e-8)


def test_minitrans_gelu_backward_passes_the_checker():
    from minitrans.ops.activations import gelu_backward, gelu_gate

    def with_minitrans(x, dy):
        with backend.using("numpy", dtype="float64"):
            x = np.asarray(x, np.float64)
            return np.asarray(gelu_backward(x, gelu_gate(x), np.asarray(dy, np.float64)))

    assert reg.check_gelu_backward(with_minitrans, quiet=True, seed=0).passed


def test_the_xavier_reference_is_minitrans_bound():
    """minitrans's xavier_uniform draws inside the reference's bound, and the
    variance of a large draw is 2 / (fan_in + fan_out) within 3%."""
    fan_in, fan_out = 300, 500
    with backend.using("numpy", dtype="float64"):
        W = np.asarray(xavier_uniform(np.random.default_rng(0), fan_in, fan_out))
    bound = reg.xavier_reference(np.ones((fan_in, fan_out)))[0, 0]  # u -> 1 gives the bound
    assert np.abs(W).max() <= bound and np.abs(W).max() > 0.999 * bound
    assert abs(W.var() / (2 / (fan_in + fan_out)) - 1) < 0.03

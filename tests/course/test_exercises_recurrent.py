"""The exercise of lesson 0, the backward of a recurrent layer through time
(minitrans_course/exercises_recurrent): the solution passes, a learner's typical slips
fail in the case that shows them, and the checker's reference agrees with
central differences and with RecurrentLayer."""

import numpy as np
import pytest

import minitrans
from minitrans_course import exercises_recurrent as ex
from minitrans_course.exercises import CHECKERS
from minitrans.gradcheck import central_derivative, relative_error


def test_registered():
    assert CHECKERS["rnn_backward"] is ex.check_rnn_backward


def _backward(x, W_x, W_h, H, dH, truncated=False, tanh_derivative=True, sum_dW_h=True):
    """BPTT with the slips a learner may make."""
    B, T, d_h = H.shape
    dA, carried, dW_h = np.zeros_like(H), np.zeros((B, d_h), H.dtype), np.zeros_like(W_h)
    for t in reversed(range(T)):
        da = dH[:, t] + carried
        if tanh_derivative:
            da = da * (1 - H[:, t] ** 2)
        dA[:, t] = da
        if t > 0:
            step = H[:, t - 1].T @ da
            dW_h = dW_h + step if sum_dW_h else (step if t == T - 1 else dW_h)
        carried = 0 * carried if truncated else da @ W_h.T
    dW_x = x.reshape(-1, x.shape[-1]).T @ dA.reshape(-1, d_h)
    return dA @ W_x.T, dW_x, dW_h, dA.sum(axis=(0, 1))


@pytest.mark.parametrize(
    "slip",
    [dict(truncated=True), dict(tanh_derivative=False), dict(sum_dW_h=False)],
    ids=["truncated BPTT", "no tanh derivative", "dW_h of the last step only"],
)
def test_slips_fail_naming_the_case(slip):
    def wrong(*args):
        return _backward(*args, **slip)

    assert ex.check_rnn_backward(lambda *a: _backward(*a), quiet=True, seed=0).passed
    result = ex.check_rnn_backward(wrong, quiet=True, seed=0)
    assert not result.passed and result.case.startswith("case 'random sizes'")
    assert "Hint" in result.message


def test_truncation_only_shows_beyond_one_step():
    """On a sequence of length 1 truncated BPTT is right: the cases with T > 1 catch it."""
    cases = ex.rnn_backward_cases(np.random.default_rng(0))
    one_step = next(c for c in cases if c.name == "a sequence of length 1")
    got = _backward(*one_step.args, truncated=True)
    assert all(relative_error(g, e) < 1e-12 for g, e in zip(got, one_step.expected))


def test_the_reference_agrees_with_central_differences():
    rng = np.random.default_rng(5)
    B, T, d_in, d_h = 2, 4, 3, 2
    x, W_x, W_h = (
        rng.normal(size=(B, T, d_in)),
        rng.normal(size=(d_in, d_h)),
        rng.normal(size=(d_h, d_h)),
    )
    b, dH = rng.normal(size=d_h), rng.normal(size=(B, T, d_h))
    H = ex.rnn_forward_reference(x, W_x, W_h, b)
    expected = ex.rnn_backward_reference(x, W_x, W_h, H, dH)
    for array, want in zip((x, W_x, W_h, b), expected):
        numeric = np.zeros(array.shape)
        for index in np.ndindex(*array.shape):
            original = array[index]

            def loss(offset):
                array[index] = original + offset
                return float((ex.rnn_forward_reference(x, W_x, W_h, b) * dH).sum())

            numeric[index] = central_derivative(loss, 1e-4)
            array[index] = original
        assert relative_error(want, numeric) < 1e-8


def test_the_reference_agrees_with_recurrent_layer():
    rng = np.random.default_rng(6)
    with minitrans.using("numpy", dtype="float64"):
        layer = minitrans.RecurrentLayer(3, 4, rng=1)
        x, dH = rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5, 4))
        H = layer(x)
        dx = layer.backward(dH)
        got = (dx, layer.grads["W_x"], layer.grads["W_h"], layer.grads["b"])
        want = ex.rnn_backward_reference(x, layer.params["W_x"], layer.params["W_h"], H, dH)
    assert all(relative_error(g, e) < 1e-12 for g, e in zip(got, want))

"""RecurrentLayer: h_t = tanh(x_t W_x + h_{t-1} W_h + b), its backward through time
and its checks (lesson 0)."""

import numpy as np
import pytest

import minitrans
from minitrans import RecurrentLayer
from minitrans.core import backend
from minitrans_course.exercises_recurrent import rnn_forward_reference
from minitrans.gradcheck import check_layer
from minitrans.gradcheck import randomise_params
from tests.library.conftest import assert_gradcheck, assert_names


def test_forward_equals_the_recurrence_written_out(backend_name, randn):
    layer = RecurrentLayer(3, 5, rng=0)
    randomise_params(layer, np.random.default_rng(1))
    x = randn(2, 4, 3)
    H = layer(x)
    assert H.shape == (2, 4, 5) and H.dtype == minitrans.get_dtype()
    p = {k: minitrans.to_numpy(v).astype(np.float64) for k, v, _ in layer.named_parameters()}
    expected = rnn_forward_reference(minitrans.to_numpy(x), p["W_x"], p["W_h"], p["b"])
    np.testing.assert_allclose(minitrans.to_numpy(H), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 5, 3), (1, 1, 3), (3, 2, 3)], ids=["2x5", "T=1", "B=3"])
def test_gradcheck(float64, randn, shape):
    layer = RecurrentLayer(3, 4, rng=0)
    randomise_params(layer, np.random.default_rng(0))
    results = assert_gradcheck(layer, randn(*shape))
    assert {r.tensor for r in results} == {"x", "W_x", "W_h", "b"}


class TruncatedRecurrentLayer(RecurrentLayer):
    """A planted bug: backpropagation truncated to one step. Each h_t gets only
    dH_t, never the gradient that comes back from h_{t+1} through W_h, so dx_t
    misses the effect of x_t on every later state and dW_h keeps one term."""

    def backward(self, dH):
        x, H = self.saved()
        B, T, d_h = H.shape
        dA = dH * (1.0 - H**2)
        for t in range(1, T):
            self.grads["W_h"] += H[:, t - 1].T @ dA[:, t]
        self.grads["W_x"] += x.reshape(-1, self.d_in).T @ dA.reshape(-1, d_h)
        self.grads["b"] += dA.reshape(-1, d_h).sum(axis=0)
        return dA @ self.params["W_x"].T


def test_the_checker_catches_truncated_backpropagation(float64, randn):
    layer = TruncatedRecurrentLayer(3, 4, rng=0)
    randomise_params(layer, np.random.default_rng(0))
    results = {r.tensor: r for r in check_layer(layer, randn(2, 5, 3))}
    assert not results["x"].passed and not results["W_h"].passed
    assert results["x"].rel_error > 1e-2  # not a rounding matter: a whole term is missing


def test_truncation_is_invisible_on_one_step(float64, randn):
    """With T = 1 there is no later step to come back from: the truncated
    backward is right, which is why the test above needs T > 1."""
    layer = TruncatedRecurrentLayer(3, 4, rng=0)
    randomise_params(layer, np.random.default_rng(0))
    assert_gradcheck(layer, randn(2, 1, 3))


def test_a_state_depends_only_on_the_past(backend_name, randn):
    layer = RecurrentLayer(2, 3, rng=0)
    x = randn(1, 6, 2)
    before = minitrans.to_numpy(layer(x)).copy()
    x[0, 3] += 1.0
    changed = np.abs(minitrans.to_numpy(layer(x)) - before).max(axis=-1)[0] > 0
    assert changed.tolist() == [False, False, False, True, True, True]


def test_gradients_accumulate_over_two_backwards(float64, randn):
    layer = RecurrentLayer(2, 3, rng=0)
    x, dH = randn(2, 4, 2), randn(2, 4, 3)
    layer(x)
    layer.backward(dH)
    once = minitrans.to_numpy(layer.grads["W_h"]).copy()
    layer.backward(dH)
    np.testing.assert_allclose(minitrans.to_numpy(layer.grads["W_h"]), 2 * once)


def test_wrong_rank_and_feature_size_name_x(backend_name, randn):
    layer = RecurrentLayer(3, 4)
    for bad in (randn(2, 3), randn(2, 5, 4)):
        with pytest.raises(ValueError) as info:
            layer(bad)
        assert_names(info, "x")


def test_wrong_upstream_shape_names_dH(backend_name, randn):
    layer = RecurrentLayer(3, 4)
    layer(randn(2, 5, 3))
    with pytest.raises(ValueError) as info:
        layer.backward(randn(2, 5, 3))
    assert_names(info, "dH")


def test_backward_before_forward_is_runtime_error(backend_name, randn):
    with pytest.raises(RuntimeError):
        RecurrentLayer(3, 4).backward(randn(2, 5, 4))


@pytest.mark.parametrize("size", ["d_in", "d_h"])
def test_bad_sizes_are_named(size):
    sizes = {"d_in": 3, "d_h": 4, size: 0}
    with pytest.raises(ValueError) as info:
        RecurrentLayer(**sizes)
    assert_names(info, size)


def test_parameter_names_and_shapes(backend_name):
    shapes = {name: tuple(v.shape) for name, v, _ in RecurrentLayer(3, 4).named_parameters()}
    assert shapes == {"W_x": (3, 4), "W_h": (4, 4), "b": (4,)}
    assert backend.backend_name() == backend_name

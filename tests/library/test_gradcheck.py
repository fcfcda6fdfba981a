"""The gradient checker: it passes right backwards and FAILS wrong ones."""

import numpy as np
import pytest

import minitrans
from minitrans.layers.layernorm import LayerNorm
from minitrans.layers.linear import Linear
from minitrans.layers.module import Module
from minitrans.ops.softmax import softmax
from minitrans.gradcheck import check_layer, format_table, relative_error
from minitrans.gradcheck import randomise_params, run_report


class LayerNormWithoutMeanTerm(LayerNorm):
    """A typical bug: the backward forgets that mu depends on x."""

    def backward(self, dy):
        x_hat, inv_std = self.saved()
        self.grads["gamma"] += (dy * x_hat).reshape(-1, self.d_model).sum(axis=0)
        self.grads["beta"] += dy.reshape(-1, self.d_model).sum(axis=0)
        dx_hat = dy * self.params["gamma"]
        return inv_std * (dx_hat - x_hat * (dx_hat * x_hat).mean(axis=-1, keepdims=True))


class LinearWithTransposedBug(Linear):
    """Another: the weight gradient is computed from dy^T x (the wrong way round)
    and scaled, and the bias gradient is dropped."""

    def backward(self, dy):
        x_2d, x_shape = self.saved()
        dy_2d = dy.reshape(-1, self.d_out)
        self.grads["W"] += 0.5 * (x_2d.T @ dy_2d)
        return (dy_2d @ self.params["W"].T).reshape(x_shape)


class SoftmaxWithWrongBackward(Module):
    """Softmax whose backward uses mean(dy) where sum(dy * y) belongs.

    Both are equal when dy is constant, so a check with an all-ones upstream
    gradient cannot tell this backward from the right one."""

    def forward(self, z):
        self.cache = softmax(z)
        return self.cache

    def backward(self, dy):
        y = self.saved()
        return y * (dy - dy.mean(axis=-1, keepdims=True))


def test_a_correct_backward_passes(float64, randn):
    layer = randomise_params(LayerNorm(5), np.random.default_rng(0))
    results = check_layer(layer, randn(2, 3, 5))
    assert [r.tensor for r in results] == ["x", "gamma", "beta"]
    assert all(r.passed and r.rel_error < 1e-8 for r in results), format_table(results)


def test_the_checker_fails_a_layer_norm_backward_that_forgets_the_mean(float64, randn):
    layer = randomise_params(LayerNormWithoutMeanTerm(5), np.random.default_rng(0))
    results = {r.tensor: r for r in check_layer(layer, randn(2, 3, 5))}
    assert not results["x"].passed and results["x"].rel_error > 1e-2
    assert results["gamma"].passed and results["beta"].passed  # only dx is wrong


def test_the_checker_fails_wrong_parameter_gradients(float64, randn):
    layer = randomise_params(LinearWithTransposedBug(4, 3), np.random.default_rng(0))
    results = {r.tensor: r for r in check_layer(layer, randn(2, 4))}
    assert results["x"].passed
    assert not results["W"].passed and not results["b"].passed
    assert "FAIL" in format_table(check_layer(layer, randn(2, 4)))


def test_a_random_upstream_gradient_exposes_what_all_ones_hides(float64, randn):
    """sum(softmax(z)) = 1 for every z, so with G = 1 the true gradient is 0,
    and the wrong backward returns 0 too. The checker's random G catches it."""
    layer = SoftmaxWithWrongBackward()
    z = randn(3, 4)
    y = layer.forward(z)
    dz_for_all_ones = layer.backward(minitrans.get_xp().ones(y.shape))
    np.testing.assert_allclose(minitrans.to_numpy(dz_for_all_ones), 0.0, atol=1e-15)
    results = check_layer(layer, z)
    assert not results[0].passed and results[0].rel_error > 1e-2


def test_the_checker_demands_float64(backend_name, randn):
    with pytest.raises(ValueError, match="float64"):
        check_layer(Linear(3, 2), randn(2, 3))


def test_the_checker_rejects_a_backward_with_the_wrong_number_of_gradients(float64, randn):
    class TwoInputs(Module):
        def forward(self, a, b):
            return a * b

        def backward(self, dy):
            return dy  # forgets the second input

    with pytest.raises(ValueError, match="expected 2 input gradient"):
        check_layer(TwoInputs(), randn(3), randn(3))


def test_relative_error_definition():
    assert relative_error(np.zeros(3), np.zeros(3)) == 0.0
    assert relative_error([1.0, 2.0], [1.0, 2.0]) == 0.0
    assert relative_error([1.0, 2.0], [1.0, 1.0]) == pytest.approx(0.5)
    assert relative_error([0.0], [1e-3]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="shapes differ"):
        relative_error(np.zeros(2), np.zeros(3))


def test_the_report_passes_every_layer_on_every_backend(backend_name):
    results = run_report(backend_name)
    assert all(r.passed for r in results), format_table(results)
    layers = {r.layer.split(" (")[0] for r in results}
    assert {
        "Linear",
        "Embedding",
        "PositionalEncoding",
        "Attention",
        "MultiHeadAttention",
        "LayerNorm",
        "FeedForward",
        "Dropout",
        "Add & Norm",
        "LogSoftmax",
        "CrossEntropy",
    } <= layers


def test_numeric_gradient_of_a_sample_of_entries():
    """``indices`` computes those entries exactly as the whole array does,
    touches no others, and restores the array."""
    from minitrans.gradcheck import numeric_gradient

    array = np.random.default_rng(0).standard_normal((3, 4))
    before = array.copy()
    weights = np.arange(12.0).reshape(3, 4)

    def loss():
        return float((np.sin(array) * weights).sum())

    whole = numeric_gradient(loss, array)
    sample = [(0, 1), (2, 3)]
    partial = numeric_gradient(loss, array, indices=sample)
    for index in sample:
        assert partial[index] == whole[index]
    others = np.ones(array.shape, dtype=bool)
    others[tuple(zip(*sample))] = False
    assert not partial[others].any()
    np.testing.assert_array_equal(array, before)
    np.testing.assert_allclose(whole, np.cos(array) * weights, rtol=1e-8)

"""Linear: y = x W + b, its hand-written backward and its argument checks."""


import numpy as np
import pytest

import minitrans
from minitrans import Linear
from minitrans.gradcheck import randomise_params
from tests.library.conftest import assert_gradcheck, assert_names


@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4)], ids=["2d", "3d"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_forward_equals_host_x_W_plus_b(backend_name, randn, shape, bias):
    """Forward equals x @ W (+ b) computed on the host, for 2-D and 3-D input."""
    layer = Linear(4, 6, bias=bias, rng=0)
    randomise_params(layer, np.random.default_rng(1))
    x = randn(*shape)
    y = minitrans.to_numpy(layer(x))
    W = minitrans.to_numpy(layer.params["W"]).astype(np.float64)
    expected = minitrans.to_numpy(x).astype(np.float64) @ W
    if bias:
        expected = expected + minitrans.to_numpy(layer.params["b"])
    assert y.shape == (*shape[:-1], 6)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def test_no_bias_layer_has_only_W(backend_name):
    """bias=False registers no b parameter (and no b gradient)."""
    layer = Linear(3, 2, bias=False)
    assert sorted(layer.params) == ["W"]
    assert sorted(layer.grads) == ["W"]


@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4)], ids=["2d", "3d"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_gradcheck(float64, randn, shape, bias):
    """dx, dW (and db) agree with central differences in float64."""
    layer = Linear(4, 3, bias=bias, rng=0)
    randomise_params(layer, np.random.default_rng(0))
    results = assert_gradcheck(layer, randn(*shape))
    assert {r.tensor for r in results} == ({"x", "W", "b"} if bias else {"x", "W"})


def test_backward_accumulates_parameter_gradients(backend_name, randn):
    """Two backward passes add up: grads after two equal passes are twice one pass."""
    layer = Linear(4, 3, rng=0)
    x, dy = randn(2, 4), randn(2, 3)
    layer(x)
    layer.backward(dy)
    once = {k: minitrans.to_numpy(v).copy() for k, v in layer.grads.items()}
    layer(x)
    layer.backward(dy)
    for name, value in layer.grads.items():
        np.testing.assert_allclose(minitrans.to_numpy(value), 2 * once[name], rtol=1e-6)


def test_wrong_feature_size_names_x(backend_name, randn):
    layer = Linear(4, 3)
    with pytest.raises(ValueError) as info:
        layer(randn(2, 5))
    assert_names(info, "x")


def test_float32_input_into_float64_layer_names_x(float64, randn, device):
    layer = Linear(4, 3)
    x = device(np.ones((2, 4)), dtype="float32")
    with pytest.raises(TypeError) as info:
        layer(x)
    assert_names(info, "x")


def test_zero_d_in_names_d_in(backend_name):
    with pytest.raises(ValueError) as info:
        Linear(0, 3)
    assert_names(info, "d_in")


def test_backward_before_forward_is_runtime_error(backend_name, randn):
    with pytest.raises(RuntimeError):
        Linear(4, 3).backward(randn(2, 3))


def test_wrong_upstream_shape_names_dy(backend_name, randn):
    layer = Linear(4, 3)
    layer(randn(2, 4))
    with pytest.raises(ValueError) as info:
        layer.backward(randn(2, 4))
    assert_names(info, "dy")

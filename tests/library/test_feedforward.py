"""FeedForward: Linear -> ReLU -> Linear, max(0, x W_1 + b_1) W_2 + b_2, its backward
and its checks."""


import numpy as np
import pytest

import minitrans
from minitrans import FeedForward
from minitrans.gradcheck import randomise_params
from tests.library.conftest import assert_gradcheck, assert_names


def test_forward_equals_host_relu_mlp(backend_name, randn):
    layer = FeedForward(4, 8, rng=0)
    randomise_params(layer, np.random.default_rng(1))
    x = randn(2, 3, 4)
    y = minitrans.to_numpy(layer(x))
    p = {k: minitrans.to_numpy(v).astype(np.float64) for k, v, _ in layer.named_parameters()}
    hidden = np.maximum(0.0, minitrans.to_numpy(x) @ p["W_1.W"] + p["W_1.b"])
    expected = hidden @ p["W_2.W"] + p["W_2.b"]
    assert y.shape == (2, 3, 4) and y.dtype == np.float32
    assert (hidden == 0).any() and (hidden > 0).any()  # both ReLU branches are exercised
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 3, 4), (5, 4)], ids=["3d", "2d"])
def test_gradcheck(float64, randn, shape):
    layer = FeedForward(4, 6, rng=0)
    randomise_params(layer, np.random.default_rng(0))
    results = assert_gradcheck(layer, randn(*shape))
    assert {r.tensor for r in results} == {"x", "W_1.W", "W_1.b", "W_2.W", "W_2.b"}


def test_wrong_feature_size_names_x(backend_name, randn):
    with pytest.raises(ValueError) as info:
        FeedForward(4, 6)(randn(2, 3, 6))
    assert_names(info, "x")


def test_float32_input_into_float64_layer_names_x(float64, device):
    layer = FeedForward(4, 6)
    with pytest.raises(TypeError) as info:
        layer(device(np.ones((2, 4)), dtype="float32"))
    assert_names(info, "x")


def test_backward_before_forward_is_runtime_error(backend_name, randn):
    with pytest.raises(RuntimeError):
        FeedForward(4, 6).backward(randn(2, 4))


def test_wrong_upstream_shape_names_dy(backend_name, randn):
    layer = FeedForward(4, 6)
    layer(randn(2, 3, 4))
    with pytest.raises(ValueError) as info:
        layer.backward(randn(2, 3, 6))
    assert_names(info, "dy")


def test_the_paper_names_its_two_linear_layers(backend_name):
    layer = FeedForward(4, 6)
    assert isinstance(layer.W_1, minitrans.Linear) and isinstance(layer.W_2, minitrans.Linear)
    shapes = {name: tuple(value.shape) for name, value, _ in layer.named_parameters()}
    assert shapes == {"W_1.W": (4, 6), "W_1.b": (6,), "W_2.W": (6, 4), "W_2.b": (4,)}

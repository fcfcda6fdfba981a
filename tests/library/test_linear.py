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


def test_the_numpy_fast_set_adds_exactly_the_gradients_of_affine_backward(randn):
    """On NumPy the layer adds the very arrays ``affine_backward`` computes
    (the bias's column sums as the fast set's product with ones), bit for bit."""
    from minitrans.layers.linear import affine_backward

    layer = Linear(8, 6, rng=0)
    x, dy = randn(5, 13, 8), randn(5, 13, 6)
    layer(x)
    dx = layer.backward(dy)
    want_dx, want_dW, want_db = affine_backward(x.reshape(-1, 8), layer.params["W"],
                                                dy.reshape(-1, 6))
    for got, want in [(dx.reshape(-1, 8), want_dx), (layer.grads["W"], want_dW),
                      (layer.grads["b"], want_db)]:
        np.testing.assert_array_equal(got, want)


def test_backward_adds_dx_into_add_to(backend_name, randn):
    """``add_to=g``: g += dx, in place, and g is returned; the gradients of the
    parameters are added as without it."""
    layer = Linear(4, 3, rng=0)
    x, dy, g = randn(2, 5, 4), randn(2, 5, 3), randn(2, 5, 4)
    layer(x)
    dx = minitrans.to_numpy(layer.backward(dy))
    once = {name: minitrans.to_numpy(value).copy() for name, value in layer.grads.items()}
    g_before = minitrans.to_numpy(g).copy()
    layer(x)
    assert layer.backward(dy, add_to=g) is g
    np.testing.assert_allclose(minitrans.to_numpy(g), g_before + dx, rtol=1e-6, atol=1e-6)
    for name, value in layer.grads.items():
        np.testing.assert_allclose(minitrans.to_numpy(value), 2 * once[name], rtol=1e-6)


@pytest.mark.parametrize("make", [lambda randn: randn(2, 5, 3),  # the shape of dy, not of x
                                  lambda randn: randn(2, 10, 4)[:, ::2]],  # reshape would copy
                         ids=["wrong_shape", "strided"])
def test_an_add_to_it_cannot_add_into_is_refused_by_name(backend_name, randn, make):
    layer = Linear(4, 3, rng=0)
    layer(randn(2, 5, 4))
    with pytest.raises(ValueError) as info:
        layer.backward(randn(2, 5, 3), add_to=make(randn))
    assert_names(info, "add_to")


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_backward_is_one_launch_per_gradient_on_a_device(randn, bias):
    """dW and db are each added inside their product (one launch apiece), dx is
    one product, or one more product added into ``add_to``."""
    from minitrans.core.launches import count_launches

    with minitrans.using("strict", dtype="float32"):
        layer = Linear(4, 3, bias=bias, rng=0)
        x, dy, g = randn(2, 5, 4), randn(2, 5, 3), randn(2, 5, 4)
        layer(x)
        with count_launches() as fresh:
            layer.backward(dy)
        layer(x)
        with count_launches() as added:
            layer.backward(dy, add_to=g)
    grads = ["fused add_product"] + (["fused add_column_sums"] if bias else [])
    assert fresh.places == grads + ["matmul"]
    assert added.places == grads + ["fused add_product"]

"""LayerNorm: per-position normalisation, scale and shift, and its backward."""


import numpy as np
import pytest

import minitrans
from minitrans import LayerNorm
from minitrans.core import backend
from minitrans.gradcheck import randomise_params
from tests.library.conftest import assert_gradcheck, assert_names


def test_fresh_layer_gives_zero_mean_unit_variance_float32(backend_name, randn):
    """gamma = 1, beta = 0: every position has mean 0 and variance 1 (float32, 1e-5)."""
    layer = LayerNorm(16, eps=1e-12)
    x = randn(3, 5, 16) * 3.0 + 2.0
    y = minitrans.to_numpy(layer(x)).astype(np.float64)
    np.testing.assert_allclose(y.mean(axis=-1), 0.0, atol=1e-5)
    np.testing.assert_allclose(y.var(axis=-1), 1.0, atol=1e-5)


def test_fresh_layer_gives_zero_mean_unit_variance_float64(float64, randn):
    layer = LayerNorm(16, eps=1e-12)
    y = minitrans.to_numpy(layer(randn(3, 5, 16) * 3.0 + 2.0))
    np.testing.assert_allclose(y.mean(axis=-1), 0.0, atol=1e-10)
    np.testing.assert_allclose(y.var(axis=-1), 1.0, atol=1e-10)


def test_forward_equals_host_reference(float64, randn):
    """y = gamma * (x - mu) / sqrt(var + eps) + beta, with the biased variance."""
    layer = LayerNorm(6, eps=1e-3)
    randomise_params(layer, np.random.default_rng(0))
    x = randn(2, 3, 6)
    y = minitrans.to_numpy(layer(x))
    xh = minitrans.to_numpy(x)
    mu = xh.mean(axis=-1, keepdims=True)
    var = ((xh - mu) ** 2).mean(axis=-1, keepdims=True)
    expected = (xh - mu) / np.sqrt(var + 1e-3) * minitrans.to_numpy(
        layer.params["gamma"]
    ) + minitrans.to_numpy(layer.params["beta"])
    np.testing.assert_allclose(y, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(2, 3, 4), (5, 4)], ids=["3d", "2d"])
def test_gradcheck_with_random_gamma_beta(float64, randn, shape):
    layer = LayerNorm(4)
    randomise_params(layer, np.random.default_rng(0))
    results = assert_gradcheck(layer, randn(*shape))
    assert {r.tensor for r in results} == {"x", "gamma", "beta"}


def test_wrong_feature_size_names_x(backend_name, randn):
    with pytest.raises(ValueError) as info:
        LayerNorm(4)(randn(2, 3, 5))
    assert_names(info, "x")


def test_backward_before_forward_is_runtime_error(backend_name, randn):
    with pytest.raises(RuntimeError):
        LayerNorm(4).backward(randn(2, 4))


def test_wrong_upstream_shape_names_dy(backend_name, randn):
    layer = LayerNorm(4)
    layer(randn(2, 3, 4))
    with pytest.raises(ValueError) as info:
        layer.backward(randn(3, 2, 4))
    assert_names(info, "dy")


LAYOUTS = {
    # the same (B, T, D) numbers, on the device in another memory layout
    "x[:, ::2]": lambda host: backend.from_host(host.repeat(2, axis=1))[:, ::2],
    "x[..., ::2]": lambda host: backend.from_host(host.repeat(2, axis=2))[..., ::2],
    "fortran-order": lambda host: backend.get_xp().asfortranarray(backend.from_host(host)),
}


def forward_and_backward(x, dy):
    """y, dx, dgamma, dbeta of a layer with random gamma and beta, on the host."""
    layer = LayerNorm(x.shape[-1])
    randomise_params(layer, np.random.default_rng(0))
    y = layer(x)
    dx = layer.backward(dy)
    return [minitrans.to_numpy(value) for value in (y, dx, *layer.grads.values())]


@pytest.mark.parametrize("kernel_set", ["fast", "reference"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_memory_layout_changes_no_bit(backend_name, rng, layout, dtype, kernel_set):
    """The same numbers give the same bits forward and backward whether x
    and dy are rows in memory, a strided view or in Fortran order: a sum's
    order of additions follows the layout unless the layer makes it rows."""
    with minitrans.using(dtype=dtype, kernels=kernel_set):
        x_host = (rng.standard_normal((3, 5, 64)) * 3.0 + 1.0).astype(dtype)
        dy_host = rng.standard_normal((3, 5, 64)).astype(dtype)
        rows = forward_and_backward(backend.from_host(x_host), backend.from_host(dy_host))
        x, dy = LAYOUTS[layout](x_host), LAYOUTS[layout](dy_host)
        assert not x.flags.c_contiguous  # the layout the test is about
        for name, expected, got in zip(["y", "dx", "dgamma", "dbeta"], rows,
                                       forward_and_backward(x, dy)):
            assert np.array_equal(got, expected), (name, np.abs(got - expected).max())

"""RMSNorm: each position divided by its root mean square, times a gain g."""

import numpy as np
import pytest

import minitrans
from minitrans import FeedForward, RMSNorm
from minitrans.gradcheck import SublayerWithAddNorm, check_layer, randomise_params
from minitrans.layers.add_norm import AddNorm
from minitrans.layers.rmsnorm import RMSNorm as RMSNormClass
from tests.library.conftest import assert_gradcheck, assert_names


def test_fresh_layer_gives_unit_root_mean_square(backend_name, randn):
    y = minitrans.to_numpy(RMSNorm(16, eps=1e-12)(randn(3, 5, 16) * 3.0 + 2.0))
    np.testing.assert_allclose(np.sqrt((y.astype(np.float64) ** 2).mean(axis=-1)), 1.0,
                               atol=1e-5)


def test_forward_equals_host_reference(float64, randn):
    """y = g * x / sqrt(mean(x^2) + eps): no mean subtracted, no bias."""
    layer = randomise_params(RMSNorm(6, eps=1e-3), np.random.default_rng(0))
    x = randn(2, 3, 6)
    xh, g = minitrans.to_numpy(x), minitrans.to_numpy(layer.params["g"])
    expected = g * xh / np.sqrt((xh**2).mean(axis=-1, keepdims=True) + 1e-3)
    np.testing.assert_allclose(minitrans.to_numpy(layer(x)), expected, rtol=1e-12, atol=1e-12)
    assert list(layer.params) == ["g"]


@pytest.mark.parametrize("shape", [(2, 3, 4), (5, 4)], ids=["3d", "2d"])
def test_gradcheck_with_random_gain(float64, randn, shape):
    layer = randomise_params(RMSNorm(4), np.random.default_rng(0))
    results = assert_gradcheck(layer, randn(*shape))
    assert {r.tensor for r in results} == {"x", "g"}


class RMSNormWithLayerNormsBackward(RMSNormClass):
    """A plausible bug: LayerNorm's dx, whose -mean(dx_hat) term belongs to
    the mean LayerNorm subtracts and RMSNorm does not."""

    def backward(self, dy):
        x_hat, inv_rms = self.saved()
        self.grads["g"] += (dy * x_hat).reshape(-1, self.d_model).sum(axis=0)
        dx_hat = dy * self.params["g"]
        correction = dx_hat.mean(axis=-1, keepdims=True)
        correction = correction + x_hat * (dx_hat * x_hat).mean(axis=-1, keepdims=True)
        return (dx_hat - correction) * inv_rms


def test_the_checker_fails_layer_norm_s_backward(float64, randn):
    layer = randomise_params(RMSNormWithLayerNormsBackward(5), np.random.default_rng(0))
    results = {r.tensor: r for r in check_layer(layer, randn(2, 3, 5))}
    assert not results["x"].passed and results["g"].passed


@pytest.mark.parametrize("pre_norm", [False, True], ids=["post-norm", "pre-norm"])
def test_add_norm_with_rms_gradcheck_and_names_its_gain(float64, randn, pre_norm):
    """RMSNorm is a layer normalisation too: the child keeps LayerNorm's name."""
    block = AddNorm(4, dropout=0.2, pre_norm=pre_norm, norm="rms", rng=0)
    assert isinstance(block.layer_norm, RMSNormClass)
    assert [name for name, _, _ in block.named_parameters()] == ["layer_norm.g"]
    layer = randomise_params(SublayerWithAddNorm(FeedForward(4, 6, rng=0), block),
                             np.random.default_rng(0))
    assert_gradcheck(layer, randn(2, 3, 4))


@pytest.mark.parametrize("kwargs, name", [({"d_model": 0}, "d_model"), ({"eps": 0}, "eps"),
                                          ({"eps": float("nan")}, "eps")])
def test_bad_arguments_are_named(kwargs, name):
    with pytest.raises(ValueError) as info:
        RMSNorm(**{"d_model": 4, **kwargs})
    assert_names(info, name)


def test_bad_input_and_upstream_are_named(backend_name, randn):
    layer = RMSNorm(4)
    with pytest.raises(ValueError) as info:
        layer(randn(2, 3, 5))
    assert_names(info, "x")
    layer(randn(2, 3, 4))
    with pytest.raises(ValueError) as info:
        layer.backward(randn(3, 2, 4))
    assert_names(info, "dy")
    with pytest.raises(ValueError) as info:
        AddNorm(4, norm="batch")
    assert_names(info, "norm")

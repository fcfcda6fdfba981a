"""Dropout: inverted dropout in training, identity in eval, seeded masks."""


import numpy as np
import pytest

import minitrans
from minitrans import Dropout
from minitrans.layers import dropout
from minitrans.ops.random_bits import stream_key
from tests.library.conftest import assert_gradcheck, assert_names


def ones(n):
    xp = minitrans.get_xp()
    return xp.ones((n,), dtype=minitrans.get_dtype())


def test_eval_mode_is_identity_and_passes_dy(backend_name, randn):
    layer = Dropout(0.5, rng=0).eval()
    x, dy = randn(4, 5), randn(4, 5)
    np.testing.assert_array_equal(minitrans.to_numpy(layer(x)), minitrans.to_numpy(x))
    np.testing.assert_array_equal(minitrans.to_numpy(layer.backward(dy)), minitrans.to_numpy(dy))


def test_training_drops_fraction_close_to_p(backend_name):
    y = minitrans.to_numpy(Dropout(0.3, rng=0)(ones(100_000)))
    assert abs((y == 0).mean() - 0.3) < 0.01


def test_training_scales_kept_values_by_inverse_keep_probability(backend_name, randn):
    layer = Dropout(0.3, rng=0)
    x = randn(50, 40)
    y = minitrans.to_numpy(layer(x))
    xh = minitrans.to_numpy(x)
    kept = y != 0
    assert kept.any() and (~kept).any()
    np.testing.assert_allclose(y[kept], xh[kept] / 0.7, rtol=1e-6)


def test_training_preserves_mean_approximately(backend_name):
    y = minitrans.to_numpy(Dropout(0.3, rng=0)(ones(100_000)))
    assert abs(float(y.mean()) - 1.0) < 0.01


def test_same_seed_gives_same_mask(backend_name):
    a = minitrans.to_numpy(Dropout(rng=5)(ones(1000)))
    b = minitrans.to_numpy(Dropout(rng=5)(ones(1000)))
    c = minitrans.to_numpy(Dropout(rng=6)(ones(1000)))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_backward_uses_the_forward_mask(backend_name, randn):
    layer = Dropout(0.4, rng=3)
    y = minitrans.to_numpy(layer(randn(30, 20)))
    dy = randn(30, 20)
    dx = minitrans.to_numpy(layer.backward(dy))
    mask = (y != 0).astype(np.float64)
    np.testing.assert_allclose(dx, minitrans.to_numpy(dy) * mask / 0.6, rtol=1e-6)
    # a second backward draws no new mask
    np.testing.assert_array_equal(minitrans.to_numpy(layer.backward(dy)), dx)


def test_reset_rng_repeats_the_mask(backend_name, randn):
    layer = Dropout(0.5, rng=1)
    x = randn(10, 10)
    first = minitrans.to_numpy(layer(x))
    second = minitrans.to_numpy(layer(x))
    layer.reset_rng()
    again = minitrans.to_numpy(layer(x))
    assert not np.array_equal(first, second)  # successive steps get new masks
    np.testing.assert_array_equal(first, again)


def test_forward_added_is_the_residual_plus_forward_with_one_mask(backend_name, randn):
    """x + Dropout(a), the residual connection's sum: the mask forward would
    draw, and the one backward then applies."""
    layer = Dropout(0.4, rng=3)
    a, residual, dy = randn(30, 20), randn(30, 20), randn(30, 20)
    added = minitrans.to_numpy(layer.forward_added(a, residual))
    dx = minitrans.to_numpy(layer.backward(dy))
    layer.reset_rng()
    alone = minitrans.to_numpy(layer(a))
    np.testing.assert_allclose(added, minitrans.to_numpy(residual) + alone, rtol=1e-6)
    np.testing.assert_array_equal(dx, minitrans.to_numpy(layer.backward(dy)))
    assert (alone == 0).any() and (alone != 0).any()


def test_forward_added_is_refused_when_nothing_is_dropped(backend_name, randn):
    x = randn(3, 4)
    for layer in (Dropout(0.4, rng=3).eval(), Dropout(0.0, rng=3)):
        assert not layer.dropping
        with pytest.raises(RuntimeError, match="forward_added: only while dropping"):
            layer.forward_added(x, x)
    assert Dropout(0.4, rng=3).dropping


@pytest.mark.parametrize("p", [1.0, -0.1, "a"])
def test_bad_p_names_p(backend_name, p):
    with pytest.raises(ValueError) as info:
        Dropout(p)
    assert_names(info, "p")


def test_gradcheck_p_03(float64, randn):
    results = assert_gradcheck(Dropout(0.3, rng=0), randn(2, 3, 4))
    assert [r.tensor for r in results] == ["x"]


def test_backward_before_forward_is_runtime_error(backend_name, randn):
    with pytest.raises(RuntimeError):
        Dropout(0.3).backward(randn(2, 3))


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_wrong_upstream_shape_names_dy(backend_name, randn, training):
    layer = Dropout(0.3).train(training)
    layer(randn(2, 3))
    with pytest.raises(ValueError) as info:
        layer.backward(randn(3, 2))
    assert_names(info, "dy")


def test_p_just_below_one_drops_nearly_everything_without_overflow(backend_name):
    """The mask compares 16-bit draws with p * 65536, rounded and kept below 65536."""
    y = minitrans.to_numpy(Dropout(0.999999, rng=0)(ones(100_000)))
    assert (y == 0).mean() > 0.999


@pytest.mark.parametrize("kernel_set", ["fast", "reference"])
def test_forward_keeps_the_mask_of_the_active_kernel_set(backend_name, randn, kernel_set):
    """On every backend: a device draws the fast masks in its one kernel,
    and the reference set still draws the reference masks."""
    layer, x = Dropout(0.3, rng=2), randn(5, 9)
    with minitrans.using(kernels=kernel_set):
        for added in (False, True):
            layer.reset_rng()
            layer.forward_added(x, x) if added else layer(x)
            keep, _ = layer.saved()
            draw = getattr(dropout.dropout_keep_mask, kernel_set)
            want = minitrans.to_numpy(draw(stream_key(layer.seed, 0, 0), (5, 9), 0.3))
            np.testing.assert_array_equal(minitrans.to_numpy(keep), want)

"""Dropout's launches on a device (the strict backend counts them): the
forward draws its mask and applies it in ONE kernel, the backward applies
the saved mask in one, and the two kernels the forward once ran, a dozen
launches to hash the mask and one to apply it, are shown counted."""

import numpy as np
import pytest

import minitrans
from minitrans import Dropout
from minitrans.core import backend, launches
from minitrans.layers import dropout
from minitrans.ops import random_bits


@pytest.fixture
def strict():
    with minitrans.using("strict", dtype="float32", kernels="fast"):
        yield backend.get_xp()


def places(action):
    """The launches of ``action()``, by kind."""
    with launches.count_launches() as counted:
        action()
    return counted.places


def normal(*shape):
    return backend.from_host(np.random.default_rng(0).standard_normal(shape))


def test_a_forward_is_one_launch_and_the_counter_is_made_once(strict, monkeypatch):
    monkeypatch.setattr(random_bits, "_counters", {})  # none kept yet
    layer, x = Dropout(0.1, rng=0), normal(4, 5, 8)
    assert places(lambda: layer(x)) == ["arange", "fused dropout_forward"]
    assert places(lambda: layer(x)) == ["fused dropout_forward"]
    shorter = normal(2, 3)
    assert places(lambda: layer(shorter)) == ["fused dropout_forward"]  # a view of the counter


def test_the_residual_sum_is_one_launch(strict):
    layer, x, residual = Dropout(0.1, rng=0), normal(4, 5, 8), normal(4, 5, 8)
    layer(x)  # the counter is made
    assert places(lambda: layer.forward_added(x, residual)) == ["fused residual_dropout_forward"]


def test_the_backward_is_one_launch_with_the_saved_mask(strict):
    layer, x = Dropout(0.1, rng=0), normal(4, 5, 8)
    y = layer(x)
    dy = normal(4, 5, 8)
    assert places(lambda: layer.backward(dy)) == ["fused dropout_scale"]
    keep = minitrans.to_numpy(y) != 0
    np.testing.assert_allclose(minitrans.to_numpy(layer.backward(dy)),
                               minitrans.to_numpy(dy) * keep / 0.9, rtol=1e-6)


@pytest.mark.parametrize("pair", ["dropout_forward", "residual_dropout_forward"])
def test_the_two_kernel_path_is_counted_as_its_dozen_launches(strict, monkeypatch, pair):
    """The plant: the forward as it ran before it had a device version."""
    monkeypatch.setattr(getattr(dropout, pair), "device", None)
    layer, x = Dropout(0.1, rng=0), normal(4, 5, 8)
    launched = places(lambda: layer.forward_added(x, x) if "residual" in pair else layer(x))
    assert len(launched) == 13 and launched[0] == "arange"


def test_a_step_of_masks_agrees_between_the_cpu_and_the_device():
    """The fast set drops the same elements for a seed on NumPy (two
    kernels) and on a device (one): a run repeats across backends."""
    outputs = []
    for name in ("numpy", "strict"):
        with minitrans.using(name, dtype="float32", kernels="fast"):
            layer, x = Dropout(0.3, rng=7), normal(6, 9)
            layer.reset_rng(step=4)
            outputs.append([minitrans.to_numpy(layer(x)),
                            minitrans.to_numpy(layer.forward_added(x, x))])
    for cpu, device in zip(*outputs):
        np.testing.assert_array_equal(cpu, device)
    dropped = outputs[0][0] == 0
    assert dropped.any() and not dropped.all()


def test_a_sublayers_bias_is_added_in_the_same_kernel_with_the_same_mask(strict):
    """forward_added(x, residual, bias): one launch, and the bits of the
    sum with x + bias made first, under the mask drawn without a bias."""
    x, residual, bias = normal(4, 5, 8), normal(4, 5, 8) * 2.0, normal(8)
    with_bias, without = Dropout(0.3, rng=0), Dropout(0.3, rng=0)
    with_bias(x)  # the counter is made
    without(x)
    assert places(lambda: with_bias.forward_added(x, residual, bias)) == [
        "fused residual_bias_dropout_forward"]
    with_bias.reset_rng(step=2)
    without.reset_rng(step=2)
    total = minitrans.to_numpy(with_bias.forward_added(x, residual, bias))
    expected = minitrans.to_numpy(without.forward_added(x + bias, residual))
    np.testing.assert_array_equal(total, expected)
    dropped = minitrans.to_numpy(with_bias.saved()[0]) == 0
    np.testing.assert_array_equal(dropped, minitrans.to_numpy(without.saved()[0]) == 0)
    assert dropped.any() and not dropped.all()

"""Table 1 of the paper measured on layers that run (minitrans_course/path_lengths,
lesson 0)."""

import math

import numpy as np
import pytest

import minitrans
from minitrans import RecurrentLayer
from minitrans_course import path_lengths as pl

LENGTHS = [2, 4, 5, 9, 16, 33, 64]


@pytest.mark.parametrize("n", LENGTHS)
def test_measured_path_lengths_follow_table_1(float64, n):
    assert pl.path_length("attention", n) == 1
    assert pl.path_length("recurrent", n) == n - 1
    assert pl.path_length("convolution", n, k=3) == math.ceil((n - 1) / 2)
    assert pl.path_length("convolution", n, k=5) == math.ceil((n - 1) / 4)
    # dilations 1, k, k^2, ...: L layers reach back k^L - 1 positions
    assert pl.path_length("dilated", n, k=3) == math.ceil(math.log(n) / math.log(3) - 1e-12)


def test_sequential_steps_are_counted(backend_name):
    for n in (4, 16, 64):
        assert pl.sequential_steps("recurrent", n) == n
        for kind in ("attention", "convolution", "dilated"):
            assert pl.sequential_steps(kind, n) == 1


def test_causal_convolution_sees_only_the_past(float64):
    """Output t of a causal convolution of width k and dilation r changes when
    input s changes exactly for s in t, t - r, ..., t - (k-1) r."""
    (forward,), _ = pl.build_stack("convolution", 1, 4, k=3)
    n, d = 10, 4
    z = minitrans.from_host(np.random.default_rng(0).normal(size=(1, n, d)))
    before = minitrans.to_numpy(forward(z))
    z[0, 4] += 1.0
    changed = np.abs(minitrans.to_numpy(forward(z)) - before).max(axis=-1)[0] > 0
    assert np.flatnonzero(changed).tolist() == [4, 5, 6]


def test_multiply_adds_from_the_shapes():
    assert pl.multiply_adds("attention", 10, 4) == 2 * 10 * 10 * 4
    assert pl.multiply_adds("recurrent", 10, 4) == 2 * 10 * 4 * 4
    assert pl.multiply_adds("convolution", 10, 4, k=3) == 3 * 10 * 4 * 4
    # the crossover of Table 1: attention costs more than recurrence once n > d
    assert pl.multiply_adds("attention", 63, 64) < pl.multiply_adds("recurrent", 63, 64)
    assert pl.multiply_adds("attention", 65, 64) > pl.multiply_adds("recurrent", 65, 64)


def test_recurrent_gradient_decays_geometrically_with_distance(float64):
    """Near h = 0 (tiny inputs) tanh' is about 1, so ||dh_{n-1}/dx_t|| is about
    ||W_x|| scale^(n-1-t): halving with each step back for scale 0.5, growing
    by 1.2 per step back for scale 1.2."""
    n, d = 20, 6
    for scale in (0.5, 1.2):
        W_h = pl.scaled_orthogonal(d, scale, seed=1)
        norms = pl.gradient_by_distance("recurrent", n, d, W_h=W_h, x_scale=1e-4)
        ratios = np.array(norms[:-1]) / np.array(norms[1:])
        np.testing.assert_allclose(ratios, scale, rtol=1e-3)


def test_attention_gradient_does_not_decay_with_distance(float64):
    norms = pl.gradient_by_distance("attention", 32, 8, x_scale=0.3)
    assert min(norms) > 0.01 * max(norms)
    assert np.mean(norms[:8]) > 0.3 * np.mean(norms[-9:-1])  # far as large as near


def test_gradient_by_distance_uses_the_layers_backward(float64):
    """The recurrent norms equal central differences of h_{n-1} through the layer."""
    n, d = 5, 3
    W_h = pl.scaled_orthogonal(d, 0.9, seed=2)
    norms = pl.gradient_by_distance("recurrent", n, d, W_h=W_h, seed=3)
    layer = RecurrentLayer(d, d, rng=3)
    layer.params["W_h"] = W_h
    x = minitrans.from_host(np.random.default_rng(3).normal(size=(1, n, d)))
    for t in range(n):
        jac = np.zeros((d, d))
        for j in range(d):
            for sign in (1, -1):
                x[0, t, j] += sign * 1e-6
                jac[:, j] += sign * minitrans.to_numpy(layer(x))[0, -1] / 2e-6
                x[0, t, j] -= sign * 1e-6
        assert abs(np.linalg.norm(jac) - norms[t]) < 1e-6 * max(1.0, norms[t])


def test_orthogonal_scale():
    with minitrans.using("numpy", dtype="float64"):
        W = minitrans.to_numpy(pl.scaled_orthogonal(5, 0.7))
    np.testing.assert_allclose(np.linalg.svd(W, compute_uv=False), 0.7)


def test_bad_kinds_and_lengths_are_named(backend_name):
    with pytest.raises(ValueError, match="kind"):
        pl.path_length("transformer", 8)
    with pytest.raises(ValueError, match="n"):
        pl.path_length("attention", 1)
    with pytest.raises(ValueError, match="kind"):
        pl.gradient_by_distance("convolution", 8, 4)

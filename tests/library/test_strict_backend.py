"""The strict test backend refuses what CuPy refuses, so host/device leaks
fail on a CPU. Each test shows one kind of leak being caught."""

import numpy as np
import pytest

import minitrans
from minitrans.core import backend
from minitrans.layers.module import Module


@pytest.fixture
def strict():
    with minitrans.using("strict"):
        yield backend.get_xp()


def test_arithmetic_with_a_host_array_raises(strict):
    x = strict.ones((2, 3))
    with pytest.raises(TypeError, match="NumPy array"):
        x + np.ones((2, 3))
    with pytest.raises(TypeError, match="NumPy array"):
        np.ones((2, 3)) * x


def test_implicit_conversion_to_numpy_raises(strict):
    x = strict.ones(3)
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(x)


def test_numpy_functions_on_device_arrays_raise(strict):
    x = strict.zeros(4)
    with pytest.raises(TypeError, match="numpy.add.at"):
        np.add.at(x, strict.asarray([0, 0]), 1.0)
    with pytest.raises(TypeError, match="numpy.triu"):
        np.triu(strict.ones((3, 3)))


def test_indexing_with_a_host_index_array_raises(strict):
    x = strict.arange(5)
    with pytest.raises(TypeError, match="NumPy array"):
        x[np.array([0, 1])]


def test_backend_functions_refuse_host_arrays_but_asarray_moves_them(strict):
    with pytest.raises(TypeError, match="xp.exp"):
        strict.exp(np.ones(3))
    moved = strict.asarray(np.ones(3))
    assert isinstance(moved, strict.ndarray)
    np.testing.assert_array_equal(minitrans.to_numpy(strict.exp(moved)), np.exp(np.ones(3)))


def test_the_backend_namespace_and_python_scalars_work(strict):
    x = strict.arange(6, dtype="float32").reshape(2, 3)
    y = (x * 2.0 + np.float32(1)).sum(axis=0)
    assert isinstance(y, strict.ndarray) and y.dtype == np.float32
    strict.add.at(x, strict.asarray([0, 0]), 1.0)
    np.testing.assert_array_equal(minitrans.to_numpy(x)[0], [2, 3, 4])
    assert float(x[1, 2]) == 5.0


class _LeakyCausalMask(Module):
    """A layer with a classic GPU bug: its mask is built with numpy."""

    def forward(self, scores):
        mask = np.tril(np.ones(scores.shape[-2:], dtype=bool))
        return backend.get_xp().where(mask, scores, -1e9)


def test_a_layer_that_builds_its_mask_with_numpy_passes_on_numpy_but_fails_on_strict():
    with minitrans.using("numpy"):
        _LeakyCausalMask().forward(backend.get_xp().zeros((2, 3, 3)))
    with minitrans.using("strict"):
        with pytest.raises(TypeError, match="NumPy array"):
            _LeakyCausalMask().forward(backend.get_xp().zeros((2, 3, 3)))


def test_layers_refuse_host_arrays_on_the_strict_backend(strict):
    layer = minitrans.Linear(3, 2)
    with pytest.raises(TypeError, match=r"x: expected an array of the current backend \(strict\)"):
        layer.forward(np.ones((2, 3), dtype=np.float32))

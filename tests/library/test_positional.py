"""PositionalEncoding: the paper's sinusoid table, added to x; dx = dy."""

import math

import numpy as np
import pytest

import minitrans
from minitrans import PositionalEncoding
from tests.library.conftest import assert_gradcheck, assert_names


def paper_table(max_len, d_model):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)),
    with Python's math, one element at a time."""
    table = np.zeros((max_len, d_model))
    for pos in range(max_len):
        for j in range(d_model):
            two_i = j - j % 2
            angle = pos / 10000 ** (two_i / d_model)
            table[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return table


@pytest.mark.parametrize("d_model", [6, 7], ids=["even", "odd"])
def test_table_equals_paper_formula(float64, d_model):
    layer = PositionalEncoding(d_model, max_len=60)
    table = minitrans.to_numpy(layer.buffers["PE"])
    assert table.shape == (60, d_model) and table.dtype == np.float64
    np.testing.assert_allclose(table, paper_table(60, d_model), rtol=0, atol=1e-12)


def test_table_in_float32_matches_formula(backend_name):
    table = minitrans.to_numpy(PositionalEncoding(8, max_len=30).buffers["PE"])
    assert table.dtype == np.float32
    np.testing.assert_allclose(table, paper_table(30, 8), rtol=0, atol=1e-6)


def test_forward_adds_first_T_rows(backend_name, randn):
    layer = PositionalEncoding(6, max_len=20)
    x = randn(2, 5, 6)
    y = minitrans.to_numpy(layer(x))
    expected = minitrans.to_numpy(x) + paper_table(20, 6)[:5]
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)


def test_offset_adds_rows_k_to_k_plus_T(backend_name, randn):
    layer = PositionalEncoding(6, max_len=20)
    x = randn(2, 3, 6)
    y = minitrans.to_numpy(layer(x, offset=7))
    expected = minitrans.to_numpy(x) + paper_table(20, 6)[7:10]
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)


def test_sequence_of_exactly_max_len_is_accepted(backend_name, randn):
    layer = PositionalEncoding(4, max_len=5)
    assert layer(randn(1, 5, 4)).shape == (1, 5, 4)


def test_backward_returns_dy_unchanged(backend_name, randn):
    layer = PositionalEncoding(6, max_len=20)
    layer(randn(2, 5, 6))
    dy = randn(2, 5, 6)
    np.testing.assert_array_equal(minitrans.to_numpy(layer.backward(dy)), minitrans.to_numpy(dy))


def test_too_long_sequence_names_x_and_max_len(backend_name, randn):
    layer = PositionalEncoding(4, max_len=5)
    with pytest.raises(ValueError) as info:
        layer(randn(1, 6, 4))
    assert_names(info, "x", "max_len")


def test_offset_past_max_len_names_x_and_max_len(backend_name, randn):
    layer = PositionalEncoding(4, max_len=5)
    with pytest.raises(ValueError) as info:
        layer(randn(1, 3, 4), offset=3)
    assert_names(info, "x", "max_len")


def test_gradcheck_odd_d_model(float64, randn):
    results = assert_gradcheck(PositionalEncoding(5, max_len=8), randn(2, 3, 5))
    assert [r.tensor for r in results] == ["x"]


def test_wrong_feature_size_names_x(backend_name, randn):
    with pytest.raises(ValueError) as info:
        PositionalEncoding(4, max_len=5)(randn(1, 3, 5))
    assert_names(info, "x")


def test_backward_before_forward_is_runtime_error(backend_name, randn):
    with pytest.raises(RuntimeError):
        PositionalEncoding(4, max_len=5).backward(randn(1, 3, 4))


def test_wrong_upstream_shape_names_dy(backend_name, randn):
    layer = PositionalEncoding(4, max_len=5)
    layer(randn(1, 3, 4))
    with pytest.raises(ValueError) as info:
        layer.backward(randn(1, 2, 4))
    assert_names(info, "dy")

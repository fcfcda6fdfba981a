"""The test helpers can fail: ``warnings_as_errors`` lets through only
OpenBLAS's groundless warning, and what it lets through cannot hide a real
invalid value from a test that checks its results are finite."""

import warnings

import numpy as np
import pytest
from tests.conftest import warnings_as_errors


def test_the_groundless_matmul_warning_is_let_through():
    with warnings_as_errors():
        warnings.warn("invalid value encountered in matmul", RuntimeWarning)


def test_an_overflow_in_a_product_is_an_error():
    big = np.full(4, 1e30, dtype=np.float32)
    with warnings_as_errors(), pytest.raises(
        RuntimeWarning, match="overflow encountered in matmul"
    ):
        big @ big


@pytest.mark.parametrize("operation", [
    lambda zero: zero / zero,
    lambda zero: np.log(zero - 1.0),
    lambda zero: np.sqrt(zero - 1.0),
])
def test_any_other_invalid_value_is_an_error(operation):
    zero = np.zeros(3, dtype=np.float32)
    with warnings_as_errors(), pytest.raises(RuntimeWarning, match="invalid value encountered"):
        operation(zero)


def test_other_warnings_are_errors():
    with warnings_as_errors(), pytest.raises(UserWarning):
        warnings.warn("anything else")


def test_a_real_invalid_product_leaves_a_nan_for_the_finiteness_check():
    with warnings_as_errors():
        product = np.array([np.inf, 1.0], dtype=np.float32) @ np.array([0.0, 1.0], dtype=np.float32)
    assert not np.isfinite(product)

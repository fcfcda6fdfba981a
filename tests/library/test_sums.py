"""The sums, by whichever kernel set is active, equal NumPy's reductions
(``tests/library/test_kernels.py`` compares the fast and reference versions)."""

import numpy as np
import pytest

import minitrans
from minitrans.ops.sums import dot_last, dot_leading, mean_last, sum_last, sum_leading

SHAPES = [(7,), (3, 5), (2, 3, 4), (2, 2, 3, 6), (0, 4), (3, 0, 4)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_each_sum_equals_the_plain_reduction(backend_name, randn, shape):
    x = randn(*shape) * 3.0 + 1.0
    host = minitrans.to_numpy(x)
    for fast, plain in (
        (sum_last, host.sum(axis=-1, keepdims=True)),
        (
            mean_last,
            host.mean(axis=-1, keepdims=True) if host.size else host.sum(axis=-1, keepdims=True),
        ),
        (sum_leading, host.reshape(-1, shape[-1]).sum(axis=0)),
    ):
        result = fast(x)
        assert result.dtype == x.dtype and result.shape == plain.shape, fast.__name__
        np.testing.assert_allclose(
            minitrans.to_numpy(result), plain, rtol=1e-5, atol=1e-5, err_msg=fast.__name__
        )


def test_sums_of_a_non_contiguous_view(backend_name, randn):
    x = randn(4, 6, 5).swapaxes(0, 1)  # strides that are not C order
    host = minitrans.to_numpy(x)
    np.testing.assert_allclose(
        minitrans.to_numpy(sum_last(x)), host.sum(axis=-1, keepdims=True), rtol=1e-5
    )
    np.testing.assert_allclose(
        minitrans.to_numpy(sum_leading(x)), host.reshape(-1, 5).sum(axis=0), rtol=1e-5
    )


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_each_dot_product_equals_the_product_and_a_plain_sum(backend_name, randn, shape):
    a, b = randn(*shape) * 3.0 + 1.0, randn(*shape)
    product = minitrans.to_numpy(a) * minitrans.to_numpy(b)
    for fast, plain in ((dot_last, product.sum(axis=-1, keepdims=True)),
                        (dot_leading, product.reshape(-1, shape[-1]).sum(axis=0))):
        result = fast(a, b)
        assert result.dtype == a.dtype and result.shape == plain.shape, fast.__name__
        np.testing.assert_allclose(
            minitrans.to_numpy(result), plain, rtol=1e-5, atol=1e-5, err_msg=fast.__name__
        )

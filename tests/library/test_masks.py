"""Attention masks: causal, padding and their combination (True = may attend)."""

import numpy as np
import pytest

import minitrans
from minitrans.core import backend

PAD = 0


@pytest.mark.parametrize("length", [1, 2, 5])
def test_causal_mask_is_lower_triangular_boolean_on_device(backend_name, length):
    mask = minitrans.causal_mask(length)
    assert backend.is_array(mask)
    assert mask.dtype == bool
    np.testing.assert_array_equal(
        minitrans.to_numpy(mask), np.tril(np.ones((length, length), dtype=bool))
    )


@pytest.mark.parametrize("length", [0, -1])
def test_causal_mask_rejects_non_positive_length(backend_name, length):
    with pytest.raises(ValueError, match="length"):
        minitrans.causal_mask(length)


def test_padding_mask_has_shape_b_1_t_and_hides_pad_ids(backend_name, device):
    ids = device([[5, 2, 6, 3], [4, 1, PAD, PAD]])
    mask = minitrans.padding_mask(ids, PAD)
    assert backend.is_array(mask)
    assert mask.dtype == bool
    assert tuple(mask.shape) == (2, 1, 4)
    np.testing.assert_array_equal(
        minitrans.to_numpy(mask),
        np.array([[[True, True, True, True]], [[True, True, False, False]]]),
    )


def test_padding_mask_uses_the_given_pad_id(backend_name, device):
    """Only the value equal to pad_id is hidden, here 7 and not 0."""
    ids = device([[0, 7, 3]])
    np.testing.assert_array_equal(
        minitrans.to_numpy(minitrans.padding_mask(ids, 7)), [[[True, False, True]]]
    )


def test_padding_mask_rejects_rank_1_ids(backend_name, device):
    with pytest.raises(ValueError, match="ids"):
        minitrans.padding_mask(device([1, 2, PAD]), PAD)


def test_decoder_mask_is_causal_and_padding_combined(backend_name, device):
    host_ids = np.array([[1, 2, 1], [3, 1, PAD]])
    mask = minitrans.decoder_mask(device(host_ids), PAD)
    assert mask.dtype == bool
    assert tuple(mask.shape) == (2, 3, 3)
    expected = np.tril(np.ones((3, 3), dtype=bool))[None] & (host_ids != PAD)[:, None, :]
    np.testing.assert_array_equal(minitrans.to_numpy(mask), expected)
    # the padded key (batch 1, position 2) is hidden even from the last query
    assert not minitrans.to_numpy(mask)[1, 2, 2]


def test_decoder_mask_rejects_rank_1_ids(backend_name, device):
    with pytest.raises(ValueError, match="ids"):
        minitrans.decoder_mask(device([1, 2, PAD]), PAD)

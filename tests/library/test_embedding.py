"""Embedding: y = W_E[ids] * sqrt(d_model), a scatter-add backward, id checks."""

import math

import numpy as np
import pytest

import minitrans
from minitrans import Embedding
from minitrans.gradcheck import randomise_params
from tests.library.conftest import assert_gradcheck, assert_names

IDS = [[1, 2, 1, 4], [3, 1, 0, 2]]  # token 1 appears three times, 2 twice


def test_forward_is_scaled_row_lookup_exactly(backend_name, device):
    """y[b, t] == W_E[ids[b, t]] * sqrt(d_model), bit for bit."""
    layer = Embedding(7, 6, rng=0)
    y = minitrans.to_numpy(layer(device(IDS)))
    W = minitrans.to_numpy(layer.params["W_E"])
    expected = W[np.array(IDS)] * np.float32(math.sqrt(6))
    assert y.shape == (2, 4, 6) and y.dtype == np.float32
    np.testing.assert_array_equal(y, expected)


def test_scale_false_is_plain_lookup(backend_name, device):
    layer = Embedding(7, 6, scale=False, rng=0)
    y = minitrans.to_numpy(layer(device(IDS)))
    np.testing.assert_array_equal(y, minitrans.to_numpy(layer.params["W_E"])[np.array(IDS)])


def test_repeated_token_accumulates_sum_of_its_gradients(backend_name, device, randn):
    """dW_E[v] = sqrt(d) * sum of dy over every position holding v (host loop)."""
    layer = Embedding(7, 6, rng=0)
    layer(device(IDS))
    dy = randn(2, 4, 6)
    layer.backward(dy)
    dy_host = minitrans.to_numpy(dy).astype(np.float64)
    expected = np.zeros((7, 6))
    for b in range(2):
        for t in range(4):
            expected[IDS[b][t]] += math.sqrt(6) * dy_host[b, t]
    got = minitrans.to_numpy(layer.grads["W_E"])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert np.all(got[[5, 6]] == 0)  # tokens not in the batch get no gradient


def test_backward_returns_none(backend_name, device, randn):
    """Token ids are integers: there is no input gradient."""
    layer = Embedding(7, 6)
    layer(device(IDS))
    assert layer.backward(randn(2, 4, 6)) is None


def test_gradcheck(float64, device):
    """dW_E agrees with central differences (ids have no gradient)."""
    layer = Embedding(7, 4, rng=0)
    randomise_params(layer, np.random.default_rng(0))
    results = assert_gradcheck(layer, device(IDS))
    assert [r.tensor for r in results] == ["W_E"]


def test_id_equal_to_vocab_size_names_ids_and_value(backend_name, device):
    layer = Embedding(10, 4)
    with pytest.raises(ValueError) as info:
        layer(device([[1, 10, 3]]))
    assert_names(info, "ids", "10")


def test_negative_id_names_ids_and_value(backend_name, device):
    layer = Embedding(10, 4)
    with pytest.raises(ValueError) as info:
        layer(device([[1, -3, 3]]))
    assert_names(info, "ids")
    assert "-3" in str(info.value)


def test_float_ids_are_type_error_naming_ids(backend_name, device):
    layer = Embedding(10, 4)
    with pytest.raises(TypeError) as info:
        layer(device([[1.0, 2.0]]))
    assert_names(info, "ids")


def test_same_seed_gives_identical_weights_on_numpy_and_strict():
    """Weights are drawn on the host, so one seed gives one W_E on every backend."""
    weights = {}
    for name in ("numpy", "strict"):
        with minitrans.using(name, dtype="float32"):
            weights[name] = minitrans.to_numpy(Embedding(11, 5, rng=42).params["W_E"])
    np.testing.assert_array_equal(weights["numpy"], weights["strict"])
    with minitrans.using("numpy", dtype="float32"):
        other = minitrans.to_numpy(Embedding(11, 5, rng=43).params["W_E"])
    assert not np.array_equal(weights["numpy"], other)


def test_backward_before_forward_is_runtime_error(backend_name, randn):
    with pytest.raises(RuntimeError):
        Embedding(7, 6).backward(randn(2, 4, 6))


def test_wrong_upstream_shape_names_dy(backend_name, device, randn):
    layer = Embedding(7, 6)
    layer(device(IDS))
    with pytest.raises(ValueError) as info:
        layer.backward(randn(2, 4, 5))
    assert_names(info, "dy")


@pytest.mark.parametrize("vocab_size", [5, 70])  # below and above ONE_HOT_VOCAB
def test_both_ways_of_adding_up_rows_agree_with_a_loop(backend_name, randn, vocab_size):
    from minitrans.layers.embedding import ONE_HOT_VOCAB

    assert (vocab_size <= ONE_HOT_VOCAB) == (vocab_size == 5)
    layer = minitrans.Embedding(vocab_size, 3, rng=0)
    ids = np.array([[1, 4, 4], [4, 2, 1]])
    out = layer.forward(minitrans.to_device(ids))
    dy = randn(*out.shape)
    layer.backward(dy)
    expected = np.zeros((vocab_size, 3))
    for position, token in enumerate(ids.reshape(-1)):
        expected[token] += minitrans.to_numpy(dy).reshape(-1, 3)[position] * 3**0.5
    np.testing.assert_allclose(
        minitrans.to_numpy(layer.grads["W_E"]), expected, rtol=1e-5, atol=1e-6
    )


def test_flat_add_at_equals_row_wise_add_at_bit_for_bit(backend_name):
    """Bit for bit where add.at adds in order (NumPy, strict). CuPy's adds
    with atomics in no fixed order, so a repeated id's sum may differ in its
    last bits from run to run: there the sums are equal to float32 rounding
    (the device check on an H200 found 163 of 480 elements off by an ulp or two)."""
    from minitrans.layers.embedding import ONE_HOT_VOCAB, add_rows_at

    rng = np.random.default_rng(0)
    vocab_size = ONE_HOT_VOCAB + 16  # above it: the fast version's flat add.at
    row_ids = rng.integers(0, vocab_size, size=400)  # many repeats
    rows = rng.standard_normal((400, 6)).astype(np.float32)
    expected = np.zeros((vocab_size, 6), dtype=np.float32)
    np.add.at(expected, row_ids, rows)
    table = minitrans.to_device(np.zeros((vocab_size, 6), dtype=np.float32))
    add_rows_at.fast(table, minitrans.to_device(row_ids), minitrans.to_device(rows))
    if backend_name == "cupy":
        np.testing.assert_allclose(minitrans.to_numpy(table), expected, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(minitrans.to_numpy(table), expected)


def test_flat_add_at_refuses_a_strided_table():
    from minitrans.layers.embedding import ONE_HOT_VOCAB, add_rows_at

    table = np.zeros((2 * ONE_HOT_VOCAB + 4, 4), np.float32)[::2]  # reshape would copy
    with pytest.raises(ValueError, match="table: expected a C-contiguous array"):
        add_rows_at.fast(table, np.array([0, 1]), np.ones((2, 4), dtype=np.float32))


def test_the_numpy_fast_set_adds_the_scaled_rows_as_before(randn):
    """On NumPy the backward is the fast one-hot product of the rows scaled
    first, bit for bit: the scale moved into the kernel changes no number."""
    from minitrans.layers.embedding import add_rows_at

    layer = minitrans.Embedding(11, 6, rng=0)
    ids = np.random.default_rng(0).integers(0, 11, size=(4, 9))
    layer.forward(ids)
    dy = randn(4, 9, 6)
    layer.backward(dy)
    expected = np.zeros((11, 6), dtype=np.float32)
    add_rows_at.fast(expected, ids.reshape(-1), dy.reshape(-1, 6) * 6**0.5, 1.0)
    np.testing.assert_array_equal(layer.grads["W_E"], expected)


@pytest.mark.parametrize("vocab_size, launches", [(11, ["gather", "fused add_product"]),
                                                  (70, ["multiply", "add.at"])])
def test_backward_is_two_launches_on_a_device(randn, vocab_size, launches):
    """A small vocabulary: the one-hot rows picked from sqrt(d_model) * I, and
    their product added into the table. Above ONE_HOT_VOCAB: the scaled
    rows, and add.at."""
    from minitrans.core.launches import count_launches

    with minitrans.using("strict", dtype="float32"):
        layer = minitrans.Embedding(vocab_size, 6, rng=0)
        layer.forward(minitrans.to_device(np.array([[1, 4, 4], [4, 2, 1]])))
        dy = randn(2, 3, 6)
        layer.backward(dy)  # makes the scaled identity once
        with count_launches() as counted:
            layer.backward(dy)
    assert counted.places == launches

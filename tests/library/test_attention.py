"""Scaled dot-product attention and the softmax helpers it is built on."""


import numpy as np
import pytest

import minitrans
from minitrans import ScaledDotProductAttention
from minitrans.ops.softmax import (
    SHARED_SHIFT_SPREAD,
    masked_softmax,
    softmax,
    softmax_backward,
    softmax_backward_in_place,
    softmax_in_place,
)
from tests.library.conftest import assert_gradcheck
from tests.conftest import warnings_as_errors

PAD = 0
B, H, T_Q, T_K, D_K, D_V = 2, 2, 3, 4, 5, 3


def qkv(randn, t_q=T_Q, t_k=T_K):
    return randn(B, H, t_q, D_K), randn(B, H, t_k, D_K), randn(B, H, t_k, D_V)


def one_row_masked(device):
    """(B, 1, T_Q, T_K): query 1 of batch 0 may attend to no key at all."""
    mask = np.ones((B, 1, T_Q, T_K), dtype=bool)
    mask[0, 0, 0, 2:] = False
    mask[0, 0, 1, :] = False
    mask[1, 0, 2, 0] = False
    return device(mask)


def padding(device):
    """(B, 1, 1, T_K): the last two keys of batch 1 are padding."""
    ids = device([[5, 2, 6, 3], [4, 1, PAD, PAD]])
    return minitrans.padding_mask(ids, PAD)[:, None]


def host_attention(Q, K, V, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V on the host, in float64."""
    Q, K, V = (minitrans.to_numpy(a).astype(np.float64) for a in (Q, K, V))
    scores = Q @ K.swapaxes(-1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(minitrans.to_numpy(mask), scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ V


# ------------------------------------------------------------ gradients


def test_gradcheck_without_mask(float64, randn):
    assert_gradcheck(ScaledDotProductAttention(), *qkv(randn))


def test_gradcheck_with_causal_mask(float64, randn):
    assert_gradcheck(
        ScaledDotProductAttention(), *qkv(randn, T_K, T_K), mask=minitrans.causal_mask(T_K)
    )


def test_gradcheck_with_padding_mask(float64, randn, device):
    assert_gradcheck(ScaledDotProductAttention(), *qkv(randn), mask=padding(device))


def test_gradcheck_with_a_fully_masked_query_row(float64, randn, device):
    results = assert_gradcheck(
        ScaledDotProductAttention(), *qkv(randn), mask=one_row_masked(device)
    )
    assert [r.tensor for r in results] == ["Q", "K", "V"]


# ------------------------------------------------------------ weights


def test_weight_rows_sum_to_one_without_mask(backend_name, randn):
    attention = ScaledDotProductAttention()
    attention.forward(*qkv(randn))
    P = minitrans.to_numpy(attention.attention_weights)
    assert P.shape == (B, H, T_Q, T_K)
    np.testing.assert_allclose(P.sum(axis=-1), 1.0, rtol=1e-6)


def test_weight_rows_sum_to_one_with_causal_mask(backend_name, randn):
    attention = ScaledDotProductAttention()
    attention.forward(*qkv(randn, T_K, T_K), mask=minitrans.causal_mask(T_K))
    P = minitrans.to_numpy(attention.attention_weights)
    np.testing.assert_allclose(P.sum(axis=-1), 1.0, rtol=1e-6)
    future = np.triu(np.ones((T_K, T_K), dtype=bool), k=1)  # key later than query
    assert np.all(P[..., future] == 0.0)


def test_weight_rows_sum_to_one_except_the_fully_masked_row(backend_name, randn, device):
    attention = ScaledDotProductAttention()
    attention.forward(*qkv(randn), mask=one_row_masked(device))
    sums = minitrans.to_numpy(attention.attention_weights).sum(axis=-1)  # (B, H, T_Q)
    expected = np.ones((B, H, T_Q))
    expected[0, :, 1] = 0.0
    np.testing.assert_allclose(sums, expected, rtol=1e-6, atol=0)


def test_padding_keys_get_weight_exactly_zero(backend_name, randn, device):
    attention = ScaledDotProductAttention()
    attention.forward(*qkv(randn), mask=padding(device))
    P = minitrans.to_numpy(attention.attention_weights)
    assert np.all(P[1, :, :, 2:] == 0.0)
    assert np.all(P[1, :, :, :2] > 0.0)
    assert np.all(P[0] > 0.0)


def test_attention_weights_before_forward_raises(backend_name):
    with pytest.raises(RuntimeError):
        ScaledDotProductAttention().attention_weights


# ------------------------------------------------------ fully masked row


def test_fully_masked_row_gives_zero_output_and_zero_gradients_without_warnings(
    backend_name, randn, device
):
    attention = ScaledDotProductAttention()
    Q, K, V = qkv(randn)
    mask = one_row_masked(device)
    with warnings_as_errors():
        out = attention.forward(Q, K, V, mask=mask)
        dQ, dK, dV = attention.backward(randn(B, H, T_Q, D_V))

        # the same backward with dout zero on the masked row: dK, dV must not change
        dout_other = minitrans.to_numpy(randn(B, H, T_Q, D_V))
        attention.forward(Q, K, V, mask=mask)
        dK_a, dV_a = (
            minitrans.to_numpy(g) for g in attention.backward(minitrans.to_device(dout_other))[1:]
        )
        dout_other[0, :, 1] = 1e3 * np.random.default_rng(0).standard_normal((H, D_V))
        attention.forward(Q, K, V, mask=mask)
        dK_b, dV_b = (
            minitrans.to_numpy(g) for g in attention.backward(minitrans.to_device(dout_other))[1:]
        )

    out, dQ, dK, dV = (minitrans.to_numpy(a) for a in (out, dQ, dK, dV))
    for array in (out, dQ, dK, dV, dK_a, dV_a, dK_b, dV_b):
        assert np.all(np.isfinite(array))
    assert np.all(out[0, :, 1] == 0.0)
    assert np.all(dQ[0, :, 1] == 0.0)
    assert np.any(out[0, :, 0] != 0.0) and np.any(dQ[0, :, 0] != 0.0)  # other rows are live
    # the masked query row's upstream gradient reaches neither K nor V
    np.testing.assert_array_equal(dK_a, dK_b)
    np.testing.assert_array_equal(dV_a, dV_b)


# ------------------------------------------------------------ values


def test_large_scores_give_finite_output(backend_name, randn, device):
    """Scores of ~1e4 would overflow a naive exp; the max-shift keeps them finite."""
    Q, K, V = qkv(randn)
    Q, K = Q * 100.0, K * 100.0
    attention = ScaledDotProductAttention()
    for mask in (None, padding(device)):
        out = minitrans.to_numpy(attention.forward(Q, K, V, mask=mask))
        P = minitrans.to_numpy(attention.attention_weights)
        scores = minitrans.to_numpy(Q @ K.swapaxes(-1, -2)) / np.sqrt(D_K)
        assert np.abs(scores).max() > 1e3
        assert np.all(np.isfinite(out)) and np.all(np.isfinite(P))
        np.testing.assert_allclose(P.sum(axis=-1), 1.0, rtol=1e-6)


def test_output_matches_host_reference(backend_name, randn):
    Q, K, V = qkv(randn)
    out = ScaledDotProductAttention().forward(Q, K, V)
    assert out.dtype == np.float32
    assert tuple(out.shape) == (B, H, T_Q, D_V)
    np.testing.assert_allclose(
        minitrans.to_numpy(out), host_attention(Q, K, V), rtol=1e-5, atol=1e-6
    )


def test_masked_output_matches_host_reference(backend_name, randn, device):
    Q, K, V = qkv(randn)
    mask = padding(device)
    out = ScaledDotProductAttention().forward(Q, K, V, mask=mask)
    np.testing.assert_allclose(
        minitrans.to_numpy(out), host_attention(Q, K, V, mask), rtol=1e-5, atol=1e-6
    )


# ------------------------------------------------------------ bad input


def test_non_boolean_mask_raises_type_error(backend_name, randn, device):
    with pytest.raises(TypeError, match="mask"):
        ScaledDotProductAttention().forward(
            *qkv(randn), mask=device(np.ones((T_Q, T_K), dtype=np.int64))
        )


def test_mask_that_does_not_broadcast_raises_value_error_with_both_shapes(
    backend_name, randn, device
):
    with pytest.raises(ValueError, match="mask") as info:
        ScaledDotProductAttention().forward(
            *qkv(randn), mask=device(np.ones((T_Q + 1, T_K), dtype=bool))
        )
    message = str(info.value)
    assert str((B, H, T_Q, T_K)) in message
    assert str((T_Q + 1, T_K)) in message


def test_mask_of_higher_rank_than_scores_raises_value_error(backend_name, randn, device):
    with pytest.raises(ValueError, match="mask"):
        ScaledDotProductAttention().forward(
            *qkv(randn), mask=device(np.ones((1, B, H, T_Q, T_K), dtype=bool))
        )


def test_k_with_other_d_k_raises_value_error(backend_name, randn):
    Q, _, V = qkv(randn)
    with pytest.raises(ValueError, match=r"^K\b"):
        ScaledDotProductAttention().forward(Q, randn(B, H, T_K, D_K + 1), V)


@pytest.mark.parametrize("groups, expected", [(0, "positive integer"),
                                               (T_Q + 1, "divisor of the")])
def test_groups_that_do_not_divide_the_query_rows_are_named(backend_name, randn, groups,
                                                            expected):
    Q, K, V = qkv(randn)
    with pytest.raises(ValueError, match=rf"^groups\b.*{expected}"):
        ScaledDotProductAttention().forward(Q, K, V, groups=groups)


def test_stacked_groups_meet_their_own_masks(backend_name, randn, device):
    """Two heads' queries stacked as rows against one K and V, a mask per
    head: the same output and weights as the two heads apart."""
    xp = minitrans.get_xp()
    Q, K, V = qkv(randn)  # (B, H, T_Q, D_K): stack the H heads over one K, V head
    K, V = K[:, :1], V[:, :1]
    mask = xp.asarray(np.random.default_rng(0).random((B, H, T_Q, T_K)) < 0.7)
    apart = ScaledDotProductAttention()
    expected = apart.forward(Q, xp.repeat(K, H, axis=1), xp.repeat(V, H, axis=1), mask=mask)
    stacked = ScaledDotProductAttention()
    out = stacked.forward(Q.reshape(B, 1, H * T_Q, D_K), K, V, mask=mask[:, None], groups=H)
    np.testing.assert_allclose(minitrans.to_numpy(out.reshape(B, H, T_Q, D_V)),
                               minitrans.to_numpy(expected), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(minitrans.to_numpy(stacked.attention_weights),
                               minitrans.to_numpy(apart.attention_weights), rtol=1e-5, atol=1e-6)


def test_v_with_other_number_of_positions_raises_value_error(backend_name, randn):
    Q, K, _ = qkv(randn)
    with pytest.raises(ValueError, match=r"^V\b"):
        ScaledDotProductAttention().forward(Q, K, randn(B, H, T_K + 1, D_V))


def test_plain_numpy_input_on_strict_backend_raises_type_error(backend_name, randn):
    if backend_name != "strict":
        pytest.skip("only the strict backend refuses host arrays")
    Q, K, V = qkv(randn)
    with pytest.raises(TypeError, match=r"^Q\b"):
        ScaledDotProductAttention().forward(minitrans.to_numpy(Q), K, V)


def test_plain_numpy_mask_on_strict_backend_raises_type_error(backend_name, randn):
    if backend_name != "strict":
        pytest.skip("only the strict backend refuses host arrays")
    with pytest.raises(TypeError, match="mask"):
        ScaledDotProductAttention().forward(*qkv(randn), mask=np.ones((T_Q, T_K), dtype=bool))


def test_backward_before_forward_raises_runtime_error(backend_name, randn):
    with pytest.raises(RuntimeError, match="forward"):
        ScaledDotProductAttention().backward(randn(B, H, T_Q, D_V))


def test_dout_of_wrong_shape_raises_value_error(backend_name, randn):
    attention = ScaledDotProductAttention()
    attention.forward(*qkv(randn))
    with pytest.raises(ValueError, match="dout"):
        attention.backward(randn(B, H, T_Q, D_V + 1))


# ------------------------------------------------------------ softmax


def test_masked_softmax_of_all_false_row_is_all_zeros(backend_name, randn, device):
    z = randn(3, 4)
    mask = device(np.array([[True, False, True, True], [False] * 4, [True] * 4]))
    with warnings_as_errors():
        y = minitrans.to_numpy(masked_softmax(z, mask))
    assert np.all(y[1] == 0.0)
    assert y[0, 1] == 0.0
    np.testing.assert_allclose(y[[0, 2]].sum(axis=-1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(y[2], minitrans.to_numpy(softmax(z[2])), rtol=1e-6)


def test_softmax_backward_equals_explicit_jacobian_product(float64, randn):
    z, dy = randn(6), randn(6)
    y = softmax(z)
    y_host = minitrans.to_numpy(y)
    jacobian = np.diag(y_host) - np.outer(y_host, y_host)
    np.testing.assert_allclose(
        minitrans.to_numpy(softmax_backward(y, dy)),
        jacobian @ minitrans.to_numpy(dy),
        rtol=1e-12,
        atol=1e-15,
    )


def test_softmax_of_large_logits_matches_host_reference(backend_name, randn):
    """Logits around 1e3 (exp would overflow float32) still give the exact softmax."""
    z = randn(2, 5) + 1000.0
    y = minitrans.to_numpy(softmax(z))
    z_host = minitrans.to_numpy(z).astype(np.float64)
    e = np.exp(z_host - z_host.max(axis=-1, keepdims=True))
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y, e / e.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-7)


# ----------------------------------------- the fast softmax of attention


def _host_masked_softmax(z, mask):
    """The exact answer in float64 on the host, row max subtracted."""
    z = np.where(mask, z.astype(np.float64), -np.inf)
    top = z.max(axis=-1, keepdims=True)
    e = np.exp(z - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


@pytest.mark.parametrize(
    "spread", [4.0, 3 * SHARED_SHIFT_SPREAD]
)  # one shared shift / each row's max
def test_softmax_in_place_equals_the_clear_versions(backend_name, rng, spread):
    z_host = rng.uniform(-spread / 2, spread / 2, size=(2, 3, 5, 7))
    mask_host = rng.random((2, 1, 5, 7)) > 0.3
    mask_host[0, 0, 2] = False  # a row with every key masked
    z, mask = minitrans.to_device(z_host), minitrans.to_device(mask_host)
    clear_masked = minitrans.to_numpy(masked_softmax(z, mask))
    clear = minitrans.to_numpy(softmax(z))
    expected = _host_masked_softmax(minitrans.to_numpy(z), mask_host)

    fast_masked = softmax_in_place(z.copy(), mask)
    fast = softmax_in_place(z.copy())
    assert fast_masked.dtype == z.dtype
    np.testing.assert_allclose(minitrans.to_numpy(fast_masked), clear_masked, rtol=2e-5, atol=1e-7)
    np.testing.assert_allclose(minitrans.to_numpy(fast_masked), expected, rtol=2e-5, atol=1e-7)
    np.testing.assert_allclose(minitrans.to_numpy(fast), clear, rtol=2e-5, atol=1e-7)
    assert np.all(
        minitrans.to_numpy(fast_masked)[0, :, 2] == 0.0
    )  # the all-masked row: zeros, not NaN


def test_softmax_in_place_writes_into_its_argument(backend_name, randn):
    z = randn(4, 6)
    expected = minitrans.to_numpy(softmax(z))
    softmax_in_place(z)
    np.testing.assert_allclose(minitrans.to_numpy(z), expected, rtol=2e-6)


def test_softmax_in_place_is_exact_in_float64_for_both_shifts(float64, rng):
    """The shared shift changes nothing but rounding: in float64 both ways
    agree with the host reference to 1e-13."""
    for spread in (10.0, 200.0):
        z_host = rng.uniform(0, spread, size=(3, 8, 9))
        mask_host = rng.random((3, 8, 9)) > 0.2
        y = softmax_in_place(minitrans.to_device(z_host.copy()), minitrans.to_device(mask_host))
        np.testing.assert_allclose(minitrans.to_numpy(y), _host_masked_softmax(z_host, mask_host),
                                   rtol=1e-13, atol=1e-300)


def test_softmax_in_place_keeps_a_row_far_below_the_others(backend_name, device):
    """One row 1000 below the other: a shared shift would make it 0 / 0;
    the spread check sees it and shifts each row by its own maximum."""
    z = device(np.array([[0.0, 1.0, 2.0], [-1000.0, -999.0, -998.0]]), dtype="float32")
    y = minitrans.to_numpy(softmax_in_place(z))
    np.testing.assert_allclose(y[1], y[0], rtol=1e-5)
    assert np.all(np.isfinite(y))


def test_softmax_in_place_does_not_hide_nan(backend_name, device):
    """A NaN score stays NaN (the spread is NaN, so each row gets its own
    shift, as in masked_softmax) and the other rows are untouched."""
    z = device(np.array([[0.0, np.nan, 1.0], [0.0, 1.0, 2.0]]), dtype="float32")
    y = minitrans.to_numpy(softmax_in_place(z))
    assert np.isnan(y[0, 1])
    np.testing.assert_allclose(
        y[1], minitrans.to_numpy(softmax(device([0.0, 1.0, 2.0], dtype="float32"))), rtol=1e-6
    )


def test_softmax_backward_in_place_overwrites_dy_with_the_same_result(float64, randn):
    y, dy = softmax(randn(3, 5)), randn(3, 5)
    expected = minitrans.to_numpy(softmax_backward(y, dy))
    softmax_backward_in_place(y, dy)
    np.testing.assert_allclose(minitrans.to_numpy(dy), expected, rtol=1e-14)

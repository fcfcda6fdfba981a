"""LogSoftmax and LabelSmoothedCrossEntropy: values, padding, stability, checks."""

import re

import numpy as np
import pytest

import minitrans
from minitrans import LabelSmoothedCrossEntropy, LogSoftmax
from tests.library.conftest import assert_gradcheck, assert_names
from tests.conftest import warnings_as_errors

PAD = 0
TARGETS = [[1, 2, 1], [3, 4, PAD]]  # (B=2, T=3), the last target is padding


def host_log_softmax(z):
    z = np.asarray(z, dtype=np.float64)
    shifted = z - z.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def host_loss(logits, targets, eps, pad_id):
    """Mean over non-padding targets of (1-eps)(-log p_target) + eps * mean_v(-log p_v)."""
    log_p = host_log_softmax(logits)
    targets = np.asarray(targets)
    total, count = 0.0, 0
    for index in np.ndindex(*targets.shape):
        target = targets[index]
        if pad_id is not None and target == pad_id:
            continue
        total += (1 - eps) * -log_p[index][target] + eps * np.mean(-log_p[index])
        count += 1
    return total / count


# ----------------------------------------------------------------- LogSoftmax


def test_log_softmax_equals_host(backend_name, randn):
    z = randn(2, 3, 5)
    np.testing.assert_allclose(
        minitrans.to_numpy(LogSoftmax()(z)), host_log_softmax(minitrans.to_numpy(z)), atol=1e-6
    )


def test_log_softmax_of_huge_logits_is_finite_and_normalised(backend_name, device):
    z = device([[1e4, -1e4, 0.0, 1e4 - 1.0], [-1e4, -1e4, -1e4, -1e4]], dtype=minitrans.get_dtype())
    with warnings_as_errors():
        log_p = minitrans.to_numpy(LogSoftmax()(z)).astype(np.float64)
    assert np.isfinite(log_p).all()
    np.testing.assert_allclose(np.exp(log_p).sum(axis=-1), 1.0, atol=1e-6)


def test_log_softmax_gradcheck(float64, randn):
    assert_gradcheck(LogSoftmax(), randn(2, 3, 7))


def test_log_softmax_backward_before_forward_is_runtime_error(backend_name, randn):
    with pytest.raises(RuntimeError):
        LogSoftmax().backward(randn(2, 5))


def test_log_softmax_wrong_upstream_shape_is_value_error(backend_name, randn):
    layer = LogSoftmax()
    layer(randn(2, 5))
    with pytest.raises(ValueError) as info:
        layer.backward(randn(2, 4))
    assert_names(info, "dlog_probs")


# --------------------------------------------------------------------- loss


@pytest.mark.parametrize("eps", [0.1, 0.0])
def test_loss_equals_host_reference(backend_name, randn, device, eps):
    logits = randn(2, 3, 5)
    loss = LabelSmoothedCrossEntropy(eps, pad_id=PAD)(logits, device(TARGETS))
    expected = host_loss(minitrans.to_numpy(logits), TARGETS, eps, PAD)
    np.testing.assert_allclose(float(minitrans.to_numpy(loss)), expected, rtol=1e-5)


def test_no_smoothing_is_negative_log_likelihood(float64, randn, device):
    logits = randn(2, 3, 5)
    loss = LabelSmoothedCrossEntropy(0.0, pad_id=PAD)(logits, device(TARGETS))
    log_p = host_log_softmax(minitrans.to_numpy(logits))
    nll = -np.mean([log_p[0, 0, 1], log_p[0, 1, 2], log_p[0, 2, 1], log_p[1, 0, 3], log_p[1, 1, 4]])
    np.testing.assert_allclose(float(minitrans.to_numpy(loss)), nll, rtol=1e-12)


def test_padding_logits_do_not_change_the_loss(backend_name, randn, device):
    logits = randn(2, 3, 5)
    loss_fn = LabelSmoothedCrossEntropy(0.1, pad_id=PAD)
    before = float(minitrans.to_numpy(loss_fn(logits, device(TARGETS))))
    changed = minitrans.to_numpy(logits).copy()
    changed[1, 2] = [50.0, -7.0, 3.0, 0.0, 9.0]  # the padding position
    after = float(
        minitrans.to_numpy(loss_fn(device(changed, dtype=minitrans.get_dtype()), device(TARGETS)))
    )
    assert before == after


def test_padding_rows_get_exactly_zero_gradient(backend_name, randn, device):
    loss_fn = LabelSmoothedCrossEntropy(0.1, pad_id=PAD)
    loss_fn(randn(2, 3, 5), device(TARGETS))
    dlogits = minitrans.to_numpy(loss_fn.backward())
    assert np.all(dlogits[1, 2] == 0)
    assert np.all(np.abs(dlogits[0]).sum(axis=-1) > 0)  # real targets do get gradient


def test_all_padding_gives_zero_loss_and_zero_gradient(backend_name, randn, device):
    loss_fn = LabelSmoothedCrossEntropy(0.1, pad_id=PAD)
    with warnings_as_errors():
        loss = minitrans.to_numpy(loss_fn(randn(2, 3, 5), device(np.zeros((2, 3), dtype=int))))
        dlogits = minitrans.to_numpy(loss_fn.backward())
    assert float(loss) == 0.0
    assert np.all(dlogits == 0)


def test_huge_logits_give_finite_loss_and_gradient_without_warnings(backend_name, device):
    rng = np.random.default_rng(0)
    logits = device(rng.choice([-1e4, 1e4], size=(2, 3, 5)), dtype=minitrans.get_dtype())
    loss_fn = LabelSmoothedCrossEntropy(0.1, pad_id=PAD)
    with warnings_as_errors():
        loss = minitrans.to_numpy(loss_fn(logits, device(TARGETS)))
        dlogits = minitrans.to_numpy(loss_fn.backward())
    assert np.isfinite(loss) and np.isfinite(dlogits).all()
    expected = host_loss(minitrans.to_numpy(logits), TARGETS, 0.1, PAD)
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_infinite_or_nan_logits_are_refused_through_the_loss(backend_name, device, eps):
    """The logits are checked through the loss: NaN or +inf anywhere, -inf at
    a target (or anywhere with smoothing) are refused naming the logits; -inf
    elsewhere without smoothing is a probability of 0, taken as it is."""
    from minitrans.core.checks import NonFiniteError

    targets = np.array([[1, 2]])
    for value, where, refused in [(np.nan, 0, True), (np.inf, 0, True), (-np.inf, 1, True),
                                  (-np.inf, 0, eps > 0)]:
        logits = np.zeros((1, 2, 4))
        logits[0, 0, where] = value
        loss_fn = LabelSmoothedCrossEntropy(eps)
        run = lambda: loss_fn(device(logits, dtype=minitrans.get_dtype()), device(targets))
        if not refused:
            loss = minitrans.to_numpy(run())
            dlogits = minitrans.to_numpy(loss_fn.backward())
            assert float(loss) == pytest.approx(np.log(3) / 2 + np.log(4) / 2, rel=1e-6)
            assert dlogits[0, 0, 0] == 0 and np.isfinite(dlogits).all()
            continue
        with pytest.raises(NonFiniteError) as info, np.errstate(invalid="ignore"):
            run()
        assert_names(info, "logits")


def test_gradcheck_smoothing_with_padding(float64, randn, device):
    results = assert_gradcheck(
        LabelSmoothedCrossEntropy(0.1, pad_id=PAD), randn(2, 3, 7), device(TARGETS)
    )
    assert [r.tensor for r in results] == ["logits"]


def test_gradcheck_no_smoothing_no_padding(float64, randn, device):
    assert_gradcheck(LabelSmoothedCrossEntropy(0.0), randn(2, 3, 7), device(TARGETS))


def test_targets_out_of_range_names_targets(backend_name, randn, device):
    with pytest.raises(ValueError) as info:
        LabelSmoothedCrossEntropy(0.1, pad_id=PAD)(randn(2, 3, 5), device([[1, 2, 5], [0, 1, 2]]))
    assert_names(info, "targets")


def test_targets_shape_mismatch_names_targets(backend_name, randn, device):
    with pytest.raises(ValueError) as info:
        LabelSmoothedCrossEntropy(0.1, pad_id=PAD)(randn(2, 3, 5), device([[1, 2], [0, 1]]))
    assert_names(info, "targets")


def test_label_smoothing_above_one_names_label_smoothing(backend_name):
    with pytest.raises(ValueError) as info:
        LabelSmoothedCrossEntropy(1.5)
    assert_names(info, "label_smoothing")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_loss_is_0d_array_of_logits_dtype(backend_name, randn, device, dtype):
    with minitrans.using(dtype=dtype):
        loss = LabelSmoothedCrossEntropy(0.1, pad_id=PAD)(randn(2, 3, 5), device(TARGETS))
        assert isinstance(loss, minitrans.get_xp().ndarray)
    assert loss.shape == () and loss.dtype == np.dtype(dtype)


def test_gradient_is_softmax_minus_smoothed_target_over_count(float64, randn, device):
    """dlogits = (softmax - q) / (number of real targets), q = (1-eps) one_hot + eps/V."""
    logits = randn(2, 3, 5)
    loss_fn = LabelSmoothedCrossEntropy(0.1, pad_id=PAD)
    loss_fn(logits, device(TARGETS))
    dlogits = minitrans.to_numpy(loss_fn.backward())
    p = np.exp(host_log_softmax(minitrans.to_numpy(logits)))
    q = 0.9 * np.eye(5)[np.array(TARGETS)] + 0.1 / 5
    expected = (p - q) / 5
    expected[1, 2] = 0.0
    np.testing.assert_allclose(dlogits, expected, rtol=1e-12, atol=1e-15)


def test_backward_scales_linearly_with_dloss(backend_name, randn, device):
    loss_fn = LabelSmoothedCrossEntropy(0.1, pad_id=PAD)
    loss_fn(randn(2, 3, 5), device(TARGETS))
    one = minitrans.to_numpy(loss_fn.backward())
    three = minitrans.to_numpy(loss_fn.backward(3.0))
    assert three.dtype == np.float32
    np.testing.assert_allclose(three, 3 * one, rtol=1e-6)


def test_single_position_1d_logits(float64, device):
    """logits (V,) with a 0-d target: the documented (..., V) / (...) shapes with
    no leading axis. Forward and backward work on every backend and match the
    host formula. (Regression: the strict backend used to return host numpy
    scalars from 0-d ufunc results, so backward raised TypeError there.)"""
    logits_host = np.array([0.5, -1.0, 2.0, 0.0, 1.0])
    loss_fn = LabelSmoothedCrossEntropy(0.1)
    loss = loss_fn(device(logits_host, dtype="float64"), device(np.array(2)))
    np.testing.assert_allclose(
        float(minitrans.to_numpy(loss)), host_loss(logits_host[None], [2], 0.1, None), rtol=1e-12
    )
    dlogits = minitrans.to_numpy(loss_fn.backward())
    p = np.exp(host_log_softmax(logits_host))
    np.testing.assert_allclose(dlogits, p - (0.9 * np.eye(5)[2] + 0.1 / 5), rtol=1e-12, atol=1e-15)


def test_backward_before_forward_is_runtime_error(backend_name):
    with pytest.raises(RuntimeError):
        LabelSmoothedCrossEntropy(0.1).backward()


def test_wrong_upstream_shape_names_dloss(backend_name, randn, device):
    """The loss is 0-d, so its upstream gradient must be 0-d (or a number); a (V,)
    dloss used to broadcast silently into a wrong dlogits."""
    loss_fn = LabelSmoothedCrossEntropy(0.1, pad_id=PAD)
    loss_fn(randn(2, 3, 5), device(TARGETS))
    with pytest.raises(ValueError) as info:
        loss_fn.backward(randn(5))
    assert_names(info, "dloss")


def test_float_targets_are_type_error_naming_targets(backend_name, randn, device):
    with pytest.raises(TypeError) as info:
        LabelSmoothedCrossEntropy(0.1)(randn(2, 5), device([1.0, 2.0]))
    assert_names(info, "targets")


def test_the_short_backward_equals_softmax_minus_the_smoothed_targets(float64, randn, device):
    """dlogits is written without forming q; spelled out, it is (p - q) * weight."""
    from minitrans.layers.loss import smoothed_targets
    from minitrans.ops.softmax import softmax

    logits, targets = randn(2, 3, 7) * 3.0, device(TARGETS)
    loss_fn = LabelSmoothedCrossEntropy(0.2, pad_id=PAD)
    loss_fn.forward(logits, targets)
    real = minitrans.to_numpy(targets) != PAD
    expected = minitrans.to_numpy(softmax(logits)) - minitrans.to_numpy(
        smoothed_targets(targets, 7, 0.2)
    )
    expected *= (real / real.sum())[..., None]
    np.testing.assert_allclose(
        minitrans.to_numpy(loss_fn.backward()), expected, rtol=1e-12, atol=1e-15
    )


def test_the_fast_loss_skips_the_shift_only_where_no_row_can_overflow_or_vanish():
    """On the CPU the fast loss takes exp of the logits themselves only where
    every row's sum of exponentials lies within exp(+-60): the rows' maxima
    are then within 60 of 0 (60 + log V below). A row past either edge, or
    a NaN, makes every row take the reference's shift instead."""
    from minitrans.layers.loss import UNSHIFTED_RANGE, unshifted_exps

    with minitrans.using("numpy", dtype="float32"):
        def unshifted(*rows):
            logits = np.array(rows, dtype=np.float32)
            with warnings_as_errors():  # exp overflows here, silently
                return unshifted_exps(logits, np.empty_like(logits))

        exps, total = unshifted([0.0, 1.0, -3.0], [20.0, -5.0, 0.0])
        np.testing.assert_allclose(exps, np.exp([[0.0, 1.0, -3.0], [20.0, -5.0, 0.0]]),
                                   rtol=1e-6)
        np.testing.assert_allclose(total[:, 0], exps.sum(axis=1), rtol=1e-6)
        edge = UNSHIFTED_RANGE
        assert unshifted([edge - 1.0, 0.0]) is not None
        assert unshifted([edge + 0.5, 0.0]) is None  # the sum passes exp(60)
        assert unshifted([100.0, 0.0], [0.0, 0.0]) is None  # exp(100) overflows float32
        assert unshifted([-edge + 1.0, -80.0]) is not None
        assert unshifted([-edge - 1.0, -80.0], [0.0, 0.0]) is None  # a row too small
        assert unshifted([np.nan, 0.0]) is None

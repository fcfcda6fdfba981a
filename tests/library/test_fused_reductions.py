"""Fused reductions (minitrans.core.fusion): a norm's statistics, a softmax's
row maxima and sums and the loss's sums each take one kernel with the
element-wise work around them, so the device versions of these layers keep
to a few launches each, counted on the strict backend. That the numbers
equal the references is tests/library/test_kernels.py's part."""

import numpy as np
import pytest

import minitrans
from minitrans.core import backend, fusion
from minitrans.core.launches import count_launches
from minitrans.layers import layernorm, rmsnorm
from minitrans.layers.layernorm import LayerNorm
from minitrans.layers.loss import LabelSmoothedCrossEntropy
from minitrans.layers.rmsnorm import RMSNorm
from minitrans.ops import softmax
from tests.library.test_kernels import Draw


@pytest.fixture
def d():
    with minitrans.using("strict", dtype="float32", kernels="fast"):
        yield Draw(0)


def launches_of(action):
    with count_launches() as counted:
        action()
    return counted


def check(counted, most):
    assert counted.count <= most, counted.summary()


def test_layer_norm_forward_is_three_launches_and_backward_five(d):
    layer, x, dy, gamma, beta = LayerNorm(16), d.normal(2, 3, 16), d.normal(2, 3, 16), \
        d.normal(16), d.normal(16)
    check(launches_of(lambda: layernorm.layer_norm(x, gamma, beta, 1e-5)), 3)
    layer.forward(x)
    check(launches_of(lambda: layer.backward(dy)), 5)  # dgamma, dbeta added in, one launch each


def test_rms_norm_forward_is_two_launches_and_backward_three(d):
    layer, x, dy, g = RMSNorm(16), d.normal(2, 3, 16), d.normal(2, 3, 16), d.normal(16)
    check(launches_of(lambda: rmsnorm.rms_norm(x, g, 1e-5)), 2)
    layer.forward(x)
    check(launches_of(lambda: layer.backward(dy)), 3)


@pytest.mark.parametrize("masked", [True, False])
def test_attention_softmax_is_three_launches_and_its_backward_two(d, masked):
    scores, mask = d.normal(2, 2, 3, 5), (d.mask(2, 1, 3, 5) if masked else None)
    check(launches_of(lambda: softmax.attention_softmax(scores, mask, 0.5)), 3)
    P, dP = softmax.attention_softmax(scores, mask, 0.5), d.normal(2, 2, 3, 5)
    check(launches_of(lambda: softmax.attention_softmax_backward(P, dP, 0.5)), 2)


def test_the_loss_forward_is_ten_launches_with_its_weights_and_checks(d):
    loss = LabelSmoothedCrossEntropy(0.1, pad_id=0)
    logits, targets = d.normal(2, 3, 11), d.ids(11, 2, 3)
    check(launches_of(lambda: loss.forward(logits, targets)), 10)


def test_a_fully_masked_row_is_zeros_on_the_device_as_in_the_reference(d):
    scores, mask = d.normal(1, 2, 4, scale=5.0), d.mask(1, 2, 4)  # row 0 all masked
    P = minitrans.to_numpy(softmax.attention_softmax(scores, mask, 0.5))
    assert np.array_equal(P[0, 0], np.zeros(4)) and np.allclose(P[0, 1].sum(), 1.0)


class WideningReductionCupy:
    """A cupy whose fused reduction gives float64 from float32 inputs."""

    def fuse(self, kernel_name):
        return lambda body: lambda *args: body(*args).astype(np.float64)


def test_a_reduction_that_changes_dtype_is_caught_on_its_first_call(monkeypatch):
    @fusion.fused("row_sums_widened")
    def row_sums(x):
        return np.sum(x * 2.0, axis=-1)

    monkeypatch.setattr(backend, "backend_name", lambda: "cupy")
    monkeypatch.setattr(backend, "get_xp", WideningReductionCupy)
    monkeypatch.setattr(fusion, "FELL_BACK", {})
    sums = row_sums(np.ones((3, 4), dtype=np.float32))
    assert sums.dtype == np.float32 and sums.shape == (3,)
    assert "gave float64 from float32" in fusion.FELL_BACK["row_sums_widened"]

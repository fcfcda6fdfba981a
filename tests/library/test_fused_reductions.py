"""Fused reductions (minitrans.core.fusion): a norm's statistics, a softmax's
row maxima and sums and the loss's sums each take one kernel with the
element-wise work around them, so the device versions of these layers keep
to a few launches each, counted on the strict backend. That the numbers
equal the references is tests/library/test_kernels.py's part."""

import numpy as np
import pytest

import minitrans
from minitrans.core import backend, checks, fusion
from minitrans.core.launches import count_launches
from minitrans.layers import layernorm, rmsnorm
from minitrans.layers.add_norm import AddNorm
from minitrans.layers.feedforward import FeedForward
from minitrans.layers.layernorm import LayerNorm
from minitrans.layers.loss import LabelSmoothedCrossEntropy
from minitrans.layers.multihead import MultiHeadAttention
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


# -- the residual connection's sums (layers/add_norm.py): made inside the
# norm's kernels forward, inside the sub-layer's last product backward, so
# that an AddNorm launches only its norm's kernels (and dropout's) around
# its sub-layer's. NORM_LAUNCHES: the norm's launches, forward and backward.
NORM_LAUNCHES = {"layer": (3, 5), "rms": (2, 3)}


def model_launches_of(action):
    """The launches of ``action()`` as a model runs it: its inputs checked once,
    before (``checks.inputs_checked``), not by every layer."""
    with checks.inputs_checked():
        return launches_of(action)


def feed_forward_and_add_norm(norm, dropout):
    return FeedForward(16, 32, rng=0), AddNorm(16, dropout=dropout, norm=norm, rng=1)


@pytest.mark.parametrize("way", ["forward", "infer"])  # infer: incremental decoding's
@pytest.mark.parametrize("norm", sorted(NORM_LAUNCHES))
def test_add_norm_forward_in_eval_and_decoding_adds_the_residual_without_a_launch(d, norm, way):
    ffn, add_norm = feed_forward_and_add_norm(norm, dropout=0.1)
    add_norm.eval()
    x = d.normal(2, 3, 16)
    alone = model_launches_of(lambda: ffn.forward(x)).count
    run = {"forward": lambda: add_norm.forward(x, ffn),
           "infer": lambda: add_norm.infer(x, ffn.forward)}[way]
    check(model_launches_of(run), alone + NORM_LAUNCHES[norm][0])


@pytest.mark.parametrize("dropout", [0.0, 0.1])
@pytest.mark.parametrize("norm", sorted(NORM_LAUNCHES))
def test_add_norm_backward_adds_the_residual_gradient_inside_the_last_product(d, norm, dropout):
    ffn, add_norm = feed_forward_and_add_norm(norm, dropout)
    x, dy = d.normal(2, 3, 16), d.normal(2, 3, 16)
    ffn.forward(x)
    alone = model_launches_of(lambda: ffn.backward(dy)).count
    add_norm.forward(x, ffn)
    dropout_launches = 1 if dropout else 0  # its mask applied to the gradient
    check(model_launches_of(lambda: add_norm.backward(dy)),
          alone + NORM_LAUNCHES[norm][1] + dropout_launches)


@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_add_norm_around_attention_adds_the_residual_gradient_inside_a_product(d, cross):
    attention, add_norm = MultiHeadAttention(16, 2, rng=0), AddNorm(16, dropout=0.1, rng=1)
    x, memory, dy = d.normal(2, 3, 16), d.normal(2, 4, 16), d.normal(2, 3, 16)
    others = (memory,) if cross else ()
    attention.forward(x, *others)
    alone = model_launches_of(lambda: attention.backward(dy)).count
    add_norm.forward(x, attention, *others)
    check(model_launches_of(lambda: add_norm.backward(dy)), alone + NORM_LAUNCHES["layer"][1] + 1)

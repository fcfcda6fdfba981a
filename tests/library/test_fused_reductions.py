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
from minitrans.gradcheck import randomise_params
from minitrans.layers import layernorm, rmsnorm
from minitrans.layers.add_norm import AddNorm
from minitrans.layers.feedforward import FeedForward
from minitrans.layers.layernorm import LayerNorm
from minitrans.layers.loss import LabelSmoothedCrossEntropy
from minitrans.layers.multihead import MultiHeadAttention
from minitrans.layers.rmsnorm import RMSNorm
from minitrans.model.decoder import Decoder
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



# -- a sub-layer's last bias (attention's b_O, the feed-forward's b_2) added
# by its AddNorm on a device, in dropout's residual kernel or in the norm's
# (add_norm.bias_left_to_add_norm), and the memory's gradient summed over
# the decoder's layers inside their products (Decoder.backward).
BIASED_SUBLAYERS = ["feed_forward", "self_attention", "cross_attention"]


def biased_sublayer(kind):
    """(the sub-layer, the other arrays its forward takes), on the current backend."""
    if kind == "feed_forward":
        return FeedForward(16, 32, rng=0), ()
    others = (Draw(7).normal(2, 4, 16),) if kind == "cross_attention" else ()
    return MultiHeadAttention(16, 2, rng=0), others


def function_of_x(sublayer, others):
    """The sub-layer as a function of x alone, as decoding passes it to AddNorm.infer."""
    return lambda x, **options: sublayer.forward(x, *others, **options)


@pytest.mark.parametrize("way", ["train", "eval", "infer"])  # train: with dropout
@pytest.mark.parametrize("pre_norm", [False, True], ids=["post", "pre"])
@pytest.mark.parametrize("kind", BIASED_SUBLAYERS)
def test_add_norm_forward_adds_the_sublayers_bias_without_a_launch(d, kind, pre_norm, way):
    """Around a sub-layer whose forward ends in a bias add, the block costs
    its norm's launches and, where no norm forms the residual's sum
    (dropout's in training, pre-norm's), one kernel for it, which adds the
    bias as well: the sub-layer's own bias launch is gone."""
    sublayer, others = biased_sublayer(kind)
    add_norm = AddNorm(16, dropout=0.1, pre_norm=pre_norm, rng=1)
    add_norm.train(way == "train")
    x = d.normal(2, 3, 16)
    alone = model_launches_of(lambda: sublayer.forward(x, *others)).count  # with its bias
    if way == "infer":
        run = lambda: add_norm.infer(x, function_of_x(sublayer, others), sublayer)  # noqa: E731
    else:
        run = lambda: add_norm.forward(x, sublayer, *others)  # noqa: E731
    run()  # once first: what dropout keeps (a range of element numbers) is made
    sum_kernel = 1 if pre_norm or way == "train" else 0
    counted = model_launches_of(run)
    assert counted.count == alone - 1 + sum_kernel + NORM_LAUNCHES["layer"][0], counted.summary()


def test_a_sublayer_without_biases_is_run_as_it_was(d):
    """bias=False: nothing to leave out, the block's kernels take no bias."""
    sublayer, add_norm = FeedForward(16, 32, rng=0, bias=False), AddNorm(16, dropout=0.1, rng=1)
    x = d.normal(2, 3, 16)
    alone = model_launches_of(lambda: sublayer.forward(x)).count
    add_norm.forward(x, sublayer)
    counted = model_launches_of(lambda: add_norm.forward(x, sublayer))
    assert counted.count == alone + 1 + NORM_LAUNCHES["layer"][0], counted.summary()
    assert "fused residual_dropout_forward" in counted.places


def decoder_backward_launches(n_layers):
    """The launches of a post-norm decoder's backward, with cross-attention."""
    draw = Draw(3)
    decoder = Decoder(n_layers, 16, 2, 32, dropout=0.1, rng=0)
    x, memory, dy = draw.normal(2, 3, 16), draw.normal(2, 4, 16), draw.normal(2, 3, 16)
    decoder.forward(x, memory)
    return model_launches_of(lambda: decoder.backward(dy))


def test_the_decoder_sums_the_memorys_gradient_without_a_launch(d):
    """Each layer adds its dmemory into the sum inside its cross-attention's
    product: two layers' backward is twice one layer's."""
    one, two = decoder_backward_launches(1), decoder_backward_launches(2)
    assert two.count == 2 * one.count, (one.summary(), two.summary())


def block_run(backend_name, kind, pre_norm, dropout, norm):
    """A block's forward (training), every gradient and its decoding step, in
    float64 on ``backend_name``: the host arrays."""
    with minitrans.using(backend_name, dtype="float64", kernels="fast"):
        sublayer, others = biased_sublayer(kind)
        add_norm = AddNorm(16, dropout=dropout, pre_norm=pre_norm, rng=1, norm=norm)
        for layer in (sublayer, add_norm):
            randomise_params(layer, np.random.default_rng(0))
        draw = Draw(5)
        x, dy = draw.normal(2, 3, 16), draw.normal(2, 3, 16)
        y = add_norm.forward(x, sublayer, *others)
        grads = add_norm.backward(dy)
        add_norm.eval()
        decoded = add_norm.infer(x, function_of_x(sublayer, others), sublayer)
        params = [grad for layer in (sublayer, add_norm) for _, _, grad in
                  layer.named_parameters()]
        grads = grads if isinstance(grads, tuple) else (grads,)
        return [minitrans.to_numpy(a) for a in (y, *grads, decoded, *params)]


@pytest.mark.parametrize("norm", ["layer", "rms"])
@pytest.mark.parametrize("dropout", [0.0, 0.3])
@pytest.mark.parametrize("pre_norm", [False, True], ids=["post", "pre"])
@pytest.mark.parametrize("kind", BIASED_SUBLAYERS)
def test_the_bias_added_by_the_block_gives_numpys_numbers(kind, pre_norm, dropout, norm):
    """On the device (strict), with the bias added by the block, the output,
    every gradient and the decoding step are NumPy's, where the sub-layer
    adds it itself."""
    for want, have in zip(block_run("numpy", kind, pre_norm, dropout, norm),
                          block_run("strict", kind, pre_norm, dropout, norm), strict=True):
        np.testing.assert_allclose(have, want, rtol=1e-12, atol=1e-12)


def decoder_run(backend_name, dropout):
    """dx, dmemory and every gradient of a two-layer decoder, float64."""
    with minitrans.using(backend_name, dtype="float64", kernels="fast"):
        decoder = randomise_params(Decoder(2, 16, 2, 32, dropout=dropout, rng=0),
                                   np.random.default_rng(0))
        draw = Draw(3)
        x, memory, dy = draw.normal(2, 3, 16), draw.normal(2, 4, 16), draw.normal(2, 3, 16)
        decoder.forward(x, memory)
        dx, dmemory = decoder.backward(dy)
        grads = [grad for _, _, grad in decoder.named_parameters()]
        return [minitrans.to_numpy(a) for a in (dx, dmemory, *grads)]


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_the_decoders_memory_gradient_on_a_device_is_numpys(dropout):
    for want, have in zip(decoder_run("numpy", dropout), decoder_run("strict", dropout),
                          strict=True):
        np.testing.assert_allclose(have, want, rtol=1e-12, atol=1e-12)

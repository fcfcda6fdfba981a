"""AddNorm: post-norm and pre-norm "Add & Norm" around a sub-layer."""


import numpy as np
import pytest

import minitrans
from minitrans import AddNorm, FeedForward, LayerNorm, MultiHeadAttention
from minitrans.ops.masks import padding_mask
from minitrans.gradcheck import SublayerWithAddNorm, randomise_params
from tests.library.conftest import assert_gradcheck, assert_names


def standalone_copies(sub):
    """A FeedForward and a LayerNorm that share the wrapped layers' parameters
    but nothing else (their own caches and gradients)."""
    inner, norm = sub.sublayer, sub.add_norm.layer_norm
    ff = FeedForward(inner.d_model, inner.d_ff)
    ln = LayerNorm(norm.d_model, eps=norm.eps)
    for mine, theirs in ((ff.W_1, inner.W_1), (ff.W_2, inner.W_2), (ln, norm)):
        mine.params.update(theirs.params)
    return ff, ln


def wrapped(sublayer, d_model=4, **options):
    """``sublayer`` and an AddNorm(d_model, **options) as one layer."""
    return SublayerWithAddNorm(sublayer, AddNorm(d_model, **options))


def wrapped_ffn(pre_norm, d_model=4, d_ff=6):
    sub = wrapped(FeedForward(d_model, d_ff, rng=1), d_model, dropout=0.0, pre_norm=pre_norm, rng=2)
    return randomise_params(sub, np.random.default_rng(0))


def test_post_norm_equals_layernorm_of_x_plus_f_x(float64, randn):
    sub = wrapped_ffn(pre_norm=False)
    ff, ln = standalone_copies(sub)
    x = randn(2, 3, 4)
    expected = minitrans.to_numpy(ln(x + ff(x)))
    np.testing.assert_allclose(minitrans.to_numpy(sub(x)), expected, rtol=1e-12, atol=1e-12)


def test_pre_norm_equals_x_plus_f_of_layernorm_x(float64, randn):
    sub = wrapped_ffn(pre_norm=True)
    ff, ln = standalone_copies(sub)
    x = randn(2, 3, 4)
    expected = minitrans.to_numpy(x + ff(ln(x)))
    np.testing.assert_allclose(minitrans.to_numpy(sub(x)), expected, rtol=1e-12, atol=1e-12)


def test_post_norm_forward_float32(backend_name, randn):
    """The same identity holds on every backend in float32."""
    sub = wrapped_ffn(pre_norm=False)
    ff, ln = standalone_copies(sub)
    x = randn(2, 3, 4)
    np.testing.assert_allclose(
        minitrans.to_numpy(sub(x)), minitrans.to_numpy(ln(x + ff(x))), rtol=1e-5, atol=1e-5
    )


def test_pre_norm_residual_identity_in_input_gradient(float64, randn):
    """Pre-norm, dropout 0: dL/dx = dL/dy + (gradient of F(LayerNorm(x)) w.r.t. x)."""
    sub = wrapped_ffn(pre_norm=True)
    ff, ln = standalone_copies(sub)
    x, dy = randn(2, 3, 4), randn(2, 3, 4)
    sub(x)
    dx = minitrans.to_numpy(sub.backward(dy))
    ff(ln(x))
    through_f = minitrans.to_numpy(ln.backward(ff.backward(dy)))
    np.testing.assert_allclose(dx, minitrans.to_numpy(dy) + through_f, rtol=1e-12, atol=1e-12)
    assert np.abs(through_f).max() > 1e-3  # the check is not dy == dy + 0


def test_gradcheck_post_norm_ffn_with_dropout(float64, randn):
    sub = wrapped(FeedForward(4, 6, rng=1), 4, dropout=0.2, rng=2)
    randomise_params(sub, np.random.default_rng(0))
    results = assert_gradcheck(sub, randn(2, 3, 4))
    assert {r.tensor for r in results} == {
        "x",
        "sublayer.W_1.W",
        "sublayer.W_1.b",
        "sublayer.W_2.W",
        "sublayer.W_2.b",
        "add_norm.layer_norm.gamma",
        "add_norm.layer_norm.beta",
    }


def test_gradcheck_pre_norm_causal_self_attention(float64, randn):
    sub = wrapped(MultiHeadAttention(4, 2, rng=1), 4, dropout=0.2, pre_norm=True, rng=2)
    randomise_params(sub, np.random.default_rng(0))
    results = assert_gradcheck(sub, randn(2, 3, 4), mask=minitrans.causal_mask(3))
    assert "x" in {r.tensor for r in results}


def test_gradcheck_post_norm_cross_attention(float64, randn, device):
    sub = wrapped(MultiHeadAttention(4, 2, rng=1), 4, dropout=0.1, rng=2)
    randomise_params(sub, np.random.default_rng(0))
    src = device([[5, 2, 6, 3], [4, 1, 0, 0]])
    results = assert_gradcheck(sub, randn(2, 3, 4), randn(2, 4, 4), mask=padding_mask(src, 0))
    assert {"x", "others[0]"} <= {r.tensor for r in results}


def test_cross_attention_backward_returns_dx_and_dmemory(backend_name, randn):
    sub = wrapped(MultiHeadAttention(4, 2, rng=1), 4, dropout=0.0, rng=2)
    sub(randn(2, 3, 4), randn(2, 5, 4))
    grads = sub.backward(randn(2, 3, 4))
    assert isinstance(grads, tuple) and len(grads) == 2
    assert grads[0].shape == (2, 3, 4) and grads[1].shape == (2, 5, 4)


def test_sublayer_not_a_module_names_sublayer(backend_name, randn):
    with pytest.raises(TypeError) as info:
        AddNorm(4).forward(randn(2, 3, 4), lambda x: x)
    assert_names(info, "sublayer")


def test_backward_before_forward_is_runtime_error(backend_name, randn):
    with pytest.raises(RuntimeError):
        AddNorm(4).backward(randn(2, 3, 4))


@pytest.mark.parametrize("pre_norm", [False, True], ids=["post", "pre"])
def test_wrong_upstream_shape_names_dy(backend_name, randn, pre_norm):
    sub = wrapped(FeedForward(4, 6), 4, pre_norm=pre_norm)
    sub(randn(2, 3, 4))
    with pytest.raises(ValueError) as info:
        sub.backward(randn(2, 2, 4))
    assert_names(info, "dy")


class _Identity(minitrans.Module):
    """F(x) = x, returning its input itself: the residual sum must not be
    written into it."""

    def forward(self, x):
        return x

    def backward(self, dy):
        return dy


@pytest.mark.parametrize("pre_norm", [False, True])
def test_an_identity_sublayer_leaves_its_input_and_gradient_untouched(float64, randn, pre_norm):
    sub = wrapped(_Identity(), 4, dropout=0.0, pre_norm=pre_norm, rng=0)
    x, dy = randn(2, 3, 4), randn(2, 3, 4)
    x_before, dy_before = minitrans.to_numpy(x).copy(), minitrans.to_numpy(dy).copy()
    sub.forward(x)
    sub.backward(dy)
    np.testing.assert_array_equal(minitrans.to_numpy(x), x_before)
    np.testing.assert_array_equal(minitrans.to_numpy(dy), dy_before)
    assert_gradcheck(sub, x)


def test_the_sublayer_is_not_a_child_of_add_norm(backend_name, randn):
    """The sub-layer's parameters belong to the encoder or decoder layer that
    holds it, beside its AddNorm: AddNorm itself has only the layer norm's."""
    add_norm, ffn = AddNorm(4, dropout=0.0), FeedForward(4, 6)
    names = [name for name, _, _ in add_norm.named_parameters()]
    assert names == ["layer_norm.gamma", "layer_norm.beta"]
    x = randn(2, 3, 4)
    add_norm.forward(x, ffn)
    ffn.zero_grad()
    add_norm.backward(randn(2, 3, 4))
    assert np.abs(minitrans.to_numpy(ffn.W_1.grads["W"])).max() > 0  # its backward ran


# -- the residual's sums inside other kernels: forward inside the norm's
# (LayerNorm.forward_of_sum), backward inside the sub-layer's last product
SUBLAYERS = {"feed_forward": lambda: FeedForward(4, 6, rng=1),
             "self_attention": lambda: MultiHeadAttention(4, 2, rng=1)}


def post_norm_run(backend_name, sublayer, norm="layer"):
    """The forward, backward (dx and every gradient) and decoding step of a
    post-norm AddNorm around ``sublayer``, on ``backend_name`` in float64."""
    with minitrans.using(backend_name, dtype="float64", kernels="fast"):
        sub = wrapped(SUBLAYERS[sublayer](), 4, dropout=0.0, rng=2, norm=norm)
        randomise_params(sub, np.random.default_rng(0))
        host = np.random.default_rng(5)
        x, dy = (minitrans.from_host(host.standard_normal((2, 3, 4))) for _ in range(2))
        y = sub(x)
        dx = sub.backward(dy)
        decoded = sub.add_norm.infer(x, sub.sublayer.forward)
        grads = [grad for _, _, grad in sub.named_parameters()]
        return [minitrans.to_numpy(a) for a in (y, dx, decoded, *grads)]


@pytest.mark.parametrize("norm", ["layer", "rms"])
@pytest.mark.parametrize("sublayer", sorted(SUBLAYERS))
def test_post_norm_on_a_device_equals_numpy(sublayer, norm):
    """The device path (strict: sums formed inside the fused norm kernels
    and the last product) gives NumPy's numbers, forward and backward."""
    for want, have in zip(post_norm_run("numpy", sublayer, norm),
                          post_norm_run("strict", sublayer, norm), strict=True):
        np.testing.assert_allclose(have, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sublayer", sorted(SUBLAYERS))
def test_post_norm_dx_is_dsum_plus_the_sublayers_dx_bit_for_bit_on_numpy(sublayer):
    """Where the sub-layer adds its dx into the residual's gradient (the
    feed-forward's add_to), NumPy's numbers stay those of dF/dx + dsum."""
    with minitrans.using("numpy", dtype="float64"):
        sub = wrapped(SUBLAYERS[sublayer](), 4, dropout=0.0, rng=2)
        randomise_params(sub, np.random.default_rng(0))
        x, dy = (minitrans.from_host(np.random.default_rng(seed).standard_normal((2, 3, 4)))
                 for seed in (5, 6))
        sub(x)
        dx = sub.backward(dy).copy()
        sub(x)  # the caches again, for the same backward by hand
        dsum = sub.add_norm.layer_norm.backward(dy)
        np.testing.assert_array_equal(dx, sub.sublayer.backward(dsum) + dsum)

"""The SwiGLU feed-forward network: (SiLU(x W_gate) * (x W_up)) W_down."""

import numpy as np
import pytest

import minitrans
from minitrans import SwiGLUFeedForward
from minitrans.gradcheck import check_layer, randomise_params
from minitrans.layers import swiglu as swiglu_module
from minitrans.layers.feedforward import FeedForward, build_feed_forward
from minitrans.ops import activations
from tests.library.conftest import assert_gradcheck, assert_names


def host(x):
    return minitrans.to_numpy(x)


def test_silu_and_its_derivative():
    """SiLU(a) = a / (1 + exp(-a)), against central differences; no overflow
    warning at the ends."""
    a = np.linspace(-800, 800, 1601)
    with minitrans.using("numpy", dtype="float64"):
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            silu = activations.silu(a)
        np.testing.assert_allclose(silu, a / (1 + np.exp(-np.clip(a, -700, 700))), rtol=1e-12,
                                   atol=1e-300)
        small = np.linspace(-6, 6, 121)
        numeric = (activations.silu(small + 1e-6) - activations.silu(small - 1e-6)) / 2e-6
        np.testing.assert_allclose(activations.silu_backward(small, np.ones_like(small)),
                                   numeric, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("version", ["reference", "fast"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sigmoid_is_both_textbook_forms_each_on_its_side(dtype, version):
    """exp(min(a, 0)) / (1 + exp(-|a|)) (the reference), and 1 / (1 + exp(-a))
    with exp(-a) capped (the fast version), are 1 / (1 + exp(-a)) for a >= 0
    and exp(a) / (1 + exp(a)) for a < 0, each where it cannot overflow, to a
    rounding or two, in the dtype given, with no overflow. At +inf both give
    1; at -inf the reference gives 0 and the fast version 1 / (1 + exp(cap)),
    below the dtype's smallest normal number."""
    sigmoid = getattr(activations.sigmoid, version)
    a = np.concatenate([np.linspace(-120, 120, 4801), [-np.inf, np.inf]]).astype(dtype)
    with minitrans.using("numpy", dtype=dtype):
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            s = sigmoid(a)
    wide = np.clip(a.astype(np.float64), -700, 700)  # both branches are computed
    expected = np.where(wide >= 0, 1 / (1 + np.exp(-wide)), np.exp(wide) / (1 + np.exp(wide)))
    tiny = np.finfo(dtype).tiny  # below it, float32 keeps too few digits to compare
    assert s.dtype == dtype and s[-1] == 1
    assert s[-2] == 0 if version == "reference" else 0 < s[-2] < tiny
    normal = np.isfinite(a) & (expected > tiny)
    np.testing.assert_allclose(s[normal], expected[normal], rtol=4 * np.finfo(dtype).eps)


def test_forward_equals_host_reference(float64, randn):
    layer = randomise_params(SwiGLUFeedForward(4, 6, rng=0), np.random.default_rng(0))
    x = randn(2, 3, 4)
    p = {name: host(value) for name, value, _ in layer.named_parameters()}
    xh = host(x)
    a, u = xh @ p["W_gate.W"] + p["W_gate.b"], xh @ p["W_up.W"] + p["W_up.b"]
    expected = (a / (1 + np.exp(-a)) * u) @ p["W_down.W"] + p["W_down.b"]
    np.testing.assert_allclose(host(layer(x)), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bias", [True, False], ids=["biases", "no-biases"])
@pytest.mark.parametrize("shape", [(2, 3, 4), (5, 4)], ids=["3d", "2d"])
def test_gradcheck(float64, randn, bias, shape):
    layer = randomise_params(SwiGLUFeedForward(4, 6, rng=0, bias=bias), np.random.default_rng(0))
    results = assert_gradcheck(layer, randn(*shape))
    names = {"x", "W_gate.W", "W_up.W", "W_down.W"}
    assert {r.tensor for r in results} == names | (
        {"W_gate.b", "W_up.b", "W_down.b"} if bias else set())


def test_the_checker_fails_a_backward_that_forgets_the_gate_s_derivative(float64, randn,
                                                                        monkeypatch):
    """sigma(a) in place of SiLU'(a), the derivative of a sigma(a) without
    its product rule: the gate's gradients and x's go wrong, not W_up's."""
    monkeypatch.setattr(swiglu_module, "swiglu_gate_backward",
                        lambda dm, silu, u, s: (dm * u * s, dm * silu))
    layer = randomise_params(SwiGLUFeedForward(4, 6, rng=0), np.random.default_rng(0))
    failed = {r.tensor for r in check_layer(layer, randn(2, 3, 4)) if not r.passed}
    assert {"x", "W_gate.W", "W_gate.b"} <= failed and not failed & {"W_up.W", "W_down.W"}


def test_a_model_s_activation_picks_the_class_and_names_its_children(backend_name):
    swiglu = build_feed_forward(8, 16, "swiglu", bias=False, rng=0)
    assert isinstance(swiglu, SwiGLUFeedForward)
    assert [name for name, _, _ in swiglu.named_parameters()] == [
        "W_gate.W", "W_up.W", "W_down.W"]
    assert swiglu.num_parameters() == 3 * 8 * 16
    assert isinstance(build_feed_forward(8, 16, "gelu", rng=0), FeedForward)
    with pytest.raises(ValueError) as info:
        FeedForward(8, 16, activation="swiglu")  # two matrices cannot be SwiGLU
    assert_names(info, "activation")


@pytest.mark.parametrize("kwargs, name", [({"d_model": 0}, "d_model"), ({"d_ff": 2.5}, "d_ff"),
                                          ({"bias": "no"}, "bias")])
def test_bad_arguments_are_named(kwargs, name):
    with pytest.raises(ValueError) as info:
        SwiGLUFeedForward(**{"d_model": 4, "d_ff": 6, **kwargs})
    assert_names(info, name)


def test_bad_input_is_named(backend_name, randn):
    with pytest.raises(ValueError) as info:
        SwiGLUFeedForward(4, 6)(randn(2, 3, 5))
    assert_names(info, "x")

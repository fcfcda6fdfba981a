"""The Module contract shared by every layer."""

import numpy as np
import pytest

import minitrans
from minitrans.model.encoder import EncoderLayer
from minitrans.gradcheck import layer_cases


def _layers():
    return [(label, layer) for label, layer, _, _ in layer_cases(np.random.default_rng(0))]


def test_backward_before_forward_is_a_clear_error_for_every_layer(backend_name):
    for label, layer in _layers():
        with pytest.raises(RuntimeError, match=r"backward\(\) was called before forward\(\)"):
            layer.backward(minitrans.get_xp().ones(3))


def test_params_and_grads_have_the_same_keys_and_shapes(backend_name):
    for label, layer in _layers():
        for module in layer.modules():
            assert module.params.keys() == module.grads.keys(), label
            for name in module.params:
                assert module.params[name].shape == module.grads[name].shape, f"{label}.{name}"


def test_gradients_accumulate_until_zero_grad(backend_name):
    for label, layer, inputs, options in layer_cases(np.random.default_rng(0)):
        if not layer.params and not list(layer.named_parameters()):
            continue
        out = layer.forward(*inputs, **options)
        upstream = minitrans.get_xp().ones(out.shape, dtype=out.dtype)
        layer.zero_grad()
        layer.backward(upstream)
        once = {n: minitrans.to_numpy(g).copy() for n, _, g in layer.named_parameters()}
        layer.backward(upstream)
        for name, _, grad in layer.named_parameters():
            np.testing.assert_allclose(
                minitrans.to_numpy(grad),
                2 * once[name],
                rtol=1e-5,
                atol=1e-6,
                err_msg=f"{label}.{name}",
            )
        layer.zero_grad()
        for name, _, grad in layer.named_parameters():
            assert not minitrans.to_numpy(grad).any(), f"{label}.{name}"


def test_qualified_parameter_names(backend_name):
    """The sub-layers themselves, as in the paper; their Add & Norm beside them."""
    layer = EncoderLayer(8, 2, 16, rng=0)
    names = [name for name, _, _ in layer.named_parameters()]
    assert names == [
        "self_attn.W_Q.W", "self_attn.W_Q.b", "self_attn.W_K.W", "self_attn.W_V.W",
        "self_attn.W_V.b", "self_attn.W_O.W", "self_attn.W_O.b",
        "self_attn_norm.layer_norm.gamma", "self_attn_norm.layer_norm.beta",
        "feed_forward.W_1.W", "feed_forward.W_1.b", "feed_forward.W_2.W", "feed_forward.W_2.b",
        "feed_forward_norm.layer_norm.gamma", "feed_forward_norm.layer_norm.beta",
    ]
    attention, norms, ffn = 4 * 64 + 3 * 8, 2 * 2 * 8, 2 * 8 * 16 + 16 + 8
    assert layer.num_parameters() == attention + norms + ffn


def test_lists_of_modules_are_children(backend_name):
    class Stack(minitrans.Module):
        def __init__(self):
            super().__init__()
            self.layers = [minitrans.LayerNorm(4), minitrans.LayerNorm(4)]

    names = [name for name, _, _ in Stack().named_parameters()]
    assert names == ["layers.0.gamma", "layers.0.beta", "layers.1.gamma", "layers.1.beta"]


def test_train_and_eval_switch_every_child(backend_name):
    block = EncoderLayer(4, 2, 8, dropout=0.5)
    block.eval()
    assert not any(m.training for m in block.modules())
    block.train()
    assert all(m.training for m in block.modules())

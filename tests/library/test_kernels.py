"""Every fast kernel equals its reference (``minitrans.core.kernels``), the
comparison is shown catching a wrong fast version, the switch reads the
environment and the API and refuses unknown sets, and the whole model
passes its gradient check and trains on both kernel sets.

Tolerances, as the largest difference over the largest reference value of
each output (a norm-wise relative error):
  float64: 1e-12, as the issue asks; the pairs differ only in summation order
      and in where scalars are folded in, about 1e-16 per operation.
  float32: 1e-5. The sums run over at most a few thousand numbers, and BLAS
      adds them in blocks where NumPy adds pairwise: each ordering is off by
      a few units of 6e-8 times the square root of the length. The largest
      term is the shared shift of ``softmax_in_place``: a score up to 60 below
      its block's maximum is rounded to 60 * 6e-8 / 2 = 2e-6 before exp turns
      that into a relative error of the same size.
"""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import minitrans
from minitrans.core import backend, fusion, kernels
from minitrans.layers import (  # noqa: F401  (the modules of the pairs)
    dropout, embedding, feedforward, grouped, layernorm, loss, loss_device, rmsnorm, rotary,
    swiglu,
)
from minitrans.layers.multihead import MultiHeadAttention
from minitrans.ops import activations, softmax, sums  # noqa: F401  (the modules of the pairs)
from minitrans.ops.random_bits import stream_key
from minitrans.gradcheck import tiny_model
from minitrans.training import experiment
from minitrans.training.optimisation import adam  # noqa: F401
from minitrans.training.trainer import TrainConfig
from tests.library.conftest import assert_gradcheck, assert_names

TOLERANCE = {"float64": 1e-12, "float32": 1e-5}


class Draw:
    """Seeded inputs on the current backend and dtype: two Draws of one
    seed give the reference and the fast version the same, fresh, arrays."""

    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)

    def normal(self, *shape, scale=1.0, shift=0.0):
        return backend.from_host(self.rng.standard_normal(shape) * scale + shift)

    def ids(self, high, *shape):
        return backend.to_device(self.rng.integers(0, high, size=shape))

    def mask(self, *shape, all_false_row=True):
        """A random boolean mask, (..., T_q, T_k), its first row all False."""
        host = self.rng.random(shape) > 0.3
        if all_false_row:
            host[..., 0, :] = False
        return backend.to_device(host)


def _softmax_inputs(d, shape, scale, masked, shift=0.0):
    return d.normal(*shape, scale=scale, shift=shift), (d.mask(*shape) if masked else None)


def _scaled_softmax(k, d, shape, masked, scale):
    """Scores of about 3 * 4 = 12, scaled by attention's 1 / sqrt(d_k) = 0.25."""
    return (k(*_softmax_inputs(d, shape, 12.0, masked), scale),)


def _attention_backward(k, d, shape, masked, scale=None):
    P = softmax.attention_softmax.reference(*_softmax_inputs(d, shape, 2.0, masked))
    return (k(P, d.normal(*shape)) if scale is None else k(P, d.normal(*shape), scale),)


def _loss_inputs(d, shape, vocab_size, scale, pad=True):
    logits, targets = d.normal(*shape, vocab_size, scale=scale), d.ids(vocab_size, *shape)
    real = (targets != 0) if pad else (targets >= 0)  # id 0 is padding
    weights = real.astype(logits.dtype) / max(int(real.sum()), 1)
    return logits, targets, weights


def _loss(k, d, shape, vocab_size, scale, eps=0.1):
    """The loss and p = exps / total: the versions may shift the exponents
    by different constants, which the ratio cancels (the device version
    names its exps, ``loss_device.ShiftedLogits``: ``exponentials`` forms them)."""
    logits, targets, weights = _loss_inputs(d, shape, vocab_size, scale)
    loss_value, exps, total = k(logits, targets, weights, eps, backend.get_xp().empty_like(logits))
    return loss_value, loss_device.exponentials(exps) / total


def _loss_shifted_rows(k, d, offsets, vocab_size=13, eps=0.1):
    """_loss with each row's logits moved by its offset: far above 60, its
    exponentials overflow unshifted; far below -60, they all underflow.
    Either way the fast version must shift, and still agree."""
    logits, targets, weights = _loss_inputs(d, (len(offsets),), vocab_size, 2.0)
    logits = logits + backend.from_host(np.array(offsets))[:, None]
    loss_value, exps, total = k(logits, targets, weights, eps,
                                backend.get_xp().empty_like(logits))
    return loss_value, loss_device.exponentials(exps) / total


def _loss_backward(k, d, shape, vocab_size, dloss, eps=0.1, named=False):
    """dlogits from the reference forward's exps, an array, or (``named``)
    from them named as the device forward names them: the logits and their
    row maxima, which every version must take."""
    logits, targets, weights = _loss_inputs(d, shape, vocab_size, 3.0)
    _, exps, total = loss.smoothed_cross_entropy.reference(logits, targets, weights, eps)
    if named:
        exps = loss_device.ShiftedLogits(logits, logits.max(axis=-1, keepdims=True))
    return (k(dloss, exps, total, targets, weights, eps),)


def _loss_out_of_range(k, d, eps):
    """A target outside [0, V) (the layer refuses it after the loss): no
    version may index with it; only the rows of the other targets are
    compared, their shares of the loss through p and the loss of a batch
    whose weights leave the bad row out."""
    logits, targets, weights = _loss_inputs(d, (4,), 9, 2.0, pad=False)
    targets[1], weights[1] = 9 + 3, 0.0  # out of range, and weighted 0
    loss_value, exps, total = k(logits, targets, weights, eps, backend.get_xp().empty_like(logits))
    p = loss_device.exponentials(exps) / total
    return loss_value, p


# -- gradients added into, and the loss's token weights
def _norm_backward_into(k, d, shape, count):
    """A norm's backward adding its ``count`` parameter gradients into arrays
    that hold some already (as a layer's do after another use)."""
    dy, gamma = d.normal(*shape), d.normal(shape[-1])
    cache = (layernorm.layer_norm.reference(d.normal(*shape), gamma, d.normal(shape[-1]), 1e-5)
             if count == 2 else rmsnorm.rms_norm.reference(d.normal(*shape), gamma, 1e-5))[1]
    grads = tuple(d.normal(shape[-1]) for _ in range(count))
    dx = k(dy, gamma, *cache, grads)[0]
    return (dx, *grads)


def _token_weights(k, d, shape, pad_id, high=4):
    """Targets in [0, high): with pad_id 0, about a quarter of them padding."""
    return (k(d.ids(high, *shape), pad_id, backend.get_dtype()),)


def _rotate_pairs(k, d, shape, inverse=False, heads_view=False):
    """Rotary positions on x (B, h, T, d_k): a fresh array, or (``heads_view``)
    the (B, T, h, d_k) view that split_heads gives attention."""
    batch, heads, length, width = shape
    x = d.normal(batch, length, heads, width).swapaxes(1, 2) if heads_view else d.normal(*shape)
    cos, sin = rotary.rotary_tables(length + 3, width)
    cos, sin = cos[3:], sin[3:]  # from position 3, as at an offset
    return (k(x, cos, -sin if inverse else sin),)


def _grouped_attention(k, d, shape, kv_heads, mask_heads=None):
    """Forward and backward of grouped-query attention: Q (B, h, T_q, 2),
    K and V (B, kv_heads, T_q + 1, 2), a mask for every head (``mask_heads``
    h) or one for all (1), or none."""
    batch, heads, length_q = shape
    layer = MultiHeadAttention(2 * heads, heads, rng=0, kv_heads=kv_heads)
    Q = d.normal(batch, heads, length_q, 2)
    K, V = (d.normal(batch, kv_heads, length_q + 1, 2) for _ in range(2))
    mask = None if mask_heads is None else d.mask(batch, mask_heads, length_q, length_q + 1)
    out, backward = k(layer, Q, K, V, mask)
    return (out, *backward(layer, d.normal(batch, heads, length_q, 2)))


def _layer_norm(k, d, shape):
    D = shape[-1]
    y, (x_hat, inv_std) = k(d.normal(*shape, scale=4.0, shift=2.0), d.normal(D), d.normal(D), 1e-5)
    return y, x_hat, inv_std


def _layer_norm_backward(k, d, shape):
    D = shape[-1]
    gamma = d.normal(D)
    _, (x_hat, inv_std) = layernorm.layer_norm.reference(d.normal(*shape), gamma, d.normal(D), 1e-5)
    return k(d.normal(*shape), gamma, x_hat, inv_std)


def _rms_norm(k, d, shape):
    y, (x_hat, inv_rms) = k(d.normal(*shape, scale=4.0, shift=2.0), d.normal(shape[-1]), 1e-5)
    return y, x_hat, inv_rms


def _rms_norm_backward(k, d, shape):
    g = d.normal(shape[-1])
    _, (x_hat, inv_rms) = rmsnorm.rms_norm.reference(d.normal(*shape), g, 1e-5)
    return k(d.normal(*shape), g, x_hat, inv_rms)


def _add_rows(k, d, vocab_size, count, *scale):
    table = d.normal(vocab_size, 6)
    k(table, d.ids(vocab_size, count), d.normal(count, 6), *scale)  # many repeated ids
    return (table,)


def _affine_grads(k, d, rows, bias=True, tied=False):
    """grad_W (4, 6) and grad_b (6,) after a layer's gradients are added into
    them; ``tied``: grad_W a transposed view, as the tied output projection's."""
    grad_W = d.normal(6, 4).T if tied else d.normal(4, 6)
    grad_b = d.normal(6) if bias else None
    k(grad_W, grad_b, d.normal(rows, 4), d.normal(rows, 6))
    return (grad_W, grad_b) if bias else (grad_W,)


def _adam(k, d, t, weight_decay):
    param, grad, m = d.normal(37, 5), d.normal(37, 5), d.normal(37, 5, scale=0.1)
    v = d.normal(37, 5, scale=0.1) ** 2
    k(param, grad, m, v, t, 1e-3, (0.9, 0.98), 1e-9, weight_decay)
    return param, m, v


def _dropout(k, d, shape, residual=False):
    """a * m * scale (added to a residual), about 70% of m kept, scale 1 / 0.75."""
    keep = d.mask(*shape, all_false_row=False)
    arrays = (d.normal(*shape),) if residual else ()
    return (k(*arrays, d.normal(*shape), keep, 1.0 / 0.75),)


def _bias_activation(k, d, shape, bias=True):
    """The feed-forward's bias and activation on a fresh product x W_1 (the
    fast versions write into it): ReLU's r, or GELU's (a, GELU(a))."""
    result = k(d.normal(*shape, scale=2.0), d.normal(shape[-1]) if bias else None)
    return result if isinstance(result, tuple) else (result,)


def _relu_backward(k, d, shape):
    r = backend.get_xp().maximum(d.normal(*shape, scale=2.0), 0.0)  # ReLU's output
    return (k(d.normal(*shape), r),)


def _gelu_backward(k, d, shape):
    a = d.normal(*shape, scale=2.0)
    return (k(a, activations.gelu_gate(a), d.normal(*shape)),)


def _swiglu_gate_backward(k, d, shape):
    u = d.normal(*shape)
    _, silu, s = swiglu.swiglu_gate.reference(d.normal(*shape, scale=4.0), u)
    return k(d.normal(*shape), silu, u, s)


# name -> cases; a case runs a kernel on a Draw and returns the arrays to compare
CASES = {
    **{name: [lambda k, d: (k(d.normal(4, 7, shift=1.0)),),
              lambda k, d: (k(d.normal(2, 3, 64)),),
              # a batch of one, a long row; shifted, because rounding is relative to
              # sum |x|, which for 8000 zero-mean numbers is ~100 times |sum x|
              lambda k, d: (k(d.normal(1, 8000, shift=3.0)),)]
       for name in ("sum_last", "mean_last", "sum_leading")},
    **{name: [lambda k, d: (k(d.normal(4, 7), d.normal(4, 7)),),
              lambda k, d: (k(d.normal(3, 2, 64), d.normal(3, 2, 64)),)]
       for name in ("dot_last", "dot_leading")},
    "attention_softmax": [
        lambda k, d: (k(*_softmax_inputs(d, (2, 3, 5, 5), 3.0, masked=False)),),
        lambda k, d: (k(*_softmax_inputs(d, (2, 3, 5, 6), 3.0, masked=True)),),  # row all masked
        lambda k, d: (k(*_softmax_inputs(d, (2, 2, 4, 4), 100.0, masked=True)),),  # spread > 60
        # every score near 100, close together: one shift per block, not 0
        lambda k, d: (k(*_softmax_inputs(d, (2, 3, 5, 6), 3.0, masked=True, shift=100.0)),),
        lambda k, d: (k(*_softmax_inputs(d, (1, 1, 1, 6), 1.0, masked=False)),),  # batch of one
        lambda k, d: _scaled_softmax(k, d, (2, 3, 5, 6), masked=True, scale=0.25),
        lambda k, d: _scaled_softmax(k, d, (2, 5, 6), masked=False, scale=0.125),
    ],
    "attention_softmax_backward": [
        lambda k, d: _attention_backward(k, d, (2, 3, 5, 6), masked=True),
        lambda k, d: _attention_backward(k, d, (1, 1, 1, 4), masked=False),
        lambda k, d: _attention_backward(k, d, (2, 3, 5, 6), masked=True, scale=0.25),
    ],
    "sigmoid": [lambda k, d: (k(d.normal(4, 7)),),
                # both ends: below -88 float32's sigmoid is under its smallest normal number
                lambda k, d: (k(d.normal(3, 50, scale=40.0)),)],
    "rotate_pairs": [lambda k, d: _rotate_pairs(k, d, (2, 3, 5, 8)),
                     lambda k, d: _rotate_pairs(k, d, (2, 3, 5, 8), inverse=True, heads_view=True),
                     lambda k, d: _rotate_pairs(k, d, (1, 1, 1, 2))],
    "grouped_attention": [lambda k, d: _grouped_attention(k, d, (2, 4, 3), 2, mask_heads=1),
                          lambda k, d: _grouped_attention(k, d, (2, 4, 3), 1, mask_heads=4),
                          lambda k, d: _grouped_attention(k, d, (1, 6, 1), 2)],
    "layer_norm": [lambda k, d: _layer_norm(k, d, (3, 5, 16)),
                   lambda k, d: _layer_norm(k, d, (1, 1, 8))],
    "layer_norm_backward": [lambda k, d: _layer_norm_backward(k, d, (3, 5, 16)),
                            lambda k, d: _layer_norm_backward(k, d, (1, 1, 8)),
                            lambda k, d: _norm_backward_into(k, d, (3, 5, 16), 2)],
    "rms_norm": [lambda k, d: _rms_norm(k, d, (3, 5, 16)), lambda k, d: _rms_norm(k, d, (1, 1, 8))],
    "rms_norm_backward": [lambda k, d: _rms_norm_backward(k, d, (3, 5, 16)),
                          lambda k, d: _rms_norm_backward(k, d, (1, 1, 8)),
                          lambda k, d: _norm_backward_into(k, d, (3, 5, 16), 1)],
    "smoothed_cross_entropy": [
        lambda k, d: _loss(k, d, (3, 5), 11, 3.0),  # padding targets
        lambda k, d: _loss(k, d, (2, 4), 70, 1e3),  # large logits: no NaN
        lambda k, d: _loss(k, d, (1, 1), 9, 1.0),
        lambda k, d: _loss(k, d, (3, 5), 11, 3.0, eps=0.0),  # no smoothing: no mean taken
        lambda k, d: _loss_shifted_rows(k, d, [0.0, 150.0, 3.0]),  # one row overflows
        lambda k, d: _loss_shifted_rows(k, d, [-150.0, -200.0]),  # every exp underflows
        lambda k, d: _loss_shifted_rows(k, d, [50.0, -50.0]),  # near the edges
        lambda k, d: _loss_out_of_range(k, d, 0.1),  # nothing indexes with a bad target
        lambda k, d: _loss_out_of_range(k, d, 0.0),
    ],
    "smoothed_cross_entropy_backward": [
        lambda k, d: _loss_backward(k, d, (3, 5), 11, 1.0),
        lambda k, d: _loss_backward(k, d, (1, 2), 70, 0.5),
        lambda k, d: _loss_backward(k, d, (3, 5), 11, 1.0, eps=0.0),
        lambda k, d: _loss_backward(k, d, (3, 5), 11, 1.0, named=True),
        lambda k, d: _loss_backward(k, d, (1, 2), 70, 0.5, eps=0.0, named=True),
    ],
    # gradients added into, and the loss's token weights
    "token_weights": [lambda k, d: _token_weights(k, d, (3, 5), 0),
                      lambda k, d: _token_weights(k, d, (2, 7), None),
                      lambda k, d: _token_weights(k, d, (1, 1), 0, high=1)],  # all padding
    "add_rows_at": [lambda k, d: _add_rows(k, d, 11, 40),  # one-hot product
                    lambda k, d: _add_rows(k, d, 100, 300),  # flat add.at
                    lambda k, d: _add_rows(k, d, 11, 40, 8.0),  # scaled, as Embedding's
                    lambda k, d: _add_rows(k, d, 100, 300, 0.3)],
    "add_affine_grads": [lambda k, d: _affine_grads(k, d, 15),
                         lambda k, d: _affine_grads(k, d, 1, bias=False),
                         lambda k, d: _affine_grads(k, d, 15, tied=True)],
    "dropout_scale": [lambda k, d: _dropout(k, d, (3, 5, 8)), lambda k, d: _dropout(k, d, (1,))],
    "residual_dropout": [lambda k, d: _dropout(k, d, (3, 5, 8), residual=True),
                         lambda k, d: _dropout(k, d, (1,), residual=True)],
    **{name: [lambda k, d: _bias_activation(k, d, (3, 5, 16)),
              lambda k, d: _bias_activation(k, d, (1, 8), bias=False)]
       for name in ("bias_relu", "bias_gelu")},
    "relu_backward": [lambda k, d: _relu_backward(k, d, (3, 5, 16))],
    "gelu_backward": [lambda k, d: _gelu_backward(k, d, (3, 5, 16)),
                      lambda k, d: _gelu_backward(k, d, (1, 1))],
    "swiglu_gate": [lambda k, d: k(d.normal(3, 5, 16, scale=4.0), d.normal(3, 5, 16)),
                    # both ends of the sigmoid: below -88 float32's is under its smallest normal
                    lambda k, d: k(d.normal(2, 50, scale=40.0), d.normal(2, 50))],
    "swiglu_gate_backward": [lambda k, d: _swiglu_gate_backward(k, d, (3, 5, 16))],
    "adam_update": [lambda k, d: _adam(k, d, 1, 0.0), lambda k, d: _adam(k, d, 7, 0.01)],
}


# -- dropout's draw and apply (layers/dropout.py dropout_forward): its device
# version is the fast set's masks, so the cases run the fast set's kernels
def _draw_and_dropout(k, d, shape, residual=False):
    """(y, m as float64) for a mask of stream 5 at p = 0.3, on the fast set."""
    arrays = (d.normal(*shape),) if residual else ()
    with minitrans.using(kernels="fast"):
        y, keep = k(*arrays, d.normal(*shape), stream_key(5), 0.3)
    return y, minitrans.to_numpy(keep).astype(np.float64)


CASES.update({
    "dropout_forward": [lambda k, d: _draw_and_dropout(k, d, (3, 5, 8)),
                        lambda k, d: _draw_and_dropout(k, d, (7,))],  # not a multiple of 4
    "residual_dropout_forward": [lambda k, d: _draw_and_dropout(k, d, (3, 5, 8), True),
                                 lambda k, d: _draw_and_dropout(k, d, (2, 3, 3), True)],
})


# -- a norm of a residual connection's sum (layers/layernorm.py, rmsnorm.py
# layer_norm_of_sum, rms_norm_of_sum): on a device the sum is made inside the norm's kernels
def _norm_of_sum(k, d, shape, params):
    """(y, x_hat, 1 / std or 1 / rms) of the norm of x + residual; params:
    2 (gamma, beta: LayerNorm) or 1 (g: RMSNorm)."""
    x, residual = d.normal(*shape, scale=4.0, shift=2.0), d.normal(*shape, scale=3.0)
    y, (x_hat, inv_scale) = k(x, residual, *(d.normal(shape[-1]) for _ in range(params)), 1e-5)
    return y, x_hat, inv_scale


CASES.update({
    "layer_norm_of_sum": [lambda k, d: _norm_of_sum(k, d, (3, 5, 16), 2),
                          lambda k, d: _norm_of_sum(k, d, (1, 1, 8), 2)],
    "rms_norm_of_sum": [lambda k, d: _norm_of_sum(k, d, (3, 5, 16), 1),
                        lambda k, d: _norm_of_sum(k, d, (1, 1, 8), 1)],
})


SAME_DISTRIBUTION_ONLY = {"dropout_keep_mask"}  # different masks for a seed, by design
# the pairs with a third version, fused for a device (minitrans.core.fusion)
DEVICE_PAIRS = sorted(name for name, pair in kernels.PAIRS.items() if pair.device is not None)


def fast_vs_reference_error(name, version="fast"):
    """The largest norm-wise relative error between a pair's fast version (or
    its ``version``, "device") and its reference over the pair's cases (inf
    for a NaN or a shape mismatch)."""
    pair, worst = kernels.PAIRS[name], 0.0
    for case in CASES[name]:
        expected, got = case(pair.reference, Draw(0)), case(getattr(pair, version), Draw(0))
        for want, have in zip(expected, got):
            want, have = np.asarray(minitrans.to_numpy(want)), np.asarray(minitrans.to_numpy(have))
            if want.shape != have.shape or np.isnan(want).any() or np.isnan(have).any():
                return np.inf
            scale = max(np.abs(want).max(initial=0.0), np.finfo(np.float64).tiny)
            worst = max(worst, np.abs(have - want).max(initial=0.0) / scale)
    return worst


def test_every_pair_has_cases():
    assert set(kernels.PAIRS) == set(CASES) | SAME_DISTRIBUTION_ONLY


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_fast_equals_reference(backend_name, dtype, name):
    with minitrans.using(dtype=dtype):
        assert fast_vs_reference_error(name) < TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", DEVICE_PAIRS)
def test_device_equals_reference(backend_name, dtype, name):
    """The fused version runs here as NumPy (numpy) or as counted launches
    (strict): the same body that cupy.fuse compiles on a GPU."""
    with minitrans.using(dtype=dtype):
        assert fast_vs_reference_error(name, "device") < TOLERANCE[dtype]
    assert not fusion.FELL_BACK, f"fused kernels run op by op instead: {fusion.FELL_BACK}"


def test_device_versions_exist_and_leave_the_numpy_fast_set_alone():
    """The fused versions are a third version: the fast ones are still their own functions."""
    assert {"layer_norm", "layer_norm_backward", "rms_norm", "rms_norm_backward",
            "adam_update", "attention_softmax", "attention_softmax_backward"} <= set(DEVICE_PAIRS)
    for name in DEVICE_PAIRS:
        pair = kernels.PAIRS[name]
        fast_name = pair.fast.__name__  # the module's own function of that name
        assert pair.device is not pair.fast and pair.fast.__globals__[fast_name] is pair.fast


@pytest.mark.parametrize("version, name", [("fast", name) for name in sorted(CASES)]
                         + [("device", name) for name in DEVICE_PAIRS])
def test_the_comparison_catches_a_fast_version_off_by_one_part_in_a_million(
        monkeypatch, version, name):
    pair = kernels.PAIRS[name]
    right = getattr(pair, version)

    def wrong(*args, **kwargs):
        result = right(*args, **kwargs)
        first = result[0] if isinstance(result, tuple) else result
        (args[0] if first is None else first)[...] *= 1 + 1e-6  # in place kernels: the first input
        return result

    monkeypatch.setattr(pair, version, wrong)
    with minitrans.using("numpy", dtype="float64"):
        assert fast_vs_reference_error(name, version) > 1e-7


@pytest.mark.parametrize("version", ["reference", "fast"])
def test_both_dropout_masks_keep_one_minus_p_and_repeat_for_a_seed(backend_name, version):
    draw = getattr(dropout.dropout_keep_mask, version)
    mask = minitrans.to_numpy(draw(stream_key(3), (200, 500), 0.1))
    again = minitrans.to_numpy(draw(stream_key(3), (200, 500), 0.1))
    assert mask.dtype == bool and mask.shape == (200, 500)
    np.testing.assert_array_equal(mask, again)
    assert abs(mask.mean() - 0.9) < 5 * (0.9 * 0.1 / mask.size) ** 0.5  # five standard errors


def test_a_pair_runs_the_version_of_the_active_set(monkeypatch):
    monkeypatch.setattr(kernels, "PAIRS", {})
    twice = kernels.pair(lambda x: ("reference", x), lambda x: ("fast", x), name="twice")
    assert kernels.PAIRS == {"twice": twice}
    with minitrans.using(kernels="fast"):
        assert twice(1) == ("fast", 1)
        with minitrans.using(kernels="reference"):
            assert twice(2) == ("reference", 2)
        assert twice(3) == ("fast", 3)  # using() restored the set
    with pytest.raises(ValueError, match="twice"):
        kernels.pair(twice.reference, twice.fast, name="twice")  # one pair per name


@pytest.mark.parametrize("name, runs", [("numpy", "fast"), ("strict", "device")])
def test_the_fast_set_runs_the_device_version_on_a_device(monkeypatch, name, runs):
    monkeypatch.setattr(kernels, "PAIRS", {})
    thrice = kernels.pair(lambda: "reference", lambda: "fast", name="thrice",
                          device=lambda: "device")
    with minitrans.using(name, kernels="fast"):
        assert thrice() == runs
    with minitrans.using(name, kernels="reference"):
        assert thrice() == "reference"


def test_the_set_is_one_for_every_thread():
    """DataParallel runs the layers on worker threads: they see the caller's set."""
    seen = []
    with minitrans.using(kernels="reference"):
        worker = threading.Thread(target=lambda: seen.append(kernels.active()))
        worker.start()
        worker.join()
    assert seen == ["reference"]


def test_an_unknown_set_is_refused_by_name_and_changes_nothing():
    before = kernels.active()
    with pytest.raises(ValueError) as info:
        minitrans.use(kernels="bogus")
    assert str(info.value) == "kernels: expected 'fast' or 'reference', got 'bogus'"
    with pytest.raises(ValueError):
        with minitrans.using(kernels="quick"):
            pass
    assert kernels.active() == before


def test_using_restores_the_set_after_an_error():
    before = kernels.active()
    with pytest.raises(RuntimeError):
        with minitrans.using(kernels="reference" if before == "fast" else "fast"):
            raise RuntimeError("inside")
    assert kernels.active() == before


def _active_set_in_a_new_process(value):
    env = {"MINITRANS_KERNELS": value} if value is not None else {}
    code = "import minitrans; minitrans.get_xp(); print(minitrans.core.kernels.active())"
    environment = {k: v for k, v in os.environ.items() if k != "MINITRANS_KERNELS"}
    return subprocess.run([sys.executable, "-c", code], env={**environment, **env},
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("value, expected", [(None, "fast"), ("", "fast"),
                                             ("fast", "fast"), ("reference", "reference")])
def test_the_environment_variable_chooses_the_set(value, expected):
    result = _active_set_in_a_new_process(value)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


def test_an_unknown_environment_value_is_refused_on_first_use():
    result = _active_set_in_a_new_process("bogus")
    assert result.returncode != 0
    assert "MINITRANS_KERNELS: expected 'fast' or 'reference', got 'bogus'" in result.stderr


# ------------------------------------------------ the whole model, on both sets


@pytest.mark.parametrize("kernel_set", kernels.KERNEL_SETS)
@pytest.mark.parametrize("name", ["numpy", "strict"])
def test_whole_model_gradients_on_both_kernel_sets(name, kernel_set):
    """Also the whole model's check on the strict backend (tests/library/test_model.py
    checks more variants on numpy)."""
    with minitrans.using(name, dtype="float64", kernels=kernel_set):
        model, batch = tiny_model(tie_embeddings=True, N=1)
        assert_gradcheck(model, *batch)


def _losses(out_dir, steps=30):
    config = TrainConfig(task="copy", steps=steps, batch_size=32, warmup=10, eval_every=100,
                         eval_pairs=10, out_dir=str(out_dir), target_exact_match=1.1)
    sizes = {"d_model": 32, "h": 2, "N": 2, "d_ff": 64, "dropout": 0.1}
    trainer = experiment.new_trainer(config, sizes, progress=False, log=lambda message: None)
    trainer.fit()
    return trainer.history["loss"]


@pytest.mark.parametrize("kernel_set", kernels.KERNEL_SETS)
@pytest.mark.parametrize("name", ["numpy", "strict"])
def test_a_short_training_learns_on_both_kernel_sets(tmp_path, name, kernel_set):
    with minitrans.using(name, kernels=kernel_set):
        losses = _losses(tmp_path / "run")
    assert len(losses) == 30 and np.isfinite(losses).all()
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.3


def test_the_error_message_names_the_kernels_argument():
    with pytest.raises(ValueError) as info:
        minitrans.use(kernels=3)
    assert_names(info, "kernels", "3")


# -- a sub-layer's last bias added by its AddNorm's kernels
# (layers/add_norm.py bias_left_to_add_norm): dropout's residual sum and a
# norm of a residual connection's sum, each given the bias as a third term
def _draw_and_dropout_with_bias(k, d, shape):
    """(residual + (x + b) * m / (1 - p), m as float64), on the fast set."""
    residual, x, bias = d.normal(*shape), d.normal(*shape), d.normal(shape[-1])
    with minitrans.using(kernels="fast"):
        y, keep = k(residual, x, stream_key(5), 0.3, bias)
    return y, minitrans.to_numpy(keep).astype(np.float64)


def _norm_of_sum_with_bias(k, d, shape, params):
    """(y, x_hat, 1 / std or 1 / rms) of the norm of x + bias + residual."""
    x, residual = d.normal(*shape, scale=4.0, shift=2.0), d.normal(*shape, scale=3.0)
    bias = d.normal(shape[-1], scale=2.0)
    y, (x_hat, inv_scale) = k(x, residual, *(d.normal(shape[-1]) for _ in range(params)), 1e-5,
                              bias)
    return y, x_hat, inv_scale


CASES["residual_dropout_forward"] += [
    lambda k, d: _draw_and_dropout_with_bias(k, d, (3, 5, 8)),
    lambda k, d: _draw_and_dropout_with_bias(k, d, (2, 3, 3))]
CASES["layer_norm_of_sum"] += [lambda k, d: _norm_of_sum_with_bias(k, d, (3, 5, 16), 2),
                               lambda k, d: _norm_of_sum_with_bias(k, d, (1, 1, 8), 2)]
CASES["rms_norm_of_sum"] += [lambda k, d: _norm_of_sum_with_bias(k, d, (3, 5, 16), 1),
                             lambda k, d: _norm_of_sum_with_bias(k, d, (1, 1, 8), 1)]

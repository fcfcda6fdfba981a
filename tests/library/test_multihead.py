"""Multi-head attention: self- and cross-attention, masks, parameters."""

import numpy as np
import pytest

import minitrans
from minitrans import MultiHeadAttention
from minitrans.core import backend
from minitrans.gradcheck import randomise_params
from tests.library.conftest import assert_gradcheck

PAD = 0
B, T_Q, T_K, D_MODEL, H = 2, 3, 4, 4, 2


def src_ids(device):
    """(B, T_K) source ids; batch 1 ends in two padding tokens."""
    return device([[5, 2, 6, 3], [4, 1, PAD, PAD]])


def tgt_ids(device):
    """(B, T_Q) target ids; batch 1 ends in one padding token."""
    return device([[1, 2, 1], [3, 1, PAD]])


def host_multihead(layer, x, memory=None, mask=None):
    """The paper's formula, one head at a time, on the host in float64."""
    p = {
        name: minitrans.to_numpy(value).astype(np.float64)
        for name, value, _ in layer.named_parameters()
    }
    x = minitrans.to_numpy(x).astype(np.float64)
    memory = x if memory is None else minitrans.to_numpy(memory).astype(np.float64)
    Q = x @ p["W_Q.W"] + p["W_Q.b"]
    K = memory @ p["W_K.W"]
    V = memory @ p["W_V.W"] + p["W_V.b"]
    d_k = layer.d_model // layer.h
    allowed = None
    if mask is not None:
        allowed = np.broadcast_to(
            minitrans.to_numpy(mask), (x.shape[0], x.shape[1], memory.shape[1])
        )
    heads = []
    for i in range(layer.h):
        block = slice(i * d_k, (i + 1) * d_k)
        scores = Q[..., block] @ K[..., block].swapaxes(-1, -2) / np.sqrt(d_k)
        if allowed is not None:
            scores = np.where(allowed, scores, -np.inf)
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        heads.append((e / e.sum(axis=-1, keepdims=True)) @ V[..., block])
    return np.concatenate(heads, axis=-1) @ p["W_O.W"] + p["W_O.b"]


# ------------------------------------------------------------ gradients


def test_gradcheck_self_attention(float64, randn):
    layer = randomise_params(MultiHeadAttention(D_MODEL, H, rng=0), np.random.default_rng(0))
    results = assert_gradcheck(layer, randn(B, T_Q, D_MODEL))
    assert {r.tensor for r in results} == {
        "x", "W_Q.W", "W_K.W", "W_V.W", "W_O.W", "W_Q.b", "W_V.b", "W_O.b"
    }


def test_gradcheck_masked_self_attention(float64, randn, device):
    layer = randomise_params(MultiHeadAttention(D_MODEL, H, rng=0), np.random.default_rng(1))
    assert_gradcheck(
        layer, randn(B, T_Q, D_MODEL), mask=minitrans.decoder_mask(tgt_ids(device), PAD)
    )


def test_gradcheck_cross_attention_checks_x_and_memory(float64, randn, device):
    layer = randomise_params(MultiHeadAttention(D_MODEL, H, rng=0), np.random.default_rng(2))
    results = assert_gradcheck(
        layer,
        randn(B, T_Q, D_MODEL),
        randn(B, T_K, D_MODEL),
        mask=minitrans.padding_mask(src_ids(device), PAD),
    )
    checked = {r.tensor: r.shape for r in results}
    assert checked["x"] == (B, T_Q, D_MODEL)
    assert checked["memory"] == (B, T_K, D_MODEL)


# ------------------------------------------------------------ values


@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "decoder-mask"])
def test_self_attention_matches_per_head_host_reference(backend_name, randn, device, masked):
    layer = MultiHeadAttention(D_MODEL, H, rng=3)
    randomise_params(layer, np.random.default_rng(3))
    x = randn(B, T_Q, D_MODEL)
    mask = minitrans.decoder_mask(tgt_ids(device), PAD) if masked else None
    out = layer.forward(x, mask=mask)
    assert out.dtype == np.float32
    assert tuple(out.shape) == (B, T_Q, D_MODEL)
    np.testing.assert_allclose(
        minitrans.to_numpy(out), host_multihead(layer, x, mask=mask), rtol=1e-4, atol=1e-5
    )


def test_cross_attention_matches_per_head_host_reference(backend_name, randn, device):
    layer = MultiHeadAttention(8, 4, rng=4)
    randomise_params(layer, np.random.default_rng(4))
    x, memory = randn(B, T_Q, 8), randn(B, T_K, 8)
    mask = minitrans.padding_mask(src_ids(device), PAD)
    out = layer.forward(x, memory, mask=mask)
    np.testing.assert_allclose(
        minitrans.to_numpy(out), host_multihead(layer, x, memory, mask), rtol=1e-4, atol=1e-5
    )


def test_self_attention_backward_returns_one_array(backend_name, randn):
    layer = MultiHeadAttention(D_MODEL, H, rng=0)
    layer.forward(randn(B, T_Q, D_MODEL))
    dx = layer.backward(randn(B, T_Q, D_MODEL))
    assert backend.is_array(dx)
    assert tuple(dx.shape) == (B, T_Q, D_MODEL)


def test_cross_attention_backward_returns_dx_and_dmemory(backend_name, randn):
    layer = MultiHeadAttention(D_MODEL, H, rng=0)
    layer.forward(randn(B, T_Q, D_MODEL), randn(B, T_K, D_MODEL))
    grads = layer.backward(randn(B, T_Q, D_MODEL))
    assert isinstance(grads, tuple) and len(grads) == 2
    dx, dmemory = grads
    assert backend.is_array(dx) and backend.is_array(dmemory)
    assert tuple(dx.shape) == (B, T_Q, D_MODEL)
    assert tuple(dmemory.shape) == (B, T_K, D_MODEL)


@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_backward_sums_the_projections_inside_their_products_on_a_device(randn, cross):
    """dmemory = dK W_K^T + dV W_V^T (and dx = dQ W_Q^T + dmemory for
    self-attention): each product adds into the sum before it, so a device
    launches no separate addition."""
    from minitrans.core.launches import count_launches

    with minitrans.using("strict", dtype="float32"):
        layer = MultiHeadAttention(D_MODEL, H, rng=0)
        layer.forward(randn(B, T_Q, D_MODEL), *([randn(B, T_K, D_MODEL)] if cross else []))
        dout = randn(B, T_Q, D_MODEL)
        with count_launches() as counted:
            layer.backward(dout)
    assert "add" not in counted.places, counted.summary()
    # the four dW, dV W_V^T into dmemory, and for self-attention dQ W_Q^T too
    assert counted.places.count("fused add_product") == (5 if cross else 6)


def test_causal_mask_makes_output_independent_of_later_positions(backend_name, randn):
    T = 5
    layer = MultiHeadAttention(D_MODEL, H, rng=5)
    randomise_params(layer, np.random.default_rng(5))
    x = randn(B, T, D_MODEL)
    mask = minitrans.causal_mask(T)
    out = minitrans.to_numpy(layer.forward(x, mask=mask))
    for t in range(T - 1):
        changed = x.copy()
        changed[:, t + 1 :] = randn(B, T - t - 1, D_MODEL)
        out_changed = minitrans.to_numpy(layer.forward(changed, mask=mask))
        # equal up to rounding: the softmax of attention shifts a block of
        # scores by its maximum, later (masked) scores included; a leak
        # through the mask would differ by about 1, not 1e-7
        np.testing.assert_allclose(out_changed[:, : t + 1], out[:, : t + 1], rtol=1e-5, atol=1e-6)
        assert (
            np.abs(out_changed[:, t + 1 :] - out[:, t + 1 :]).max() > 1e-2
        )  # the change is visible later


def test_padded_memory_positions_do_not_influence_the_output(backend_name, randn, device):
    layer = MultiHeadAttention(D_MODEL, H, rng=6)
    randomise_params(layer, np.random.default_rng(6))
    x, memory = randn(B, T_Q, D_MODEL), randn(B, T_K, D_MODEL)
    mask = minitrans.padding_mask(src_ids(device), PAD)  # batch 1, positions 2 and 3
    out = minitrans.to_numpy(layer.forward(x, memory, mask=mask))

    padded = memory.copy()
    padded[1, 2:] = randn(2, D_MODEL) * 100.0
    changed = minitrans.to_numpy(layer.forward(x, padded, mask=mask))
    np.testing.assert_allclose(changed, out, rtol=1e-5, atol=1e-6)  # up to rounding, as above

    # control: the same change at a real (unpadded) key does change batch 1
    real = memory.copy()
    real[1, 1] = randn(D_MODEL) * 100.0
    assert np.any(minitrans.to_numpy(layer.forward(x, real, mask=mask))[1] != out[1])


# ------------------------------------------------------------ parameters


def test_params_have_no_key_bias_and_grads_match_params(backend_name):
    layer = MultiHeadAttention(D_MODEL, H, rng=0)
    names = {name for name, _, _ in layer.named_parameters()}
    assert names == {"W_Q.W", "W_Q.b", "W_K.W", "W_V.W", "W_V.b", "W_O.W", "W_O.b"}
    for name, value, grad in layer.named_parameters():
        expected = (D_MODEL, D_MODEL) if name.endswith(".W") else (D_MODEL,)
        assert tuple(value.shape) == expected, name
        assert tuple(grad.shape) == expected, name


def test_four_linear_layers_as_figure_2_draws_them(backend_name):
    layer = MultiHeadAttention(D_MODEL, H, rng=0)
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        assert isinstance(getattr(layer, name), minitrans.Linear), name
    assert "b" not in layer.W_K.params  # softmax ignores a key bias
    assert layer.params == {}  # every parameter lives in a Linear


def test_gradients_accumulate_and_zero_grad_resets_them(backend_name, randn, device):
    layer = MultiHeadAttention(D_MODEL, H, rng=0)
    randomise_params(layer, np.random.default_rng(7))
    x, memory, dout = randn(B, T_Q, D_MODEL), randn(B, T_K, D_MODEL), randn(B, T_Q, D_MODEL)
    mask = minitrans.padding_mask(src_ids(device), PAD)

    layer.forward(x, memory, mask=mask)
    layer.backward(dout)
    once = {name: minitrans.to_numpy(g).copy() for name, g in layer.grads.items()}
    assert all(np.any(g != 0) for g in once.values())

    layer.forward(x, memory, mask=mask)
    layer.backward(dout)
    for name, grad in layer.grads.items():
        np.testing.assert_allclose(
            minitrans.to_numpy(grad), 2 * once[name], rtol=1e-6, err_msg=name
        )

    layer.zero_grad()
    for name, grad in layer.grads.items():
        assert np.all(minitrans.to_numpy(grad) == 0.0), name


# ------------------------------------------------------------ masks


MASK_SHAPES = {
    "(T_q, T_k)": (T_Q, T_K),
    "(B, 1, T_k)": (B, 1, T_K),
    "(B, T_q, T_k)": (B, T_Q, T_K),
    "(B, 1, T_q, T_k)": (B, 1, T_Q, T_K),
}


@pytest.mark.parametrize("shape", MASK_SHAPES.values(), ids=MASK_SHAPES.keys())
def test_accepted_mask_shapes_act_like_the_broadcast_full_mask(backend_name, randn, device, shape):
    layer = MultiHeadAttention(D_MODEL, H, rng=8)
    x, memory = randn(B, T_Q, D_MODEL), randn(B, T_K, D_MODEL)
    host_mask = np.random.default_rng(8).random(shape) < 0.6
    host_mask[..., 0] = True  # every query sees at least one key
    without_head_axis = host_mask[:, 0] if host_mask.ndim == 4 else host_mask
    full = np.broadcast_to(without_head_axis, (B, T_Q, T_K))
    out = minitrans.to_numpy(layer.forward(x, memory, mask=device(host_mask)))
    expected = minitrans.to_numpy(layer.forward(x, memory, mask=device(np.ascontiguousarray(full))))
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    "shape", [(B + 1, T_Q, T_K), (T_Q + 1, T_K)], ids=["(B+1, T_q, T_k)", "(T_q+1, T_k)"]
)
def test_mask_shapes_that_do_not_broadcast_are_rejected(backend_name, randn, device, shape):
    layer = MultiHeadAttention(D_MODEL, H, rng=0)
    with pytest.raises(ValueError, match="mask"):
        layer.forward(
            randn(B, T_Q, D_MODEL), randn(B, T_K, D_MODEL), mask=device(np.ones(shape, dtype=bool))
        )


# ------------------------------------------------------------ bad input


def test_d_model_not_divisible_by_h_names_both_numbers():
    with pytest.raises(ValueError) as info:
        MultiHeadAttention(6, 4)
    assert "6" in str(info.value) and "4" in str(info.value)


def test_x_of_rank_2_is_rejected(backend_name, randn):
    with pytest.raises(ValueError, match=r"^x\b"):
        MultiHeadAttention(D_MODEL, H, rng=0).forward(randn(T_Q, D_MODEL))


def test_x_with_wrong_feature_size_is_rejected(backend_name, randn):
    with pytest.raises(ValueError, match=r"^x\b"):
        MultiHeadAttention(D_MODEL, H, rng=0).forward(randn(B, T_Q, D_MODEL + 1))


def test_memory_with_other_batch_size_is_rejected(backend_name, randn):
    with pytest.raises(ValueError, match=r"^memory\b"):
        MultiHeadAttention(D_MODEL, H, rng=0).forward(
            randn(B, T_Q, D_MODEL), randn(B + 1, T_K, D_MODEL)
        )


def test_float32_x_into_float64_layer_is_rejected(backend_name, randn):
    with minitrans.using(dtype="float64"):
        layer = MultiHeadAttention(D_MODEL, H, rng=0)
    assert layer.W_Q.params["W"].dtype == np.float64
    x = randn(B, T_Q, D_MODEL)
    assert x.dtype == np.float32
    with pytest.raises(TypeError, match=r"^x\b"):
        layer.forward(x)


def test_backward_before_forward_raises_runtime_error(backend_name, randn):
    with pytest.raises(RuntimeError, match="forward"):
        MultiHeadAttention(D_MODEL, H, rng=0).backward(randn(B, T_Q, D_MODEL))


def test_the_docstring_tells_the_paper_first_then_points_each_variant_to_its_lesson():
    """The old docstring interleaved grouped-query attention, rotary
    positions and the history of a benchmark with the paper's attention."""
    import pathlib
    import re

    doc = MultiHeadAttention.__doc__
    paper, variants = doc.split("Variants beyond the paper")
    assert "§3.2.2" in paper and "Figure 2" in paper
    for word in ("grouped", "rotary", "kv_heads", "rope"):
        assert word not in paper.lower(), word
    assert "benchmark" not in doc.lower() and "commit" not in doc.lower()
    lessons = pathlib.Path(__file__).parents[2] / "lessons"
    for variant, heading in (("kv_heads", "Grouped-query attention"),
                             ("rope=True", "Rotary positions")):
        item = next(item for item in variants.split("* ") if item.startswith(f"``{variant}``"))
        lesson, section = re.search(r"lesson (\d+), section (\d+)", " ".join(item.split())).groups()
        (path,) = lessons.glob(f"{int(lesson):02d}_*.py")
        assert f"# ## {section}. {heading}" in path.read_text(encoding="utf-8"), (variant, path)

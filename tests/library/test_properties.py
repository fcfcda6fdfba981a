"""Property-based tests: random shapes, head counts and masks (hypothesis)."""


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitrans
from minitrans.ops.softmax import masked_softmax
from minitrans.gradcheck import check_layer, format_table
from minitrans.gradcheck import ModelWithLoss, randomise_params
from tests.conftest import warnings_as_errors

BACKENDS = ["numpy", "strict"]


@st.composite
def scores_and_masks(draw):
    rows = draw(st.integers(1, 5))
    cols = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**16))
    scale = draw(st.sampled_from([1.0, 1e2, 1e4]))
    rng = np.random.default_rng(seed)
    return rng.standard_normal((rows, cols)) * scale, rng.random((rows, cols)) < 0.6


@pytest.mark.parametrize("backend_name", BACKENDS)
@settings(max_examples=40, deadline=None)
@given(case=scores_and_masks())
def test_masked_softmax_rows_are_distributions_or_zero(backend_name, case):
    scores, mask = case
    with minitrans.using(backend_name, dtype="float32"), warnings_as_errors():
        probs = minitrans.to_numpy(masked_softmax(minitrans.to_device(scores, "float32"),
                                                  minitrans.to_device(mask)))
    assert np.isfinite(probs).all()
    assert (probs[~mask] == 0).all()
    sums = probs.sum(axis=-1)
    np.testing.assert_allclose(sums[mask.any(axis=-1)], 1.0, rtol=1e-5)
    assert (sums[~mask.any(axis=-1)] == 0).all()


@st.composite
def attention_configs(draw):
    h = draw(st.sampled_from([1, 2, 3]))
    d_k = draw(st.integers(1, 3))
    batch = draw(st.integers(1, 2))
    length_q = draw(st.integers(1, 3))
    length_k = draw(st.integers(1, 3))
    cross = draw(st.booleans())
    seed = draw(st.integers(0, 2**16))
    return h, d_k, batch, length_q, length_k if cross else length_q, cross, seed


@pytest.mark.parametrize("backend_name", BACKENDS)
@settings(max_examples=25, deadline=None)
@given(config=attention_configs())
def test_multi_head_attention_backward_matches_the_checker(backend_name, config):
    h, d_k, batch, length_q, length_k, cross, seed = config
    rng = np.random.default_rng(seed)
    with minitrans.using(backend_name, dtype="float64"):
        layer = randomise_params(minitrans.MultiHeadAttention(h * d_k, h, rng=rng), rng)
        x = minitrans.to_device(rng.standard_normal((batch, length_q, h * d_k)))
        memory = minitrans.to_device(rng.standard_normal((batch, length_k, h * d_k)))
        mask = minitrans.to_device(rng.random((batch, length_q, length_k)) < 0.7)
        inputs = (x, memory) if cross else (x,)
        with warnings_as_errors():
            out = layer.forward(*inputs, mask=mask)
            results = check_layer(layer, *inputs, mask=mask)
    assert np.isfinite(minitrans.to_numpy(out)).all()
    assert all(r.passed for r in results), format_table(results)


# ------------------------------------------------------------ whole models


@st.composite
def model_cases(draw, min_d_model=1):
    """A small model config and a padded batch for it: any head count that
    divides d_model, either norm placement, tied or not, decoder-only or not,
    rows padded anywhere after their first token."""
    h = draw(st.sampled_from([1, 2, 4]))
    at_least = -(-min_d_model // h)  # ceil: d_model >= min_d_model
    d_model = h * draw(st.integers(at_least, at_least + 2))
    options = dict(decoder_only=draw(st.booleans()), pre_norm=draw(st.booleans()),
                   tie_embeddings=draw(st.booleans()))
    batch = draw(st.integers(1, 3))
    length_src, length_tgt = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2**16))
    config = minitrans.ModelConfig(vocab_size=6, d_model=d_model, h=h, N=draw(st.integers(1, 2)),
                                   d_ff=2 * d_model, dropout=0.0, max_len=6, **options)
    return config, batch, length_src, length_tgt, seed


def _model_and_batch(case):
    config, batch, length_src, length_tgt, seed = case
    rng = np.random.default_rng(seed)

    def padded(length):
        ids = rng.integers(1, config.vocab_size, size=(batch, length))
        keep = rng.integers(1, length + 1, size=batch)  # at least one real token per row
        ids[np.arange(length)[None, :] >= keep[:, None]] = 0
        return minitrans.to_device(ids)

    model_type = minitrans.DecoderOnlyLM if config.decoder_only else minitrans.Transformer
    model = randomise_params(model_type(config, rng=rng), rng)
    tgt_in, tgt_out = padded(length_tgt), padded(length_tgt)
    inputs = (tgt_in,) if config.decoder_only else (padded(length_src), tgt_in)
    return model, inputs, tgt_out


@pytest.mark.parametrize("backend_name", BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@settings(max_examples=30, deadline=None)
@given(case=model_cases())
def test_model_forward_is_finite_and_keeps_its_dtype(backend_name, dtype, case):
    with minitrans.using(backend_name, dtype=dtype), warnings_as_errors():
        model, inputs, targets = _model_and_batch(case)
        loss_fn = minitrans.LabelSmoothedCrossEntropy(0.1, pad_id=0)
        logits = model.forward(*inputs)
        loss = loss_fn.forward(logits, targets)
        model.backward(loss_fn.backward())
        assert logits.dtype == dtype and loss.dtype == dtype
        assert np.isfinite(minitrans.to_numpy(logits)).all() and np.isfinite(float(loss))
        for name, _, grad in model.named_parameters():
            assert grad.dtype == dtype, name
            assert np.isfinite(minitrans.to_numpy(grad)).all(), name


@settings(max_examples=6, deadline=None)
@given(case=model_cases(min_d_model=4))
def test_model_backward_matches_the_checker(case):
    # d_model >= 4: with 1 or 2 features a LayerNorm's output is constant
    # (0, or +-1), so the gradients below a post-norm are rounding noise
    with minitrans.using("numpy", dtype="float64"):
        model, inputs, targets = _model_and_batch(case)
        whole = ModelWithLoss(model)
        results = check_layer(whole, *inputs, targets)
        size = {
            name: float(abs(grad).max()) for name, _, grad in whole.named_parameters()
        }  # the checker's backward
    # Random weights sometimes saturate a softmax, and then W_Q, b_Q and W_K
    # get gradients a million times smaller than the rest (1e-7 against 1):
    # central differences cannot resolve those to 1e-6 of themselves, their
    # rounding noise is about 1e-11. Such a tensor passes when its error is
    # below 1e-9 of the model's largest gradient; every other tensor must
    # pass the usual relative test.
    largest = max(size.values())
    failed = [
        r
        for r in results
        if not r.passed
        and not (size[r.tensor] < 1e-5 * largest and r.rel_error * size[r.tensor] < 1e-9 * largest)
    ]
    assert not failed, format_table(results)


# ------------------------------------------------------------ layers, both dtypes


@st.composite
def feature_arrays(draw):
    leading = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    features = draw(st.integers(1, 6))
    scale = draw(st.sampled_from([1e-3, 1.0, 1e3]))
    return tuple(leading), features, scale, draw(st.integers(0, 2**16))


@pytest.mark.parametrize("layer_name", ["LayerNorm", "FeedForward", "Linear"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@settings(max_examples=15, deadline=None)
@given(case=feature_arrays())
def test_layer_forward_is_finite_keeps_its_dtype_and_backward_matches_the_checker(
    layer_name, dtype, case
):
    leading, features, scale, seed = case
    rng = np.random.default_rng(seed)
    make = {"LayerNorm": lambda: minitrans.LayerNorm(features),
            "FeedForward": lambda: minitrans.FeedForward(features, 2 * features, rng=rng),
            "Linear": lambda: minitrans.Linear(features, 3, rng=rng)}[layer_name]
    with minitrans.using("strict", dtype=dtype), warnings_as_errors():
        layer = randomise_params(make(), rng)
        x = minitrans.to_device(rng.standard_normal((*leading, features)) * scale, dtype)
        out = layer.forward(x)
        dx = layer.backward(minitrans.to_device(rng.standard_normal(out.shape), dtype))
    assert out.dtype == dtype and dx.dtype == dtype
    assert np.isfinite(minitrans.to_numpy(out)).all() and np.isfinite(minitrans.to_numpy(dx)).all()
    if dtype == "float64" and scale == 1.0:  # differences need float64 and a moderate scale
        with minitrans.using("strict", dtype="float64"):
            results = check_layer(layer, x)
        assert all(r.passed for r in results), format_table(results)

"""Property-based tests: random shapes, head counts and masks (hypothesis)."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitrans
from minitrans.gradcheck import check_layer, format_table
from minitrans.gradcheck_report import randomise_params
from minitrans.softmax import masked_softmax

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
    with minitrans.using(backend_name, dtype="float32"), warnings.catch_warnings():
        warnings.simplefilter("error")
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
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = layer.forward(*inputs, mask=mask)
            results = check_layer(layer, *inputs, mask=mask)
    assert np.isfinite(minitrans.to_numpy(out)).all()
    assert all(r.passed for r in results), format_table(results)

"""Lesson 23's exercise: W_Q or W_K in Meta's rotary layout (pairs of
neighbours) turned into Hugging Face's (pairs i, i + d_k/2). The checker
passes the solution, fails the slips a learner is likely to make in the case
that shows them, and its reference is the permutation that Hugging Face's
conversion script applies, and one that keeps every attention score."""

import pathlib

import numpy as np
import pytest

from minitrans_course.exercises_pretrained import check_neighbours_to_halves, neighbours_to_halves
from tests.conftest import load_module
from tests.course.conftest import assert_fails_in_case

SOLUTION = (pathlib.Path(__file__).resolve().parents[2] / "lessons" / "solutions"
            / "23_loading_pretrained_weights.py")
solution = load_module(SOLUTION, "solutions_23_loading_pretrained_weights")


def _whole_width(W, heads):
    """The slip of treating all the columns as one head."""
    return solution.neighbours_to_halves(W, 1)


def _the_other_way(W, heads):
    """Hugging Face's order into Meta's: the inverse permutation."""
    d_in, width = W.shape
    halves = W.reshape(d_in, heads, 2, width // heads // 2)
    return halves.swapaxes(2, 3).reshape(d_in, width)


def _rows_not_columns(W, heads):
    """The permutation applied to the rows, as if W were PyTorch's (out, in)."""
    return solution.neighbours_to_halves(W.T, heads).T


SLIPS = [
    ("the whole width as one head", _whole_width, "several heads"),
    ("the inverse permutation", _the_other_way, "several heads"),
    ("rows instead of columns", _rows_not_columns, "several heads"),
]


@pytest.mark.parametrize("slip, wrong, case", SLIPS, ids=[s for s, _, _ in SLIPS])
def test_slips_fail_naming_the_case(slip, wrong, case):
    assert_fails_in_case(check_neighbours_to_halves, wrong, case)


def test_the_solution_passes_on_many_seeds():
    for seed in range(20):
        result = check_neighbours_to_halves(solution.neighbours_to_halves, quiet=True, seed=seed)
        assert result.passed, result.message


def _hub_permute(w, heads):
    """convert_llama_weights_to_hf.py's permute, on PyTorch's (out, in) layout:
    view(heads, d_k // 2, 2, in).transpose(1, 2).reshape(out, in)."""
    out, d_in = w.shape
    return w.reshape(heads, out // heads // 2, 2, d_in).swapaxes(1, 2).reshape(out, d_in)


def test_the_reference_is_the_conversion_scripts_permutation():
    rng = np.random.default_rng(0)
    for heads, d_k in ((1, 2), (4, 8), (2, 6), (3, 16)):
        W = rng.standard_normal((5, heads * d_k))  # minitrans's (in, out)
        assert np.array_equal(neighbours_to_halves(W, heads), _hub_permute(W.T, heads).T)


def _rotate_neighbours(x, base=10000.0):
    T, d_k = x.shape
    theta = base ** (-np.arange(0, d_k, 2) / d_k)
    turned = (x[:, 0::2] + 1j * x[:, 1::2]) * np.exp(1j * np.arange(T)[:, None] * theta)
    return np.stack([turned.real, turned.imag], axis=-1).reshape(T, d_k)


def _rotate_halves(x, base=10000.0):
    T, d_k = x.shape
    theta = base ** (-np.arange(0, d_k, 2) / d_k)
    angle = np.arange(T)[:, None] * theta
    x1, x2 = x[:, :d_k // 2], x[:, d_k // 2:]
    return np.concatenate([x1 * np.cos(angle) - x2 * np.sin(angle),
                           x2 * np.cos(angle) + x1 * np.sin(angle)], axis=-1)


def test_the_reordered_weights_keep_every_score():
    """Meta's weights with Meta's pairing give the scores of the reordered
    weights with Hugging Face's pairing; with the wrong pairing, others."""
    rng = np.random.default_rng(1)
    x, W_Q, W_K = (rng.standard_normal(shape) for shape in ((9, 12), (12, 8), (12, 8)))
    meta = _rotate_neighbours(x @ W_Q) @ _rotate_neighbours(x @ W_K).T
    hub = (_rotate_halves(x @ neighbours_to_halves(W_Q, 1))
           @ _rotate_halves(x @ neighbours_to_halves(W_K, 1)).T)
    assert np.allclose(meta, hub, atol=1e-12)
    mixed = _rotate_halves(x @ W_Q) @ _rotate_halves(x @ W_K).T
    assert not np.allclose(meta, mixed, atol=1e-3)

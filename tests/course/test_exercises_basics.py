"""The checkers of lesson 1 (Linear backward) and lesson 20 (PyTorch's
in_proj layout) pass their solutions and fail the slips a learner makes,
naming the case that shows each."""

import pathlib

import numpy as np
import pytest

from minitrans_course.exercises_basics import check_linear_backward, check_torch_in_proj
from tests.course.conftest import assert_fails_in_case
from tests.conftest import load_module

SOLUTIONS = pathlib.Path(__file__).resolve().parents[2] / "lessons" / "solutions"
LESSON_1 = load_module(SOLUTIONS / "01_setup_and_backends.py", "solution_01")
LESSON_20 = load_module(SOLUTIONS / "20_checking_against_pytorch.py", "solution_20")


def _db_over_first_axis(x, W, dy):  # sums over B only: right for (N, d), wrong for (B, T, d)
    dx, dW, _ = LESSON_1.linear_backward(x, W, dy)
    return dx, dW, dy.sum(axis=0)


def _dW_of_last_position(x, W, dy):  # x[-1].T @ dy[-1]: the batch's other rows forgotten
    dx, _, db = LESSON_1.linear_backward(x, W, dy)
    return dx, np.outer(x.reshape(-1, x.shape[-1])[-1], dy.reshape(-1, dy.shape[-1])[-1]), db


def _dx_without_transpose(x, W, dy):  # dy @ W: a shape error, or wrong numbers if square
    _, dW, db = LESSON_1.linear_backward(x, W, dy)
    return dy @ W, dW, db


def _untransposed(W_Q, W_K, W_V, b_Q, b_V):
    return np.concatenate([W_Q, W_K, W_V]), np.concatenate([b_Q, np.zeros_like(b_Q), b_V])


def _key_bias_from_query(W_Q, W_K, W_V, b_Q, b_V):
    weight, _ = LESSON_20.torch_in_proj(W_Q, W_K, W_V, b_Q, b_V)
    return weight, np.concatenate([b_Q, b_Q, b_V])


WRONG = [
    (check_linear_backward, _db_over_first_axis, "a batch (B, T, d_in)"),
    (check_linear_backward, _dW_of_last_position, "rows (N, d_in)"),
    (check_linear_backward, _dx_without_transpose, "rows (N, d_in)"),
    (check_torch_in_proj, _untransposed, "random d_model"),
    (check_torch_in_proj, _key_bias_from_query, "random d_model"),
]


@pytest.mark.parametrize("checker, wrong, case", WRONG, ids=[w.__name__ for _, w, _ in WRONG])
def test_a_typical_mistake_fails_in_its_case(checker, wrong, case):
    assert_fails_in_case(checker, wrong, case)

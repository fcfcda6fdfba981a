"""Checkers for the exercises of lesson 1 (the backward of a Linear layer)
and lesson 20 (minitrans's attention weights in PyTorch's layout).

Each reference works element by element or row by row, in float64, another
way than the vectorised answer a learner writes (see ``exercise_checker``
for how cases are run and compared).
"""

import numpy as np

from minitrans_course.exercise_checker import make_case, normal, run_checker


def linear_backward_reference(x, W, dy):
    """(dx, dW, db) of y = x W + b, one position n at a time:
    dx_n = W dy_n,  dW = sum_n outer(x_n, dy_n),  db = sum_n dy_n."""
    x = np.asarray(x, dtype=np.float64)
    W, dy = np.asarray(W, dtype=np.float64), np.asarray(dy, dtype=np.float64)
    rows_x, rows_dy = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
    dx = np.zeros_like(rows_x)
    dW, db = np.zeros_like(W), np.zeros(W.shape[1])
    for n, (x_n, dy_n) in enumerate(zip(rows_x, rows_dy)):
        for i in range(W.shape[0]):
            dx[n, i] = sum(W[i, j] * dy_n[j] for j in range(W.shape[1]))
        dW += np.outer(x_n, dy_n)
        db += dy_n
    return dx.reshape(x.shape), dW, db


def linear_backward_cases(rng):
    def case(name, batch_shape, d_in, d_out, dtype=np.float64):
        x = normal(rng, (*batch_shape, d_in), dtype)
        W = normal(rng, (d_in, d_out), dtype)
        dy = normal(rng, (*batch_shape, d_out), dtype)
        sizes = f"x {x.shape}, W {W.shape}"
        return make_case(name, sizes, (x, W, dy), linear_backward_reference, dtype)

    d_in, d_out = int(rng.integers(2, 7)), int(rng.integers(2, 7))
    B, T = int(rng.integers(2, 5)), int(rng.integers(2, 5))
    return [
        case("rows (N, d_in)", (B * T,), d_in, d_out),
        case("a batch (B, T, d_in)", (B, T), d_in, d_out),
        case("a batch of one", (1, 1), d_in, d_out),
        case("one output feature", (B, T), d_in, 1),
        case("a batch, float32", (B, T), d_in, d_out, np.float32),
    ]


def check_linear_backward(fn, quiet=False, seed=None):
    """fn(x, W, dy) -> (dx, dW, db) for y = x W + b, x (..., d_in), W (d_in,
    d_out), dy (..., d_out): dx like x, dW like W, db (d_out,)."""
    return run_checker("linear backward", fn, linear_backward_cases,
                       "dx = dy @ W.T; flatten x and dy to rows (N, d) before dW = x.T @ dy; "
                       "db sums dy over every axis but the last", quiet, seed,
                       outputs=("dx", "dW", "db"))


def torch_in_proj_reference(W_Q, W_K, W_V, b_Q, b_V):
    """PyTorch's (in_proj_weight (3d, d), in_proj_bias (3d,)), row by row:
    row r of block k is column r of minitrans's W_k (nn.Linear keeps W^T);
    the key block of the bias is zero (minitrans has no key bias)."""
    d = W_Q.shape[0]
    weight, bias = np.zeros((3 * d, d)), np.zeros(3 * d)
    for block, W in enumerate((W_Q, W_K, W_V)):
        for r in range(d):
            weight[block * d + r] = [W[c, r] for c in range(d)]
    bias[:d], bias[2 * d:] = b_Q, b_V
    return weight, bias


def torch_in_proj_cases(rng):
    def case(name, d, dtype=np.float64):
        args = tuple(normal(rng, shape, dtype) for shape in [(d, d)] * 3 + [(d,)] * 2)
        return make_case(name, f"d_model={d}", args, torch_in_proj_reference, dtype)

    return [
        case("random d_model", 2 * int(rng.integers(2, 6))),
        case("d_model = 1", 1),
        case("random d_model, float32", 2 * int(rng.integers(2, 6)), np.float32),
    ]


def check_torch_in_proj(fn, quiet=False, seed=None):
    """fn(W_Q, W_K, W_V, b_Q, b_V) -> (in_proj_weight, in_proj_bias) of
    torch.nn.MultiheadAttention for minitrans's weights, each W (d, d)."""
    return run_checker("PyTorch's in_proj", fn, torch_in_proj_cases,
                       "nn.Linear stores W transposed: stack W_Q.T, W_K.T, W_V.T one above the "
                       "other (axis 0); the bias is b_Q, zeros for the key, b_V", quiet, seed,
                       outputs=("in_proj_weight", "in_proj_bias"))


CHECKERS = {"linear_backward": check_linear_backward, "torch_in_proj": check_torch_in_proj}

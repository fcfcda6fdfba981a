"""Exercises of lesson 22 (today's decoder): RMSNorm forward and backward,
rotary positions at an offset, the SwiGLU feed-forward, and the backward of
grouped-query attention, each checked against a slow reference worked out
another way (``modern_references``).

    from minitrans_course.exercises_modern import check_rotate

    def my_rotate(x, offset, base):
        ...
    check_rotate(my_rotate)
"""

import numpy as np

from minitrans_course import modern_references as ref
from minitrans_course.exercise_checker import make_case, normal, run_checker

# ---------------------------------------------------------------- cases


def rms_norm_cases(rng):
    def case(name, x, eps=1e-5, dtype=np.float64):
        x = np.asarray(x).astype(dtype)
        gamma = (1.0 + normal(rng, x.shape[-1:], scale=0.5)).astype(dtype)
        dy = normal(rng, x.shape, dtype)
        sizes = f"x {x.shape}, eps={eps:g}"
        return make_case(name, sizes, (x, gamma, eps, dy), ref.rms_norm, dtype)

    B, T, D = (int(n) for n in rng.integers(2, 6, size=3))
    zeros = normal(rng, (B, T, D))
    zeros[0, 0] = 0.0  # rms = sqrt(eps): without eps, a division by zero
    return [
        case("random", normal(rng, (B, T, D))),
        case("rows far from a zero mean", normal(rng, (B, T, D)) + 5.0),
        case("a row of zeros", zeros),
        case("eps = 1 (inside the square root)", normal(rng, (B, T, D), scale=0.5), eps=1.0),
        case("positions as rows (n, D)", normal(rng, (T, D))),
        case("one feature", normal(rng, (B, T, 1))),
        case("float32", normal(rng, (B, T, D)), dtype=np.float32),
    ]


def rotate_cases(rng):
    def case(name, shape, offset, base=10000.0, dtype=np.float64):
        x = normal(rng, shape, dtype)
        sizes = f"x {shape} (B, h, T, d_k), offset={offset}, base={base:g}"
        return make_case(name, sizes, (x, offset, base), ref.rotate, dtype)

    B, h = (int(n) for n in rng.integers(1, 4, size=2))
    T, half = int(rng.integers(3, 7)), int(rng.integers(2, 5))
    return [
        case("from position 0", (B, h, T, 2 * half), 0),
        case("from position 5", (B, h, T, 2 * half), 5),
        case("one new position at 100 (a decoding step)", (B, h, 1, 2 * half), 100),
        case("d_k = 2: a single pair", (B, h, T, 2), 3),
        case("Llama 3's base 500000", (B, h, T, 8), 7, base=500000.0),
        case("float32", (B, h, T, 2 * half), 2, dtype=np.float32),
    ]


def swiglu_cases(rng):
    def case(name, shape, d_ff, large=False, dtype=np.float64):
        d_model = shape[-1]
        x = normal(rng, shape, dtype)
        W_gate = normal(rng, (d_model, d_ff), dtype)
        W_up, W_down = normal(rng, (d_model, d_ff), dtype), normal(rng, (d_ff, d_model), dtype)
        if large:  # one position of ones: gate pre-activations +1000 and -1000
            x.reshape(-1, d_model)[0] = 1.0
            W_gate[:, :2] = np.array([1000.0, -1000.0], dtype=dtype) / d_model
        sizes = f"x {shape}, d_ff={d_ff}"
        return make_case(name, sizes, (x, W_gate, W_up, W_down), ref.swiglu, dtype)

    B, T, d = (int(n) for n in rng.integers(2, 6, size=3))
    d_ff = int(rng.integers(3, 12))
    return [
        case("random", (B, T, d), d_ff),
        case("positions as rows (n, d_model)", (T, d), d_ff),
        case("d_ff = 1", (B, T, d), 1),
        case("gate pre-activations of +1000 and -1000", (B, T, d), d_ff, large=True),
        case("float32", (B, T, d), d_ff, dtype=np.float32),
    ]


def grouped_attention_backward_cases(rng):
    def case(name, B, h, kv_heads, T, d_k, dtype=np.float64):
        Q, dout = normal(rng, (B, h, T, d_k), dtype), normal(rng, (B, h, T, d_k), dtype)
        K, V = normal(rng, (B, kv_heads, T, d_k), dtype), normal(rng, (B, kv_heads, T, d_k), dtype)
        sizes = f"B={B}, h={h}, kv_heads={kv_heads}, T={T}, d_k={d_k}"
        return make_case(name, sizes, (Q, K, V, dout), ref.grouped_attention_backward, dtype)

    B, T, d_k = int(rng.integers(1, 3)), int(rng.integers(3, 6)), int(rng.integers(2, 5))
    return [
        case("2 key/value heads for 4 query heads", B, 4, 2, T, d_k),
        case("multi-query: 1 key/value head", B, 4, 1, T, d_k),
        case("groups of 3: 2 key/value heads for 6", B, 6, 2, T, d_k),
        case("multi-head: kv_heads = h", B, 3, 3, T, d_k),
        case("one position", B, 4, 2, 1, d_k),
        case("float32", B, 4, 2, T, d_k, dtype=np.float32),
    ]


# ---------------------------------------------------------------- checkers

# Where rotated vectors a little off (within ten times the tolerance) lose their digits.
ANGLES = ("precision is usually lost in the frequencies base ** (-2i / d_k) or the angles "
          "m * theta_i computed in float32 (np.arange(..., dtype=np.float32), or x's float32 "
          "dtype reused): at m = 100 an angle in float32 errs in its fifth decimal; compute "
          "the angles in float64 and cast the result to x's dtype at the end")


def check_rms_norm(fn, quiet=False, seed=None):
    """fn(x, gamma, eps, dy) -> (y, dx, dgamma): y = gamma * x / sqrt(mean(x^2)
    + eps) over the last axis, and the gradients of sum(y * dy)."""
    return run_checker(
        "RMSNorm", fn, rms_norm_cases,
        "inv_rms = 1 / sqrt(mean(x**2, axis=-1, keepdims=True) + eps), no mean subtracted; "
        "x_hat = x * inv_rms, y = gamma * x_hat; dx = (g - x_hat * mean(g * x_hat)) * inv_rms "
        "with g = dy * gamma, the gradient at x_hat (no -mean(g) term: nothing was centred); "
        "dgamma sums dy * x_hat over every axis but the last", quiet, seed,
        outputs=("y", "dx", "dgamma"))


def check_rotate(fn, quiet=False, seed=None):
    """fn(x, offset, base) -> x (B, h, T, d_k) with each position m = offset
    + t rotated: the pair (x_i, x_{i + d_k/2}) turned by the angle m theta_i,
    theta_i = base^(-2i / d_k), as minitrans and Hugging Face's Llama pair them."""
    return run_checker(
        "rotary positions", fn, rotate_cases,
        "angles = (offset + arange(T))[:, None] * base ** (-arange(0, d_k, 2) / d_k); pair "
        "x1 = x[..., :d_k//2] with x2 = x[..., d_k//2:] (not neighbours 2i, 2i+1); "
        "return concatenate([x1 cos - x2 sin, x2 cos + x1 sin], axis=-1)", quiet, seed,
        precision=ANGLES)


def check_swiglu(fn, quiet=False, seed=None):
    """fn(x, W_gate, W_up, W_down) -> (SiLU(x W_gate) * (x W_up)) W_down, no biases."""
    return run_checker(
        "SwiGLU", fn, swiglu_cases,
        "a = x @ W_gate and u = x @ W_up; SiLU(a) = a * sigmoid(a) on a only, with a sigmoid "
        "that does not overflow (1 / (1 + exp(-a)), not exp(a) / (1 + exp(a)), which is "
        "inf / inf at a = 1000); then (SiLU(a) * u) @ W_down", quiet, seed)


def check_grouped_attention_backward(fn, quiet=False, seed=None):
    """fn(Q, K, V, dout) -> (dQ, dK, dV) of causal attention in which query
    head i of Q (B, h, T, d_k) uses key/value head i // (h / kv_heads) of K
    and V (B, kv_heads, T, d_k)."""
    return run_checker(
        "grouped-query attention backward", fn, grouped_attention_backward_cases,
        "repeat K and V along axis 1 (np.repeat(K, g, axis=1): head i reads i // g, not i % "
        "kv_heads), run the causal attention and its backward over h heads as in lesson 11, "
        "then add up each group's g gradients: dK.reshape(B, kv_heads, g, T, d_k).sum(axis=2)",
        quiet, seed,
        outputs=("dQ", "dK", "dV"))


CHECKERS = {
    "rms_norm": check_rms_norm,
    "rotate": check_rotate,
    "swiglu": check_swiglu,
    "grouped_attention_backward": check_grouped_attention_backward,
}

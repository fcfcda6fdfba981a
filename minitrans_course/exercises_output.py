"""Exercises of lessons 10 and 12: the feed-forward network's backward, the
gradient of the label-smoothed loss, and the shifted decoder input and target
of teacher forcing.

The references are computed another way than minitrans and the solutions do:
the feed-forward backward row by row through the explicit Jacobian and the
chain rule written entry by entry; the loss's gradient by central
differences of a loss written with loops and ``math``; the shifted batch by
filling arrays position by position.
"""

import math

import numpy as np

from minitrans_course import exercise_references as ref
from minitrans_course.exercise_checker import Case, make_case, normal, run_checker

# ------------------------------------------------------------------ lesson 10: FFN backward


def feedforward_backward_reference(x, W1, b1, W2, b2, dy):
    """(dx, dW1, db1, dW2, db2) of y = max(0, x W1 + b1) W2 + b2, one row at a
    time: dx = J^T dy with the row's Jacobian J = W2^T diag(r) W1^T, r_j = 1
    where the pre-activation a_j > 0 (0 at a_j = 0 exactly, as minitrans's
    ReLU), and each parameter's gradient entry by entry."""
    x, W1, b1, W2, dy = (np.asarray(a, np.float64) for a in (x, W1, b1, W2, dy))
    d, d_ff = W1.shape
    rows, dy_rows = x.reshape(-1, d), dy.reshape(-1, W2.shape[1])
    dx = np.empty_like(rows)
    dW1, db1, dW2, db2 = np.zeros_like(W1), np.zeros(d_ff), np.zeros_like(W2), np.zeros(W2.shape[1])
    for n, (row, g) in enumerate(zip(rows, dy_rows)):
        a = [math.fsum(row * W1[:, j]) + b1[j] for j in range(d_ff)]
        r = np.array([1.0 if v > 0 else 0.0 for v in a])
        dx[n] = (W2.T @ np.diag(r) @ W1.T).T @ g
        for j in range(d_ff):
            dhidden = r[j] * math.fsum(W2[j] * g)  # d loss / d a_j
            db1[j] += dhidden
            dW1[:, j] += row * dhidden
            dW2[j] += max(a[j], 0.0) * g
        db2 += g
    return dx.reshape(x.shape), dW1, db1, dW2, db2


def feedforward_backward_cases(rng):
    def case(name, x, d_ff, integer_zero=False):
        dtype, d = x.dtype, x.shape[-1]
        W1, b1 = normal(rng, (d, d_ff), dtype, d**-0.5), normal(rng, d_ff, dtype, 0.5)
        rows = x.reshape(-1, d).astype(np.float64)
        if integer_zero:  # small integers: x W1 + b1 is exact, unit 0 of row 0 exactly 0
            W1 = rng.integers(-2, 3, size=(d, d_ff)).astype(dtype)
            b1 = rng.integers(-2, 3, size=d_ff).astype(dtype)
            b1[0] = -(rows[0] @ W1[:, 0])
        else:  # a pre-activation near 0 is a kink: keep them all 1e-3 away
            while np.abs(rows @ W1 + b1).min() < 1e-3:
                b1 = normal(rng, d_ff, dtype, 0.5)
        W2, b2 = normal(rng, (d_ff, d), dtype, d_ff**-0.5), normal(rng, d, dtype, 0.5)
        dy = normal(rng, x.shape, dtype)
        sizes = f"x {x.shape}, d_ff={d_ff}"
        args = (x, W1, b1, W2, b2, dy)
        return make_case(name, sizes, args, feedforward_backward_reference, dtype)

    B, T, d = int(rng.integers(2, 4)), int(rng.integers(2, 5)), int(rng.integers(2, 6))
    d_ff = int(rng.integers(2, 4)) * d
    integers = rng.integers(-2, 3, size=(B, T, d)).astype(np.float64)
    integers[0, 0, 0] = 1  # row 0 is not all zeros
    return [
        case("2-D input (N, d)", normal(rng, (B * T, d)), d_ff),
        case("3-D input (B, T, d)", normal(rng, (B, T, d)), d_ff),
        case("a batch of one", normal(rng, (1, 1, d)), d_ff),
        case("3-D input, float32", normal(rng, (B, T, d), np.float32), d_ff),
        case("a unit exactly at 0 before the ReLU", integers, d_ff, integer_zero=True),
    ]


def check_feedforward_backward(fn, quiet=False, seed=None):
    """fn(x, W1, b1, W2, b2, dy) -> (dx, dW1, db1, dW2, db2) for
    y = max(0, x W1 + b1) W2 + b2; x and dy (..., d), W1 (d, d_ff), W2 (d_ff, d)."""
    return run_checker(
        "feed-forward backward",
        fn,
        feedforward_backward_cases,
        "recompute a = x W1 + b1 and r = max(0, a); dr = dy W2^T, da = dr * "
        "(a > 0) (0 where a = 0); dW2 = r^T dy, db2 = dy summed over every "
        "position, dW1 = x^T da, db1 = da summed, dx = da W1^T; flatten (B, T) "
        "to rows first for the parameter sums",
        quiet,
        seed,
        outputs=("dx", "dW1", "db1", "dW2", "db2"),
    )


# ------------------------------------------------------------------ lesson 10: loss backward

STEP = 1e-5  # central differences: error about STEP^2 (truncation) + 1e-16 / STEP (rounding)


def _row_loss(z, target, eps):
    """-sum_v q_v log p_v for one row of logits, q = (1 - eps) one_hot + eps / V."""
    log_total = ref.log_sum_exp(z)
    V = len(z)
    q = [(1.0 - eps) * (v == target) + eps / V for v in range(V)]
    return -math.fsum(q[v] * (z[v] - log_total) for v in range(V))


def loss_backward_reference(logits, targets, pad_id, eps):
    """dlogits (B, T, V) of loss = sum of the rows' losses over the targets
    that are not pad_id, divided by their number (0 when there is none), by
    central differences in float64. The loss is a sum of rows, so nudging
    logit (b, t, v) changes row (b, t) only: the rest cancels exactly."""
    logits = np.asarray(logits, np.float64)
    real = [(b, t) for b, t in np.ndindex(targets.shape) if targets[b, t] != pad_id]
    grad = np.zeros_like(logits)
    for b, t in real:
        z = list(logits[b, t])
        for v in range(len(z)):
            up, down = z.copy(), z.copy()
            up[v] += STEP
            down[v] -= STEP
            change = _row_loss(up, targets[b, t], eps) - _row_loss(down, targets[b, t], eps)
            grad[b, t, v] = change / (2 * STEP) / len(real)
    return grad


def loss_backward_cases(rng):
    def case(name, targets, eps, pad_id=0, dtype=np.float64, scale=2.0):
        logits = normal(rng, targets.shape + (V,), dtype, scale)
        sizes = f"targets {targets.shape}, V={V}, pad_id={pad_id}, eps={eps:g}"
        args = (logits, targets, pad_id, eps)
        return make_case(name, sizes, args, loss_backward_reference, dtype)

    B, T, V = int(rng.integers(2, 4)), int(rng.integers(2, 6)), int(rng.integers(4, 10))
    padded = rng.integers(1, V, size=(B, T))
    for b, length in enumerate(rng.integers(1, T + 1, size=B)):
        padded[b, length:] = 0
    padded[0, -1] = 0  # at least one padded target
    one_real = np.zeros((B, T), dtype=np.int64)
    one_real[-1, 0] = rng.integers(1, V)
    other_pad = rng.integers(0, V - 1, size=(B, T))  # pad_id = V - 1; 0 is a word here
    other_pad[0, -1] = V - 1
    return [
        case("no padding", rng.integers(1, V, size=(B, T)), 0.1),
        case("padding", padded, 0.1),
        case("eps = 0 (no smoothing)", padded, 0.0),
        case("a batch of one", padded[:1], 0.1),
        case("all but one target padded", one_real, 0.1),
        case("eps = 0.5, larger logits", padded, 0.5, scale=5.0),
        case("pad_id = V - 1, not 0", other_pad, 0.1, pad_id=V - 1),
        case("padding, float32", padded, 0.1, dtype=np.float32),
    ]


def check_loss_backward(fn, quiet=False, seed=None):
    """fn(logits, targets, pad_id, eps) -> dlogits (B, T, V) of minitrans's
    label-smoothed cross-entropy, averaged over the targets that are not pad_id;
    logits (B, T, V), targets (B, T)."""
    return run_checker(
        "loss backward",
        fn,
        loss_backward_cases,
        "dlogits = (softmax(logits) - q) / N with q = (1 - eps) one_hot(target) "
        "+ eps / V (every word gets eps / V, <pad> too) and N the number of "
        "targets that are not pad_id; rows whose target is pad_id get 0",
        quiet,
        seed,
    )


# ------------------------------------------------------------------ lesson 12: shift right


def shift_right_reference(sentences, bos, eos, pad):
    """(decoder_input, decoder_target), both (B, longest + 1) int64, filled
    position by position: input <bos> y_1 .. y_n, target y_1 .. y_n <eos>,
    then pad on the right (minitrans's make_seq2seq_batch)."""
    T = max(len(s) for s in sentences) + 1
    decoder_input = np.empty((len(sentences), T), dtype=np.int64)
    decoder_target = np.empty((len(sentences), T), dtype=np.int64)
    for b, sentence in enumerate(sentences):
        for t in range(T):
            decoder_input[b, t] = bos if t == 0 else sentence[t - 1] if t <= len(sentence) else pad
            decoder_target[b, t] = (
                sentence[t] if t < len(sentence) else eos if t == len(sentence) else pad
            )
    return decoder_input, decoder_target


def shift_right_cases(rng):
    def case(name, lengths, bos=1, eos=2, pad=0):
        sentences = [[int(i) for i in rng.integers(4, 30, size=n)] for n in lengths]
        sizes = f"lengths {list(lengths)}, bos={bos}, eos={eos}, pad={pad}"
        expected = shift_right_reference(sentences, bos, eos, pad)
        return Case(name, sizes, (sentences, bos, eos, pad), expected)

    B = int(rng.integers(2, 5))
    lengths = [int(n) for n in rng.integers(1, 8, size=B)]
    lengths[0] = max(lengths) + 1  # the others are padded
    return [
        case("sentences of varying lengths", lengths),
        case("one sentence", lengths[:1]),
        case("equal lengths (no padding)", [lengths[0]] * B),
        case("an empty sentence among others", lengths + [0]),
        case("only an empty sentence", [0]),
        case("other special ids (bos=31, eos=32, pad=33)", lengths, 31, 32, 33),
    ]


def check_shift_right(fn, quiet=False, seed=None):
    """fn(sentences, bos, eos, pad) -> (decoder_input, decoder_target), two
    (B, T) integer arrays, T = the longest sentence + 1; sentences are lists
    of token ids of different lengths."""
    return run_checker(
        "shift right",
        fn,
        shift_right_cases,
        "decoder_input = [bos] + sentence, decoder_target = sentence + [eos], "
        "both padded with pad on the RIGHT to the longest sentence + 1 "
        "(an empty sentence gives [bos] and [eos])",
        quiet,
        seed,
        outputs=("decoder_input", "decoder_target"),
    )


CHECKERS = {
    "feedforward_backward": check_feedforward_backward,
    "loss_backward": check_loss_backward,
    "shift_right": check_shift_right,
}

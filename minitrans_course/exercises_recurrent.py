"""The exercise of lesson 0: the backward of a recurrent layer through time.

    rnn_backward(x, W_x, W_h, H, dH) -> (dx, dW_x, dW_h, db)

for the states H of h_t = tanh(x_t W_x + h_{t-1} W_h + b), h_{-1} = 0, and
an upstream gradient dH on every state. The bias itself is not needed: the
states hold all the backward uses of it.

The expected answers are worked out another way than backpropagation
through time: for every pair of steps s >= t the Jacobian dh_s / da_t of a
later state by an earlier pre-activation is built forward in time, matrix by
matrix, and the gradient of a_t is the sum over s of dH_s times it. It takes
O(T^2) products where the backward takes O(T), and shares no recursion with
it.
"""

import numpy as np

from minitrans_course.exercise_checker import make_case, normal, run_checker


def rnn_forward_reference(x, W_x, W_h, b):
    """The recurrence one batch item and one step at a time: H (B, T, d_h)."""
    B, T, _ = x.shape
    H = np.zeros((B, T, W_h.shape[0]))
    for i in range(B):
        h = np.zeros(W_h.shape[0])
        for t in range(T):
            h = np.tanh(x[i, t] @ W_x + h @ W_h + b)
            H[i, t] = h
    return H


def rnn_backward_reference(x, W_x, W_h, H, dH):
    """(dx, dW_x, dW_h, db) in float64 from explicit Jacobians, for one batch
    item at a time: J = dh_s / da_t (d_h, d_h, acting on column vectors) is
    diag(1 - h_t^2) for s = t and diag(1 - h_s^2) W_h^T J for each step after."""
    x, W_x, W_h, H, dH = (np.asarray(a, dtype=np.float64) for a in (x, W_x, W_h, H, dH))
    B, T, d_h = H.shape
    dA = np.zeros((B, T, d_h))
    for i in range(B):
        for t in range(T):
            J = np.diag(1.0 - H[i, t] ** 2)
            dA[i, t] = J.T @ dH[i, t]
            for s in range(t + 1, T):
                J = np.diag(1.0 - H[i, s] ** 2) @ W_h.T @ J
                dA[i, t] += J.T @ dH[i, s]
    H_prev = np.concatenate([np.zeros((B, 1, d_h)), H[:, :-1]], axis=1)  # h_{t-1}, h_{-1} = 0
    dx = np.einsum("btj,ij->bti", dA, W_x)
    dW_x = np.einsum("bti,btj->ij", x, dA)
    dW_h = np.einsum("bti,btj->ij", H_prev, dA)
    return dx, dW_x, dW_h, dA.sum(axis=(0, 1))


def rnn_backward_cases(rng):
    def case(name, B, T, d_in, d_h, dtype=np.float64, w_scale=1.0):
        x = normal(rng, (B, T, d_in))
        W_x = normal(rng, (d_in, d_h), scale=1.0 / np.sqrt(d_in))
        W_h = normal(rng, (d_h, d_h), scale=w_scale / np.sqrt(d_h))
        H = rnn_forward_reference(x, W_x, W_h, normal(rng, (d_h,), scale=0.1))
        dH = normal(rng, (B, T, d_h))
        args = tuple(a.astype(dtype) for a in (x, W_x, W_h, H, dH))
        sizes = f"B={B}, T={T}, d_in={d_in}, d_h={d_h}"
        return make_case(name, sizes, args, rnn_backward_reference, dtype)

    def draw(low, high):
        return int(rng.integers(low, high + 1))

    return [
        case("random sizes", draw(2, 4), draw(3, 7), draw(2, 5), draw(2, 5)),
        case(
            "random sizes, a strong W_h",
            draw(2, 4),
            draw(3, 7),
            draw(2, 5),
            draw(2, 5),
            w_scale=2.0,
        ),
        case("a sequence of length 1", draw(2, 4), 1, draw(2, 5), draw(2, 5)),
        case("a batch of one", 1, draw(3, 7), draw(2, 5), draw(2, 5)),
        case("float32 inputs", draw(2, 4), draw(3, 7), draw(2, 5), draw(2, 5), np.float32),
        case("a long sequence", 2, 40, 3, 4),
    ]


def check_rnn_backward(fn, quiet=False, seed=None):
    """fn(x, W_x, W_h, H, dH) -> (dx, dW_x, dW_h, db): the gradients of
    sum(H * dH) for the states H (B, T, d_h) of a recurrent layer on x
    (B, T, d_in), W_x (d_in, d_h), W_h (d_h, d_h)."""
    return run_checker(
        "rnn backward",
        fn,
        rnn_backward_cases,
        "go backwards in time, t = T-1 .. 0: g = dH_t + (da of step t+1) W_h^T, "
        "da_t = g * (1 - h_t^2); then dx_t = da_t W_x^T, dW_x and db sum da_t over "
        "batch and time, and dW_h sums h_{t-1}^T da_t over every t >= 1",
        quiet,
        seed,
        outputs=("dx", "dW_x", "dW_h", "db"),
    )


CHECKERS = {"rnn_backward": check_rnn_backward}

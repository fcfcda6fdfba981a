"""Exercises of lesson 17: inverted dropout, the GELU's backward and Xavier's
initialisation, each checked against a reference worked out another way.

The references below go element by element with Python floats and ``math``
(no NumPy vector formula, nothing from minitrans), and the GELU's derivative
is written through the logistic sigmoid, 0.5 (1 + tanh(u)) = sigma(2u), not
through tanh as the solution writes it.

    from minitrans_course.exercises_regularisation import check_gelu_backward

    def my_gelu_backward(x, dy):
        ...
    check_gelu_backward(my_gelu_backward)
"""

import math

import numpy as np

from minitrans_course.exercise_checker import make_case, normal, run_checker

GELU_C = math.sqrt(2.0 / math.pi)  # sqrt(2/pi), the tanh approximation's constant
GELU_A = 0.044715  # the coefficient of x^3 in the same approximation


# ---------------------------------------------------------------- references


def _elementwise(function, *arrays):
    """function(a, b, ...) -> tuple, applied to every element of equally shaped
    arrays with Python floats; returns one float64 array per result."""
    flat = [np.asarray(a, dtype=np.float64).ravel().tolist() for a in arrays]
    results = [function(*values) for values in zip(*flat)]
    shape = np.shape(arrays[0])
    return tuple(np.array(column, dtype=np.float64).reshape(shape) for column in zip(*results))


def dropout_reference(x, u, p, dy):
    """(y, dx) of inverted dropout, element by element: an element is kept
    where its uniform draw u >= p (minitrans's Dropout), and kept elements are
    multiplied by 1 / (1 - p) in both directions."""

    def one(x_i, u_i, dy_i):
        factor = 1.0 / (1.0 - p) if u_i >= p else 0.0
        return x_i * factor, dy_i * factor

    return _elementwise(one, x, u, dy)


def _sigmoid(z):
    """1 / (1 + e^-z) without overflow for large |z|."""
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def gelu_backward_reference(x, dy):
    """dx of y = x sigma(2u), u = sqrt(2/pi) (x + 0.044715 x^3), which is the
    tanh approximation 0.5 x (1 + tanh u) written with the sigmoid:
    dy/dx = s + x * 2 s (1 - s) * du/dx with s = sigma(2u)."""

    def one(x_i, dy_i):
        u = GELU_C * (x_i + GELU_A * x_i**3)
        s = _sigmoid(2.0 * u)
        du = GELU_C * (1.0 + 3.0 * GELU_A * x_i**2)
        return (dy_i * (s + x_i * 2.0 * s * (1.0 - s) * du),)

    return _elementwise(one, x, dy)[0]


def xavier_reference(u):
    """W[i, j] = a (2 u[i, j] - 1), a = sqrt(6 / (fan_in + fan_out)), for u of
    shape (fan_in, fan_out) drawn from U[0, 1): a draw from U[-a, a)."""
    fan_in, fan_out = np.shape(u)
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    rows = [[bound * (2.0 * float(v) - 1.0) for v in row] for row in np.asarray(u)]
    return np.array(rows, dtype=np.float64).reshape(fan_in, fan_out)


# ---------------------------------------------------------------- cases


def dropout_cases(rng):
    def case(name, shape, p, dtype=np.float64, on_threshold=False):
        x, dy = normal(rng, shape, dtype), normal(rng, shape, dtype)
        u = rng.random(shape).astype(dtype)
        u.ravel()[:2] = [p / 2, (1 + p) / 2]  # one element dropped (if p > 0), one kept
        if on_threshold:  # some draws exactly p: kept, as u >= p says
            u.ravel()[::3] = dtype(p)
            p = float(dtype(p))
        sizes = f"shape {shape}, p={p:.3g}"
        return make_case(name, sizes, (x, u, p, dy), dropout_reference, dtype)

    B, T, d = (int(n) for n in rng.integers(2, 6, size=3))
    return [
        case("random, p = 0.1", (B, T, d), 0.1),
        case("random p", (B, T, d), float(rng.uniform(0.2, 0.6))),
        case("p = 0 (nothing dropped)", (B, T, d), 0.0),
        case("p close to 1", (B, T, d), 0.95),
        case("float32", (B, T, d), 0.1, np.float32),
        case("a batch of one", (1, T, d), 0.3),
        case("draws equal to p", (B, d), 0.25, on_threshold=True),
    ]


def gelu_backward_cases(rng):
    def case(name, x, dtype=np.float64):
        x = np.asarray(x).astype(dtype)
        dy = normal(rng, x.shape, dtype)
        return make_case(name, f"shape {x.shape}", (x, dy), gelu_backward_reference, dtype)

    B, T, d = (int(n) for n in rng.integers(2, 6, size=3))
    large = rng.uniform(5.0, 50.0, size=(2, 8)) * rng.choice([-1.0, 1.0], size=(2, 8))
    large[0, :2] = [40.0, -40.0]  # u = +-2315: tanh is 1 to the last bit, e^u overflows
    return [
        case("random", normal(rng, (B, T, d), scale=2.0)),
        case("float32", normal(rng, (B, T, d), scale=2.0), np.float32),
        case("zeros", np.zeros((B, d))),
        case("a batch of one", normal(rng, (1, T, d))),
        case("large |x| (tanh saturates)", large),
        case("large |x|, float32", large, np.float32),
    ]


def xavier_cases(rng):
    def case(name, fan_in, fan_out, dtype=np.float64):
        u = rng.random((fan_in, fan_out)).astype(dtype)
        sizes = f"fan_in={fan_in}, fan_out={fan_out}"
        return make_case(name, sizes, (u,), xavier_reference, dtype)

    fan_in = int(rng.integers(2, 40))
    fan_out = fan_in + int(rng.integers(5, 40))  # fan_in != fan_out: "fan_in only" shows
    return [
        case("random sizes", fan_in, fan_out),
        case("fan_out < fan_in", fan_out, fan_in),
        case("square", fan_in, fan_in),
        case("one input", 1, fan_out),
        case("a feed-forward W_1 (64, 256)", 64, 256),
        case("float32", fan_out, fan_in, np.float32),
    ]


# ---------------------------------------------------------------- checkers


def check_dropout(fn, quiet=False, seed=None):
    """fn(x, u, p, dy) -> (y, dx): inverted dropout's forward and backward,
    with u the uniform draws in [0, 1) (an element is kept where u >= p)."""
    return run_checker(
        "inverted dropout",
        fn,
        dropout_cases,
        "keep = u >= p (a draw equal to p is kept); y = x * keep / (1 - p) and "
        "dx = dy * keep / (1 - p): the same mask and the same scale both ways",
        quiet,
        seed,
        outputs=("y", "dx"),
    )


def check_gelu_backward(fn, quiet=False, seed=None):
    """fn(x, dy) -> dx for y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return run_checker(
        "GELU backward",
        fn,
        gelu_backward_cases,
        "product rule: dx = dy * (0.5 (1 + t) + 0.5 x (1 - t^2) du/dx) with "
        "t = tanh(u) (np.tanh, which saturates safely) and du/dx = "
        "sqrt(2/pi) (1 + 3 * 0.044715 x^2)",
        quiet,
        seed,
    )


def check_xavier_init(fn, quiet=False, seed=None):
    """fn(u) -> W, u (fan_in, fan_out) uniform in [0, 1), W uniform in [-a, a)
    with Xavier's bound a = sqrt(6 / (fan_in + fan_out))."""
    return run_checker(
        "Xavier initialisation",
        fn,
        xavier_cases,
        "fan_in, fan_out = u.shape; a = sqrt(6 / (fan_in + fan_out)) (both fans, "
        "6 not 2: U[-a, a] has variance a^2 / 3); W = a * (2 u - 1)",
        quiet,
        seed,
    )


CHECKERS = {
    "dropout": check_dropout,
    "gelu_backward": check_gelu_backward,
    "xavier_init": check_xavier_init,
}

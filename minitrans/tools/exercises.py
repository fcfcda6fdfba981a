"""Checkers for the lessons' exercises: write a forward or a backward yourself,
and find out whether it is right.

Each ``check_*`` function calls your function on random NumPy arrays, compares
the result with minitrans's own implementation, prints a verdict with the
relative error and, when it is wrong, a hint, and returns an
``ExerciseResult``. Your functions take and return plain NumPy arrays
(float64), whatever backend minitrans is set to.

    from minitrans.tools.exercises import check_softmax

    def my_softmax(z):
        ...
    check_softmax(my_softmax)
"""

import dataclasses

import numpy as np

from minitrans.core import backend
from minitrans.layers.positional import sinusoidal_table
from minitrans.ops import softmax
from minitrans.tools.gradcheck import relative_error

TOLERANCE = 1e-7


@dataclasses.dataclass
class ExerciseResult:
    name: str
    passed: bool
    rel_error: float
    message: str

    def __bool__(self):
        return self.passed

    def __repr__(self):  # one line, so that a notebook cell can end with the call
        verdict = "correct" if self.passed else "not yet"
        return f"<{self.name}: {verdict}, relative error {self.rel_error:.1e}>"


def _verdict(name, expected, got, hint, quiet=False):
    """Compare (tuples of) arrays; print and return the verdict."""
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    if len(got) != len(expected):
        return _report(
            name, False, float("inf"), f"expected {len(expected)} arrays, got {len(got)}", quiet
        )
    worst = 0.0
    for want, have in zip(expected, got):
        have = np.asarray(have, dtype=float)
        if have.shape != want.shape:
            return _report(name, False, float("inf"),
                           f"expected shape {want.shape}, got {have.shape}. Hint: {hint}", quiet)
        if not np.all(np.isfinite(have)):
            return _report(
                name, False, float("inf"), f"the result has NaN or inf. Hint: {hint}", quiet
            )
        worst = max(worst, relative_error(have, want))
    passed = worst < TOLERANCE
    message = "correct" if passed else f"not yet. Hint: {hint}"
    return _report(name, passed, worst, message, quiet)


def _report(name, passed, error, message, quiet):
    if not quiet:
        print(f"{name}: {message} (relative error {error:.1e})")
    return ExerciseResult(name, passed, error, message)


def _host(fn, *arrays):
    """Run the reference implementation in float64 NumPy, return host arrays."""
    with backend.using("numpy", dtype="float64"):
        out = fn(*[np.asarray(a, dtype=float) for a in arrays])
    return tuple(np.asarray(o) for o in out) if isinstance(out, tuple) else np.asarray(out)


def check_softmax(fn, quiet=False):
    """fn(z) -> softmax over the last axis of z (B, V); tested with logits up to 1e3."""
    rng = np.random.default_rng(0)
    z = rng.standard_normal((4, 7)) * np.array([[1.0], [10.0], [100.0], [1000.0]])
    return _verdict(
        "softmax",
        _host(softmax.softmax, z),
        fn(z.copy()),
        "exponentiate z minus its row maximum (exp(1000) overflows), then divide by the row sum",
        quiet,
    )


def check_softmax_backward(fn, quiet=False):
    """fn(y, dy) -> dz for y = softmax(z) over the last axis."""
    rng = np.random.default_rng(1)
    y = _host(softmax.softmax, rng.standard_normal((3, 5)))
    dy = rng.standard_normal((3, 5))
    return _verdict(
        "softmax backward",
        _host(softmax.softmax_backward, y, dy),
        fn(y.copy(), dy.copy()),
        "dz_i = y_i (dy_i - sum_j dy_j y_j): the Jacobian is diag(y) - y y^T",
        quiet,
    )


def _attention_reference(Q, K, V, mask):
    from minitrans.layers.attention import ScaledDotProductAttention

    layer = ScaledDotProductAttention()
    out = layer.forward(Q, K, V, mask=None if mask is None else np.asarray(mask, dtype=bool))
    return out, layer


def check_attention(fn, quiet=False):
    """fn(Q, K, V, mask) -> softmax(Q K^T / sqrt(d_k) + M) V, with mask True
    where a query may attend; Q (B, T_q, d_k), K (B, T_k, d_k), V (B, T_k, d_v)."""
    rng = np.random.default_rng(2)
    Q, K, V = (
        rng.standard_normal((2, 3, 4)),
        rng.standard_normal((2, 5, 4)),
        rng.standard_normal((2, 5, 6)),
    )
    mask = np.ones((2, 1, 5), dtype=bool)
    mask[1, 0, 3:] = False  # the last two keys of the second sequence are padding
    expected = _host(lambda q, k, v: _attention_reference(q, k, v, mask)[0], Q, K, V)
    return _verdict(
        "scaled dot-product attention",
        expected,
        fn(Q.copy(), K.copy(), V.copy(), mask.copy()),
        "scores = Q @ K.swapaxes(-1, -2) / sqrt(d_k); masked scores become -inf before the softmax",
        quiet,
    )


def check_attention_backward(fn, quiet=False):
    """fn(Q, K, V, P, dout) -> (dQ, dK, dV), with P the attention weights."""
    rng = np.random.default_rng(3)
    Q, K, V = (
        rng.standard_normal((2, 3, 4)),
        rng.standard_normal((2, 5, 4)),
        rng.standard_normal((2, 5, 6)),
    )
    dout = rng.standard_normal((2, 3, 6))

    def reference(q, k, v, d):
        _, layer = _attention_reference(q, k, v, None)
        return (*layer.backward(d), layer.attention_weights)

    dQ, dK, dV, P = _host(reference, Q, K, V, dout)
    return _verdict("attention backward", (dQ, dK, dV), fn(Q, K, V, P, dout),
                    "dV = P^T dout; dP = dout V^T; dS = P * (dP - rowsum(dP * P)); "
                    "dQ = dS K / sqrt(d_k); dK = dS^T Q / sqrt(d_k)", quiet)


def _layernorm_reference(x, gamma, beta, dy):
    from minitrans.layers.layernorm import LayerNorm

    layer = LayerNorm(x.shape[-1], eps=1e-5)
    layer.params["gamma"], layer.params["beta"] = gamma, beta
    y = layer.forward(x)
    dx = layer.backward(dy)
    return y, dx, layer.grads["gamma"], layer.grads["beta"]


def _layernorm_case():
    rng = np.random.default_rng(4)
    x, dy = rng.standard_normal((2, 3, 6)) * 3 + 1, rng.standard_normal((2, 3, 6))
    gamma, beta = 1 + 0.5 * rng.standard_normal(6), 0.5 * rng.standard_normal(6)
    return x, gamma, beta, dy


def check_layernorm(fn, quiet=False):
    """fn(x, gamma, beta, eps) -> gamma * (x - mean) / sqrt(var + eps) + beta,
    statistics over the last axis (var without Bessel's correction)."""
    x, gamma, beta, dy = _layernorm_case()
    y = _host(_layernorm_reference, x, gamma, beta, dy)[0]
    return _verdict(
        "layer norm",
        y,
        fn(x.copy(), gamma.copy(), beta.copy(), 1e-5),
        "mean and variance over axis=-1 with keepdims=True; var is the mean of (x - mean)^2",
        quiet,
    )


def check_layernorm_backward(fn, quiet=False):
    """fn(x, gamma, beta, eps, dy) -> (dx, dgamma, dbeta) for the layer norm above."""
    x, gamma, beta, dy = _layernorm_case()
    _, dx, dgamma, dbeta = _host(_layernorm_reference, x, gamma, beta, dy)
    return _verdict(
        "layer norm backward",
        (dx, dgamma, dbeta),
        fn(x.copy(), gamma.copy(), beta.copy(), 1e-5, dy.copy()),
        "mu and var depend on x too: dx = (dx_hat - mean(dx_hat) - x_hat * mean(dx_hat * x_hat)) "
        "/ sqrt(var + eps) with dx_hat = dy * gamma; dgamma and dbeta sum over all positions",
        quiet,
    )


def check_positional_encoding(fn, quiet=False):
    """fn(max_len, d_model) -> the (max_len, d_model) sinusoidal table."""
    with backend.using("numpy", dtype="float64"):
        expected = np.asarray(sinusoidal_table(50, 17))
    return _verdict(
        "positional encoding",
        expected,
        fn(50, 17),
        "sin at even features 2i and cos at odd features 2i+1, "
        "both with pos / 10000^(2i / d_model)",
        quiet,
    )


def check_top_p(fn, quiet=False):
    """fn(probs, p) -> the nucleus of each row of probs (B, V), renormalised."""
    from minitrans.decoding import top_p_filter

    probs = np.array([[0.5, 0.3, 0.15, 0.05], [0.05, 0.15, 0.3, 0.5], [0.97, 0.01, 0.01, 0.01]])
    expected = _host(lambda q: top_p_filter(q, 0.9), probs)
    return _verdict("top-p filter", expected, fn(probs.copy(), 0.9),
                    "sort descending, keep a token while the mass before it is < p, zero the rest, "
                    "divide by the kept total", quiet)


CHECKERS = {
    "softmax": check_softmax,
    "softmax_backward": check_softmax_backward,
    "attention": check_attention,
    "attention_backward": check_attention_backward,
    "layernorm": check_layernorm,
    "layernorm_backward": check_layernorm_backward,
    "positional_encoding": check_positional_encoding,
    "top_p": check_top_p,
}

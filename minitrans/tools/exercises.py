"""Checkers for the lessons' exercises: write a forward or a backward yourself,
and find out whether it is right.

Each ``check_*`` function calls your function on several cases (see
``exercise_cases``): a few with random sizes and values, drawn from a seed
that the verdict prints, and the edge cases the exercise is about (a fully
masked row, padding, a batch of one, logits of 1000, float32 inputs). Every
answer is compared with a slow reference worked out another way
(``exercise_references``: loops, ``math.exp``, explicit Jacobians), not with
minitrans's own function. The verdict names the first case that fails, with
its sizes, the relative error and a hint; the checker returns an
``ExerciseResult``. Your functions take and return plain NumPy arrays.

    from minitrans.tools.exercises import check_softmax

    def my_softmax(z):
        ...
    check_softmax(my_softmax)            # a fresh seed each call
    check_softmax(my_softmax, seed=3)    # the same cases again
"""

import dataclasses

import numpy as np

from minitrans.core import checks
from minitrans.tools import exercise_cases as cases
from minitrans.tools.gradcheck import relative_error

TOLERANCE = cases.FLOAT64_TOLERANCE


@dataclasses.dataclass
class ExerciseResult:
    """The verdict: ``rel_error`` is the worst over the cases when all pass,
    else the failing case's; ``case`` names that case ('' when all pass)."""

    name: str
    passed: bool
    rel_error: float
    message: str
    case: str = ""
    seed: int = 0

    def __bool__(self):
        return self.passed

    def __repr__(self):  # one line, so that a notebook cell can end with the call
        verdict = "correct" if self.passed else f"not yet ({self.case})"
        return f"<{self.name}: {verdict}, relative error {self.rel_error:.1e}>"


def _compare(case, got):
    """(relative error, problem or '') of the learner's output for one case."""
    expected = case.expected if isinstance(case.expected, tuple) else (case.expected,)
    got = got if isinstance(got, tuple) else (got,)
    if len(got) != len(expected):
        return float("inf"), f"expected {len(expected)} arrays, got {len(got)}"
    worst = 0.0
    for want, have in zip(expected, got):
        have = np.asarray(have, dtype=np.float64)
        if have.shape != want.shape:
            return float("inf"), f"expected shape {want.shape}, got {have.shape}"
        if not np.all(np.isfinite(have)):
            return float("inf"), "the result has NaN or inf"
        worst = max(worst, relative_error(have, want))
    if worst >= case.tolerance:
        return worst, f"relative error {worst:.1e} (allowed {case.tolerance:.0e})"
    return worst, ""


def _check(name, fn, make_cases, hint, quiet, seed):
    """Run fn on every case; stop at the first that fails."""
    if seed is None:
        seed = int(np.random.default_rng().integers(2**31))
    checks.check_int("seed", seed, low=0)
    worst = 0.0
    all_cases = make_cases(np.random.default_rng(seed))
    for case in all_cases:
        args = tuple(a.copy() if isinstance(a, np.ndarray) else a for a in case.args)
        try:
            with np.errstate(all="ignore"):  # a NaN or inf in the result is the verdict
                error, problem = _compare(case, fn(*args))
        except Exception as exc:  # the learner's code: report, never crash the lesson
            error, problem = float("inf"), f"raised {type(exc).__name__}: {exc}"
        if problem:
            message = f"not yet: {case.label()}: {problem}. Hint: {hint}"
            return _report(ExerciseResult(name, False, error, message, case.label(), seed), quiet)
        worst = max(worst, error)
    message = f"correct on all {len(all_cases)} cases (seed {seed})"
    return _report(ExerciseResult(name, True, worst, message, "", seed), quiet)


def _report(result, quiet):
    if not quiet:
        print(f"{result.name}: {result.message} (relative error {result.rel_error:.1e})")
    return result


def check_softmax(fn, quiet=False, seed=None):
    """fn(z) -> softmax over the last axis of z (B, V) or (B, T, V); tried with
    logits up to 1000 and in float32."""
    return _check("softmax", fn, cases.softmax_cases,
                  "exponentiate z minus its row maximum (exp(1000) overflows), then divide by "
                  "the row sum; both over axis=-1 with keepdims=True", quiet, seed)


def check_softmax_backward(fn, quiet=False, seed=None):
    """fn(y, dy) -> dz for y = softmax(z) over the last axis."""
    return _check("softmax backward", fn, cases.softmax_backward_cases,
                  "dz_i = y_i (dy_i - sum_j dy_j y_j): the Jacobian is diag(y) - y y^T",
                  quiet, seed)


def check_attention(fn, quiet=False, seed=None):
    """fn(Q, K, V, mask) -> softmax(Q K^T / sqrt(d_k) + M) V, with mask True
    where a query may attend, broadcastable to (B, T_q, T_k);
    Q (B, T_q, d_k), K (B, T_k, d_k), V (B, T_k, d_v). A query whose every key
    is masked must get a zero output (it attends to nothing)."""
    return _check("scaled dot-product attention", fn, cases.attention_cases,
                  "scores = Q @ K.swapaxes(-1, -2) / sqrt(d_k); masked scores become -inf "
                  "(not -1e9: a fully masked row would average every value) before the "
                  "softmax, and a row with no finite score gets zero weights", quiet, seed)


def check_attention_backward(fn, quiet=False, seed=None):
    """fn(Q, K, V, P, dout) -> (dQ, dK, dV), with P the attention weights
    (zeros where masked, a zero row for a fully masked query)."""
    return _check("attention backward", fn, cases.attention_backward_cases,
                  "dV = P^T dout; dP = dout V^T; dS = P * (dP - rowsum(dP * P)); "
                  "dQ = dS K / sqrt(d_k); dK = dS^T Q / sqrt(d_k)", quiet, seed)


def check_layernorm(fn, quiet=False, seed=None):
    """fn(x, gamma, beta, eps) -> gamma * (x - mean) / sqrt(var + eps) + beta,
    statistics over the last axis (var without Bessel's correction)."""
    return _check("layer norm", fn, cases.layernorm_cases,
                  "mean and variance over axis=-1 with keepdims=True; var is the mean of "
                  "(x - mean)^2 (divide by d, not d - 1); eps goes inside the square root",
                  quiet, seed)


def check_layernorm_backward(fn, quiet=False, seed=None):
    """fn(x, gamma, beta, eps, dy) -> (dx, dgamma, dbeta) for the layer norm above."""
    return _check("layer norm backward", fn, cases.layernorm_backward_cases,
                  "mu and var depend on x too: dx = (dx_hat - mean(dx_hat) - x_hat * "
                  "mean(dx_hat * x_hat)) / sqrt(var + eps) with dx_hat = dy * gamma; "
                  "dgamma and dbeta sum over all positions", quiet, seed)


def check_positional_encoding(fn, quiet=False, seed=None):
    """fn(max_len, d_model) -> the (max_len, d_model) sinusoidal table."""
    return _check("positional encoding", fn, cases.positional_encoding_cases,
                  "sin at even features 2i and cos at odd features 2i+1, both with "
                  "pos / 10000^(2i / d_model); an odd d_model ends with a sine",
                  quiet, seed)


def check_top_p(fn, quiet=False, seed=None):
    """fn(probs, p) -> the nucleus of each row of probs (B, V), renormalised."""
    return _check("top-p filter", fn, cases.top_p_cases,
                  "sort descending, keep a token while the mass before it is < p (the top "
                  "token always), zero the rest, divide by the kept total", quiet, seed)


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

"""Checkers for the lessons' exercises: write a forward or a backward yourself,
and find out whether it is right.

Each ``check_*`` function calls your function on several cases (see
``exercise_cases``): a few with random sizes and values, drawn from a seed
that the verdict prints, and the edge cases the exercise is about (a fully
masked row, padding, a batch of one, logits of 1000, float32 inputs). Every
answer is compared with a slow reference worked out another way
(``exercise_references``: loops, ``math.exp``, explicit Jacobians), not with
minitrans's own function. The verdict names the first case that fails, with
its sizes and the seed that draws it again, which of your function's results
is wrong and by how much (within ten times the tolerance: a matter of
precision, and where it is usually lost), and a hint, folded away in a
notebook (``exercise_verdict``); the checker returns an ``ExerciseResult``
(see ``exercise_checker``). Your functions take and return plain NumPy
arrays.

The checkers of lessons 2, 4, 5, 9, 10 and 11 are below, with their cases in
``exercise_cases``; the others live, with their cases and references, in
topic modules ``exercises_<topic>`` (``exercises_basics``,
``exercises_embedding``, ...). ``CHECKERS`` gathers them all by exercise name.

    from minitrans_course.exercises import check_softmax

    def my_softmax(z):
        ...
    check_softmax(my_softmax)            # a fresh seed each call
    check_softmax(my_softmax, seed=3)    # the same cases again
"""

from minitrans_course import exercise_cases as cases
from minitrans_course import (
    exercises_basics,
    exercises_decoding,
    exercises_embedding,
    exercises_experiments,
    exercises_gpt,
    exercises_language_models,
    exercises_masks_heads,
    exercises_modern,
    exercises_output,
    exercises_pretrained,
    exercises_recurrent,
    exercises_regularisation,
    exercises_training,
)
from minitrans_course.exercise_checker import run_checker

# Where a sinusoidal table a little off (within ten times the tolerance) loses its digits.
FREQUENCIES = ("precision is usually lost in the frequencies: 10000 ** (-2i / d_model) or the "
               "angles pos * frequency computed in float32 (np.arange(..., dtype=np.float32), "
               "np.float32(10000)) keep about 7 digits, and an angle of 100 radians then "
               "errs in its fifth decimal; compute them in float64")


def check_softmax(fn, quiet=False, seed=None):
    """fn(z) -> softmax over the last axis of z (B, V) or (B, T, V); tried with
    logits up to 1000 and in float32."""
    return run_checker("softmax", fn, cases.softmax_cases,
                  "exponentiate z minus its row maximum (exp(1000) overflows), then divide by "
                  "the row sum; both over axis=-1 with keepdims=True", quiet, seed)


def check_softmax_backward(fn, quiet=False, seed=None):
    """fn(y, dy) -> dz for y = softmax(z) over the last axis."""
    return run_checker("softmax backward", fn, cases.softmax_backward_cases,
                  "dz_i = y_i (dy_i - sum_j dy_j y_j): the Jacobian is diag(y) - y y^T",
                  quiet, seed)


def check_attention(fn, quiet=False, seed=None):
    """fn(Q, K, V, mask) -> softmax(Q K^T / sqrt(d_k) + M) V, with mask True
    where a query may attend, broadcastable to (B, T_q, T_k);
    Q (B, T_q, d_k), K (B, T_k, d_k), V (B, T_k, d_v). A query whose every key
    is masked must get a zero output (it attends to nothing)."""
    return run_checker("scaled dot-product attention", fn, cases.attention_cases,
                  "scores = Q @ K.swapaxes(-1, -2) / sqrt(d_k); masked scores become -inf "
                  "(not -1e9: a fully masked row would average every value) before the "
                  "softmax, and a row with no finite score gets zero weights", quiet, seed)


def check_attention_backward(fn, quiet=False, seed=None):
    """fn(Q, K, V, P, dout) -> (dQ, dK, dV), with P the attention weights
    (zeros where masked, a zero row for a fully masked query)."""
    return run_checker("attention backward", fn, cases.attention_backward_cases,
                  "dV = P^T dout; dP = dout V^T; dS = P * (dP - rowsum(dP * P)); "
                  "dQ = dS K / sqrt(d_k); dK = dS^T Q / sqrt(d_k)", quiet, seed,
                       outputs=("dQ", "dK", "dV"))


def check_layernorm(fn, quiet=False, seed=None):
    """fn(x, gamma, beta, eps) -> gamma * (x - mean) / sqrt(var + eps) + beta,
    statistics over the last axis (var without Bessel's correction)."""
    return run_checker("layer norm", fn, cases.layernorm_cases,
                  "mean and variance over axis=-1 with keepdims=True; var is the mean of "
                  "(x - mean)^2 (divide by d, not d - 1); eps goes inside the square root",
                  quiet, seed)


def check_layernorm_backward(fn, quiet=False, seed=None):
    """fn(x, gamma, beta, eps, dy) -> (dx, dgamma, dbeta) for the layer norm above."""
    return run_checker("layer norm backward", fn, cases.layernorm_backward_cases,
                  "mu and var depend on x too: dx = (dx_hat - mean(dx_hat) - x_hat * "
                  "mean(dx_hat * x_hat)) / sqrt(var + eps) with dx_hat = dy * gamma; "
                  "dgamma and dbeta sum over all positions", quiet, seed,
                       outputs=("dx", "dgamma", "dbeta"))


def check_positional_encoding(fn, quiet=False, seed=None):
    """fn(max_len, d_model) -> the (max_len, d_model) sinusoidal table."""
    return run_checker("positional encoding", fn, cases.positional_encoding_cases,
                  "sin at even features 2i and cos at odd features 2i+1, both with "
                  "pos / 10000^(2i / d_model); an odd d_model ends with a sine",
                  quiet, seed, precision=FREQUENCIES)


def check_top_p(fn, quiet=False, seed=None):
    """fn(probs, p) -> the nucleus of each row of probs (B, V), renormalised."""
    return run_checker("top-p filter", fn, cases.top_p_cases,
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
    **exercises_basics.CHECKERS,
    **exercises_embedding.CHECKERS,
    **exercises_masks_heads.CHECKERS,
    **exercises_output.CHECKERS,
    **exercises_training.CHECKERS,
    **exercises_decoding.CHECKERS,
    **exercises_language_models.CHECKERS,
    **exercises_recurrent.CHECKERS,
    **exercises_regularisation.CHECKERS,
    **exercises_experiments.CHECKERS,
    **exercises_gpt.CHECKERS,
    **exercises_modern.CHECKERS,
    **exercises_pretrained.CHECKERS,
}

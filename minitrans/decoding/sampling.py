"""Sampling the next token: temperature, top-k and top-p (nucleus)
filtering, and drawing from the filtered distribution.

Each function works on a (B, V) array of one decoding step;
``minitrans.decoding.search`` runs the loop that calls them. ``FirstIdsOnly``
keeps a model's draws to the ids its tokenizer can decode.
"""

from minitrans.core import backend, checks
from minitrans.ops.softmax import softmax


# exp(-1e30) is 0 in any dtype, and -1e30 fits in float32: a logit this far
# below the largest is a probability of 0, with no overflow on the way
LOWEST_LOGIT = -1e30


def apply_temperature(logits, temperature):
    """(logits - row max) / T, (B, V), in the dtype of ``logits``: T < 1
    sharpens (T -> 0 is greedy), T > 1 flattens.

    Subtracting each row's largest logit changes no softmax and no ranking,
    and it makes any positive T safe: every result is <= 0 and the largest is
    exactly 0, so nothing overflows to +inf (where inf - inf would be NaN).
    Results are floored at LOWEST_LOGIT, whose probability is 0 like -inf's,
    so a tiny T (1e-45) leaves probability 1 on the largest logit: exactly
    greedy. The division is done in float64, where T down to 5e-324 is not
    0 (in float32 a T below 1e-45 would round to 0 and give 0 / 0)."""
    checks.check_number("temperature", temperature, low=0, low_open=True)  # finite too
    xp, t = backend.get_xp(), float(temperature)
    shifted = (logits - logits.max(axis=-1, keepdims=True)).astype(xp.float64)
    return (xp.maximum(shifted, LOWEST_LOGIT * t) / t).astype(logits.dtype)


def top_k_filter(logits, k):
    """Keep the k largest logits of each (B, V) row, the others become -inf:
    exactly k, even with ties, as ranks come from a stable sort."""
    checks.check_positive_int("k", k)
    xp = backend.get_xp()
    order = xp.argsort(-logits, axis=-1, kind="stable")  # most likely first
    rank = xp.argsort(order, axis=-1, kind="stable")  # rank[b, v]: place of token v in order
    return xp.where(rank < k, logits, -xp.inf)


def top_p_filter(probs, p):
    """Nucleus filtering of (B, V) probabilities (Holtzman et al., 2020).

    Keep the smallest set of most probable tokens whose total probability is
    at least p, zero the rest, renormalise each row to sum 1. In sorted order
    a token is kept when the mass before it is < p, so the most probable token
    always is. Worked example, p = 0.9:

        probs       [0.5,   0.3,   0.15,  0.05]
        mass before [0.0,   0.5,   0.8,   0.95]   keep the first three
        returned    [0.526, 0.316, 0.158, 0.0 ]   (each divided by 0.95)
    """
    checks.check_number("p", p, low=0, high=1, low_open=True)
    xp = backend.get_xp()
    order = xp.argsort(-probs, axis=-1, kind="stable")
    sorted_probs = xp.take_along_axis(probs, order, axis=-1)
    mass_before = xp.cumsum(sorted_probs, axis=-1) - sorted_probs
    keep = xp.take_along_axis(mass_before < p, xp.argsort(order, axis=-1, kind="stable"), axis=-1)
    kept = xp.where(keep, probs, 0.0)
    return kept / kept.sum(axis=-1, keepdims=True)


def draw(probs, rng):
    """One id per row of (B, V) probabilities, (B,), by inverse-CDF sampling:
    for u uniform in [0, total), the count of cumulative probabilities <= u
    ("<=": a zero-probability token is never drawn, even for u = 0). Only
    cumsum and comparisons, so the same on NumPy, strict and CuPy; ``rng`` is
    a ``backend.device_rng`` generator."""
    xp = backend.get_xp()
    cumulative = xp.cumsum(probs.astype(xp.float64), axis=-1)  # (B, V)
    u = rng.random((probs.shape[0], 1)) * cumulative[:, -1:]  # total, not 1: no rounding gap
    return xp.minimum((cumulative <= u).sum(axis=-1), probs.shape[-1] - 1)


def sampler(temperature, top_k, top_p, rng):
    """Check the options once; return choose(logits) -> (B,) drawn ids:
    logits -> apply_temperature -> top_k_filter (if top_k) -> softmax ->
    top_p_filter (if top_p) -> draw."""
    checks.check_number("temperature", temperature, low=0, low_open=True)
    checks.check_int("top_k", top_k, low=1, allow_none=True)
    checks.check_number("top_p", top_p, low=0, high=1, low_open=True, allow_none=True)
    if rng is None or checks.is_int(rng):
        # a seed; NumPy's own error for a negative one names neither rng nor the seed
        checks.check_int("rng", rng, low=0, allow_none=True)
        rng = backend.device_rng(0 if rng is None else int(rng))
    elif not hasattr(rng, "random"):
        raise TypeError(
            f"rng: expected an int seed or a backend.device_rng generator, got {type(rng).__name__}"
        )

    def choose(logits):
        logits = apply_temperature(logits, temperature)
        logits = logits if top_k is None else top_k_filter(logits, top_k)
        probs = softmax(logits)
        return draw(probs if top_p is None else top_p_filter(probs, top_p), rng)

    return choose


def first_ids_only(logits, count, allowed=None):
    """(B, V) logits with those of ids ``count`` and above at -inf: they are
    never drawn, by sampling or greedy. ``allowed``: the (V,) mask of ids
    below ``count``, where the caller keeps one across tokens."""
    xp = backend.get_xp()
    if allowed is None:
        allowed = xp.arange(logits.shape[-1]) < count
    return xp.where(allowed, logits, -xp.inf)


class FirstIdsOnly:
    """A decoder-only model whose output rows from ``count`` on are no
    token's, drawn from as if it had only the first ``count``: real models
    pad their embedding beyond their tokenizer's ids (to a multiple of 64,
    for fast products), and an id drawn there could not be decoded. It
    answers what ``search.generate`` asks of a model."""

    def __init__(self, model, count):
        checks.check_int("count", count, low=1, high=model.config.vocab_size)
        self.model, self.count, self.config = model, count, model.config
        self.allowed = None  # the mask of ids below count, made at the first token

    def _first_ids_only(self, logits):
        if self.allowed is None:
            self.allowed = backend.get_xp().arange(logits.shape[-1]) < self.count
        return first_ids_only(logits, self.count, self.allowed)

    def eval(self):
        self.model.eval()

    def start(self, batch_size):
        return self.model.start(batch_size)

    def step(self, state, tokens):
        return self._first_ids_only(self.model.step(state, tokens))

    def prefix_logits(self, prefix):
        return self._first_ids_only(self.model.prefix_logits(prefix))

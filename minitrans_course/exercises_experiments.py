"""The exercise of lesson 18 (the paper's experiments): perplexity, the
"PPL (dev)" column of the paper's Table 3.

Perplexity is exp of the mean cross-entropy per target token: the number of
equally likely tokens the model is, on average, choosing between. The mean
is over the real tokens of the whole batch (token-weighted, padding left
out), not a mean of sentence means.

    from minitrans_course.exercises_experiments import check_perplexity

    def my_perplexity(logits, targets, pad_id):
        ...
    check_perplexity(my_perplexity)
"""

import math

import numpy as np

from minitrans_course import exercise_references as ref
from minitrans_course.exercise_checker import make_case, normal, run_checker


def perplexity(logits, targets, pad_id):
    """The reference, one token at a time with ``math``: exp of the mean of
    -log softmax(logits[b, t])[targets[b, t]] over the positions whose target
    is not ``pad_id``; the log-sum-exp shifted by the row's maximum, so that
    logits of 1000 do not overflow.

    Inputs: logits (B, T, V) floats, targets (B, T) ints, pad_id an int.
    Returns: a Python float, at least 1."""
    total, count = 0.0, 0
    for b in range(targets.shape[0]):
        for t in range(targets.shape[1]):
            target = int(targets[b, t])
            if target == pad_id:
                continue
            row = [float(z) for z in logits[b, t]]
            total += ref.log_sum_exp(row) - row[target]
            count += 1
    return math.exp(total / count)


def _targets(rng, lengths, T, V, pad_id):
    """(B, T) token ids: row b has lengths[b] real tokens (never pad_id),
    then pad_id."""
    real = [token for token in range(V) if token != pad_id]
    targets = np.full((len(lengths), T), pad_id, dtype=np.int64)
    for row, length in enumerate(lengths):
        targets[row, :length] = rng.choice(real, size=length)
    return targets


def perplexity_cases(rng):
    def case(name, logits, lengths, pad_id=0, boost=0.0):
        B, T, V = logits.shape
        targets = _targets(rng, lengths, T, V, pad_id)
        # boost: the target's logit raised, a model sure of its answers
        np.put_along_axis(
            logits,
            targets[..., None],
            np.take_along_axis(logits, targets[..., None], -1) + boost,
            -1,
        )
        return make_case(
            name,
            f"B={B}, T={T}, V={V}, pad_id={pad_id}",
            (logits, targets, pad_id),
            perplexity,
            logits.dtype,
        )

    B, T, V = rng.integers(2, 5), rng.integers(3, 8), rng.integers(4, 12)
    padded = [T] + list(rng.integers(1, T, size=B - 1))  # one full row, the others padded
    large = normal(rng, (2, 3, V), scale=3.0) + 1000.0  # exp(1000) overflows even float64
    return [
        case("random logits, padded rows", normal(rng, (B, T, V), scale=2.0), padded),
        case("random logits, float32", normal(rng, (B, T, V), np.float32, 2.0), padded),
        case("a batch of one, no padding", normal(rng, (1, T, V)), [T]),
        # a sentence mean would weigh the one-token sentence like the long one
        case("sentences of 1 and 12 tokens", normal(rng, (2, 12, V), scale=2.0), [1, 12]),
        case("pad_id is not 0", normal(rng, (B, T, V), scale=2.0), padded, int(V - 1)),
        case("logits up to 1000", large, [3, 2]),
        case("a confident model (PPL near 1)", normal(rng, (B, T, V)), padded, boost=12.0),
    ]


def check_perplexity(fn, quiet=False, seed=None):
    """fn(logits, targets, pad_id) -> exp(mean cross-entropy per real target
    token), logits (B, T, V), targets (B, T) with pad_id at padding."""
    return run_checker(
        "perplexity",
        fn,
        perplexity_cases,
        "log-softmax over axis=-1 with the row maximum subtracted first; pick "
        "each target's log-probability; average over the tokens whose target "
        "is not pad_id, all sentences together (not sentence by sentence); "
        "then exp",
        quiet,
        seed,
    )


CHECKERS = {"perplexity": check_perplexity}

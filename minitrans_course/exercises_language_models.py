"""Exercise checkers for decoder-only language models (lesson 16): the
inputs and targets of next-token prediction, and top-k filtering.

The references build every row with Python lists and ``sorted``, not with
``data.make_lm_batch`` or ``decoding.sampling.top_k_filter``.
"""

import math

import numpy as np

from minitrans_course.exercise_checker import make_case, run_checker

# ---- references


def next_token_targets(sequences, bos_id, eos_id, pad_id):
    """(inputs, targets), each (B, T + 1) with T the longest sequence, as
    data.make_lm_batch makes them: the full row <bos> + seq + <eos> is cut
    first (all but its last token, all but its first), and only then padded
    with pad_id on the right."""
    rows = [[bos_id] + list(s) + [eos_id] for s in sequences]
    width = max(len(row) for row in rows) - 1
    inputs = [row[:-1] + [pad_id] * (width - len(row) + 1) for row in rows]
    targets = [row[1:] + [pad_id] * (width - len(row) + 1) for row in rows]
    return np.array(inputs, dtype=np.int64), np.array(targets, dtype=np.int64)


def top_k_filter(probs, k):
    """Each row's k largest probabilities (ties to the lower index), the rest
    0, divided by their sum: softmax(top_k_filter(logits, k)) of minitrans."""
    rows = np.asarray(probs, dtype=np.float64).reshape(-1, np.shape(probs)[-1])
    out = np.zeros_like(rows)
    for r, row in enumerate(rows):
        kept = sorted(range(len(row)), key=lambda j: (-float(row[j]), j))[:k]
        total = math.fsum(float(row[j]) for j in kept)
        for j in kept:
            out[r, j] = float(row[j]) / total
    return out.reshape(np.shape(probs))


# ---- cases


def next_token_cases(rng):
    def case(name, lengths, bos=1, eos=2, pad=0, first_word=4):
        sequences = [
            [int(i) for i in rng.integers(first_word, first_word + 20, size=n)] for n in lengths
        ]
        sizes = f"B={len(lengths)}, lengths {list(lengths)}, bos={bos}, eos={eos}, pad={pad}"
        return make_case(name, sizes, (sequences, bos, eos, pad), next_token_targets, np.int64)

    B = int(rng.integers(2, 5))
    lengths = [int(n) for n in rng.integers(1, 9, size=B)]
    lengths[0] = max(lengths) + 2  # the rows differ in length
    return [
        case("rows of different lengths", lengths),
        case("rows of one length", [int(rng.integers(1, 8))] * B),
        case("an empty sentence", [0] + lengths[1:]),
        case("a batch of one", [int(rng.integers(1, 8))]),
        case("other special ids", lengths, bos=5, eos=6, pad=7, first_word=8),
    ]


def top_k_cases(rng):
    def case(name, probs, k, dtype=np.float64):
        probs = np.asarray(probs).astype(dtype)
        sizes = f"B={probs.shape[0]}, V={probs.shape[1]}, k={k}"
        return make_case(name, sizes, (probs, k), top_k_filter, dtype)

    B, V = int(rng.integers(2, 6)), int(rng.integers(5, 12))
    k = int(rng.integers(2, V - 1))

    def rows(count=B):
        return rng.dirichlet(np.ones(V), size=count)

    return [
        case("random rows", rows(), k),
        case("random rows, float32", rows(), k, np.float32),
        case("a batch of one", rows(1), k),
        case("rows sorted ascending", np.sort(rows(), axis=-1), k),
        case("k = 1: the top token only", rows(), 1),
        case("k = V: every token", rows(), V),
        case("k > V: every token", rows(), V + 3),
        case("ties: exactly k, the lower index first", [[0.1, 0.2, 0.2, 0.2, 0.2, 0.1]], 2),
    ]


# ---- checkers


def check_next_token_targets(fn, quiet=False, seed=None):
    """fn(sequences, bos_id, eos_id, pad_id) -> (inputs, targets), int arrays
    (B, T + 1), T the longest of the lists of ids ``sequences``."""
    return run_checker(
        "next-token targets",
        fn,
        next_token_cases,
        "make each row <bos> + seq + <eos>; inputs are row[:-1], targets row[1:]; cut first, "
        "pad after (with pad_id, to the longest), so a short row's inputs end in <pad>, "
        "not <eos>",
        quiet,
        seed,
        outputs=("inputs", "targets"),
    )


def check_top_k_filter(fn, quiet=False, seed=None):
    """fn(probs (B, V), k) -> (B, V): each row's k largest probabilities,
    renormalised, the rest 0."""
    return run_checker(
        "top-k filter",
        fn,
        top_k_cases,
        "order = np.argsort(-probs, axis=-1, kind='stable') ranks the tokens, ties to the "
        "lower index; keep the first k of each row (all of them when k >= V), zero the "
        "rest, divide by the kept total",
        quiet,
        seed,
    )


CHECKERS = {
    "next_token_targets": check_next_token_targets,
    "top_k_filter": check_top_k_filter,
}

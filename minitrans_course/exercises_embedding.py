"""Exercises of lesson 3 (tokens and embeddings): one byte-pair-encoding merge
and the embedding's backward.

Each checker draws its cases from a seeded rng (see ``exercise_checker``) and
compares the learner's answer with a reference written here another way than
minitrans computes it: a plain counting loop for BPE (not
``minitrans.data.bpe``), a position-by-position loop for the embedding's
scatter-add (not ``add_rows_at``).
"""

import math

import numpy as np

from minitrans_course.exercise_checker import Case, make_case, normal, run_checker

# ------------------------------------------------------------------ one BPE merge


def bpe_merge_reference(words, counts):
    """(best pair, the words with it merged), by plain loops.

    Every adjacent pair is counted, each word weighted by its count, overlapping
    pairs included: "a a a" holds (a, a) twice. The best pair has the highest
    count; among equal counts, the pair that sorts last as Python compares
    tuples of strings (minitrans's ``learn_merges`` and subword-nmt's rule).
    Merging goes left to right: "a a a" with (a, a) gives "aa a".
    """
    totals = {}
    for word, count in zip(words, counts):
        for i in range(len(word) - 1):
            pair = (word[i], word[i + 1])
            totals[pair] = totals.get(pair, 0) + count
    best = None
    for pair, total in totals.items():
        if best is None or total > totals[best] or (total == totals[best] and pair > best):
            best = pair
    merged = []
    for word in words:
        out, i = [], 0
        while i < len(word):
            if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                out.append(word[i] + word[i + 1])
                i += 2
            else:
                out.append(word[i])
                i += 1
        merged.append(tuple(out))
    return best, merged


def _spelled(rng, length, alphabet):
    """A random word of ``length`` characters, spelled as lesson 3 does: its
    characters, then the end-of-word marker "</w>" as a symbol of its own."""
    return tuple(str(c) for c in rng.choice(list(alphabet), size=length)) + ("</w>",)


def _bpe_case(name, words, counts):
    sizes = f"{len(words)} words, longest {max(len(w) for w in words)} symbols"
    return Case(name, sizes, (list(words), list(counts)), bpe_merge_reference(words, counts))


def bpe_merge_cases(rng):
    n = int(rng.integers(4, 8))
    random_words = [_spelled(rng, int(rng.integers(1, 7)), "abcde") for _ in range(n)]
    random_counts = [int(c) for c in rng.integers(1, 10, size=n)]
    # the small hand-made cases first: each names one rule when it fails
    merged_before = [("lo", "w", "e", "r</w>"), ("lo", "w</w>"), ("n", "e", "w</w>")]
    return [
        _bpe_case("counts weigh the pairs", [("a", "b"), ("c", "d")], [3, 1]),
        # (a, a) occurs twice in "a a a": counted once it would tie with (b, c)
        # and lose the tie, as (b, c) sorts last
        _bpe_case("a pair overlapping itself (a a a)", [("a", "a", "a"), ("b", "c")], [1, 1]),
        _bpe_case("a pair overlapping itself (a a a a)", [("a", "a", "a", "a"), ("b",)], [2, 5]),
        _bpe_case("a word of one symbol", [("x</w>",), ("x", "y</w>"), ("z</w>",)], [9, 2, 4]),
        _bpe_case(
            "a tie: the pair that sorts last wins", [("a", "b"), ("b", "a"), ("c", "a")], [2, 2, 2]
        ),
        _bpe_case("symbols merged before", merged_before, [3, 2, 1]),
        _bpe_case("random words", random_words, random_counts),
    ]


def _as_tuples(fn):
    """The learner's fn, its answer read as (pair, words) of tuples, so that
    lists instead of tuples are not a mistake."""

    def answer(words, counts):
        got = fn(words, counts)
        if got is None:  # the checker says what is missing
            return None
        pair, merged = got
        return tuple(pair), [tuple(word) for word in merged]

    return answer


def check_bpe_merge(fn, quiet=False, seed=None):
    """fn(words, counts) -> (pair, merged): words a list of words, each a
    tuple of symbols (strings), counts their counts; pair the most frequent
    adjacent pair (left, right), merged the words with it merged."""
    return run_checker(
        "BPE merge",
        _as_tuples(fn),
        bpe_merge_cases,
        "count every adjacent pair of every word, times the word's count "
        "(a a a holds (a, a) twice); take the largest count, ties to the pair "
        "that sorts last (max over (count, pair)); merge left to right, "
        "skipping past a merged pair",
        quiet,
        seed,
        outputs=("pair", "merged"),
    )


# ------------------------------------------------------------------ embedding backward


def embedding_backward_reference(ids, dout, vocab_size):
    """dW_E (V, d) of y[b, t] = sqrt(d) W_E[ids[b, t]], position by position:
    row ids[b, t] collects sqrt(d) * dout[b, t], so a repeated id adds up.
    Padding is a token like any other (minitrans's Embedding has no padding
    row): its row gets the sum of dout at the padding positions."""
    ids, dout = np.asarray(ids), np.asarray(dout, dtype=np.float64)
    d = dout.shape[-1]
    dW = np.zeros((vocab_size, d))
    for position in np.ndindex(ids.shape):
        v = int(ids[position])
        for j in range(d):
            dW[v, j] += math.sqrt(d) * dout[position + (j,)]
    return dW


def embedding_backward_cases(rng):
    def case(name, ids, vocab_size, dtype=np.float64, d=None):
        d = int(rng.integers(2, 7)) if d is None else d
        dout = normal(rng, ids.shape + (d,), dtype)
        sizes = f"ids {ids.shape}, V={vocab_size}, d_model={d}"
        return make_case(name, sizes, (ids, dout, vocab_size), embedding_backward_reference, dtype)

    B, T = int(rng.integers(2, 4)), int(rng.integers(3, 7))
    V = B * T + int(rng.integers(2, 8))
    distinct = 1 + rng.permutation(V - 1)[: B * T].reshape(B, T)  # no id twice, no padding
    padded = rng.integers(1, V, size=(B, T))
    padded[0, -2:] = 0  # id 0 is <pad>, at the end of the first sentence
    repeated = rng.integers(1, V, size=(B, T))
    repeated[:, 0] = repeated[:, -1] = repeated[0, 1]  # one id many times
    return [
        case("random ids, none repeated", distinct, V),
        case("repeated ids add up", repeated, V),
        case("padding (id 0) at the end", padded, V),
        case("a batch of one", rng.integers(0, V, size=(1, T)), V),
        case("ids that skip most of the vocabulary", np.array([[2, 2], [7, 2]]), 40),
        case("random ids, float32", rng.integers(0, V, size=(B, T)), V, np.float32),
        case("d_model = 16 (the scale is 4)", rng.integers(0, V, size=(B, T)), V, d=16),
    ]


def check_embedding_backward(fn, quiet=False, seed=None):
    """fn(ids, dout, vocab_size) -> dW_E (vocab_size, d_model) for the
    forward y = sqrt(d_model) * W_E[ids]; ids (B, T), dout (B, T, d_model)."""
    return run_checker(
        "embedding backward",
        fn,
        embedding_backward_cases,
        "start from zeros (vocab_size, d_model); np.add.at(dW, ids.reshape(-1), "
        "dout.reshape(-1, d_model)) adds repeated ids up (dW[ids] += ... does "
        "not); multiply by sqrt(d_model), the forward's scale",
        quiet,
        seed,
    )


CHECKERS = {
    "bpe_merge": check_bpe_merge,
    "embedding_backward": check_embedding_backward,
}

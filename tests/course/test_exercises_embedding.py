"""Lesson 3's exercise checkers (one BPE merge, the embedding backward) pass
the solution for many seeds and fail the mistakes a learner is likely to make,
each in the case built to show it."""

import collections
import pathlib

import numpy as np
import pytest

from minitrans.core import backend
from minitrans.data.bpe import learn_merges
from minitrans.layers.embedding import Embedding
from minitrans_course import exercises_embedding as ex
from tests.course.conftest import assert_fails_in_case
from tests.conftest import load_module

SOLUTION = load_module(
    pathlib.Path(__file__).resolve().parents[2]
    / "lessons"
    / "solutions"
    / "03_tokens_and_embeddings.py",
    "solutions_03_for_embedding_tests",
)


def test_the_tie_rule_is_minitrans_bpe_rule():
    """The reference's best pair is the first merge minitrans's learn_merges
    picks, on random corpora full of ties."""
    rng = np.random.default_rng(0)
    for _ in range(30):
        corpus = collections.Counter(
            "".join(rng.choice(list("abc"), size=rng.integers(1, 5))) for _ in range(6)
        )
        words = [tuple(w[:-1]) + (w[-1] + "</w>",) for w in corpus]
        first = learn_merges(corpus, 1, min_frequency=1)
        if first:
            assert ex.bpe_merge_reference(words, list(corpus.values()))[0] == first[0]


def test_the_embedding_reference_is_minitrans_embedding_backward():
    rng = np.random.default_rng(1)
    ids, dout = rng.integers(0, 5, size=(2, 4)), rng.standard_normal((2, 4, 6))
    ids[0, :3] = 2
    with backend.using("numpy", dtype="float64"):
        layer = Embedding(5, 6, rng=0)
        layer.forward(ids)
        layer.backward(dout)
        want = layer.grads["W_E"]
    assert np.allclose(ex.embedding_backward_reference(ids, dout, 5), want, rtol=1e-12)


# ---- wrong answers a learner might write, each with the case that must catch it


def _bpe(words, counts, overlap=True, weigh=True, ties_first=False, right_to_left=False):
    pairs = collections.Counter()
    for word, count in zip(words, counts):
        i = 0
        while i < len(word) - 1:
            pairs[word[i], word[i + 1]] += count if weigh else 1
            # without overlap, a counted pair uses its right symbol up
            i += 1 if overlap or word[i] != word[i + 1] else 2
    ranked = sorted(pairs, key=lambda p: (-pairs[p], p)) if ties_first else None
    best = ranked[0] if ties_first else max(pairs, key=lambda p: (pairs[p], p))
    merged = []
    for word in words:
        w = list(word[::-1]) if right_to_left else list(word)
        pair = best[::-1] if right_to_left else best
        out, i = [], 0
        while i < len(w):
            if tuple(w[i : i + 2]) == pair:
                out.append(best[0] + best[1])
                i += 2
            else:
                out.append(w[i])
                i += 1
        merged.append(tuple(out[::-1] if right_to_left else out))
    return best, merged


def _embedding(ids, dout, vocab_size, scale=True, fancy=False, skip_pad=False):
    d = dout.shape[-1]
    dW = np.zeros((vocab_size, d))
    rows = dout.reshape(-1, d) * (np.sqrt(d) if scale else 1.0)
    flat = ids.reshape(-1)
    if skip_pad:
        rows = rows[flat != 0]
        flat = flat[flat != 0]
    if fancy:
        dW[flat] += rows  # a repeated id keeps only its last row
    else:
        np.add.at(dW, flat, rows)
    return dW


WRONG = [
    ("bpe_merge", lambda *a: _bpe(*a, weigh=False), "counts weigh the pairs"),
    ("bpe_merge", lambda *a: _bpe(*a, overlap=False), "a pair overlapping itself (a a a)"),
    ("bpe_merge", lambda *a: _bpe(*a, ties_first=True), "a tie: the pair that sorts last wins"),
    ("bpe_merge", lambda *a: _bpe(*a, right_to_left=True), "a pair overlapping itself (a a a)"),
    ("embedding_backward", lambda *a: _embedding(*a, fancy=True), "repeated ids add up"),
    ("embedding_backward", lambda *a: _embedding(*a, scale=False), "random ids, none repeated"),
    ("embedding_backward", lambda *a: _embedding(*a, skip_pad=True), "padding (id 0) at the end"),
]


@pytest.mark.parametrize("name, wrong, case", WRONG, ids=[f"{n}-{c}" for n, _, c in WRONG])
def test_a_typical_mistake_fails_in_its_case(name, wrong, case):
    assert_fails_in_case(ex.CHECKERS[name], wrong, case)


def test_lists_instead_of_tuples_are_accepted():
    def with_lists(words, counts):
        pair, merged = SOLUTION.bpe_merge(words, counts)
        return list(pair), [list(w) for w in merged]

    assert ex.check_bpe_merge(with_lists, quiet=True, seed=0).passed

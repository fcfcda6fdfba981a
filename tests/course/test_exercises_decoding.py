"""The decoding exercises (lessons 14 and 15): each checker passes its
solution on many seeds and fails a learner's typical slips in the case that
is there to catch them."""

import numpy as np
import pytest

from minitrans_course import exercises_decoding as decoding
from minitrans_course.exercises import CHECKERS
from tests.course.conftest import assert_fails_in_case

# ---- slips a learner might make


def _beam(
    log_prob,
    step,
    finished,
    lengths,
    alpha,
    pad_id,
    ban_pad=True,
    use_finished=True,
    penalty=True,
    return_ranking=False,
    per_beam=False,
):
    B, K, V = step.shape
    is_pad = np.arange(V) == pad_id
    live = np.where(is_pad, -np.inf, step) if ban_pad else step
    if use_finished:
        live = np.where(finished[:, :, None], np.where(is_pad, 0.0, -np.inf), live)
    candidates = log_prob[:, :, None] + live
    grown = lengths + ~finished if use_finished else lengths + 1
    lp = ((5.0 + grown) / 6.0) ** alpha if penalty else np.ones(grown.shape)
    ranking = candidates / lp[:, :, None]
    if per_beam:  # each beam keeps its own best token
        token = np.argmax(ranking, axis=-1)
        return (
            np.take_along_axis(candidates, token[..., None], -1)[..., 0],
            np.tile(np.arange(K), (B, 1)),
            token,
        )
    best = np.argsort(-ranking.reshape(B, -1), axis=-1, kind="stable")[:, :K]
    kept = ranking if return_ranking else candidates
    return np.take_along_axis(kept.reshape(B, -1), best, -1), best // V, best % V


def _cache(K_cache, V_cache, q, k, v, include_new=True, scale=True, shift=True, front=False):
    K = np.concatenate([k, K_cache] if front else [K_cache, k], axis=1)
    V = np.concatenate([v, V_cache] if front else [V_cache, v], axis=1)
    keys, values = (K, V) if include_new else (K_cache, V_cache)
    scores = q @ keys.swapaxes(-1, -2) / (np.sqrt(q.shape[-1]) if scale else 1.0)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True) if shift else scores)
    return e / e.sum(axis=-1, keepdims=True) @ values, K, V


WRONG = [
    ("beam_search_step", lambda *a: _beam(*a, ban_pad=False), "first step: one live beam"),
    ("beam_search_step", lambda *a: _beam(*a, per_beam=True), "first step: one live beam"),
    (
        "beam_search_step",
        lambda *a: _beam(*a, penalty=False),
        "the length penalty changes the choice",
    ),
    (
        "beam_search_step",
        lambda *a: _beam(*a, return_ranking=True),
        "the length penalty changes the choice",
    ),
    ("beam_search_step", lambda *a: _beam(*a, use_finished=False), "some beams finished"),
    ("kv_cache_step", lambda *a: _cache(*a, include_new=False), "random cache"),
    ("kv_cache_step", lambda *a: _cache(*a, scale=False), "random cache"),
    ("kv_cache_step", lambda *a: _cache(*a, front=True), "random cache"),  # out is right, K not
    ("kv_cache_step", lambda *a: _cache(*a, shift=False), "a score of 1000"),
]


@pytest.mark.parametrize("name, wrong, case", WRONG, ids=[f"{n}-{c}" for n, _, c in WRONG])
def test_a_typical_mistake_fails_in_its_case(name, wrong, case):
    assert_fails_in_case(CHECKERS[name], wrong, case)


def _log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def test_two_reference_steps_are_minitrans_beam_search():
    """Two steps of the exercise's reference, fed by a tiny random model,
    give the beams and scores of decoding.beam_search(max_len=2): the
    exercise asks for what minitrans does (the <pad> ban, finished beams,
    the GNMT penalty, the order)."""
    from minitrans.core import backend
    from minitrans.decoding.search import beam_search
    from minitrans.model.config import ModelConfig
    from minitrans.model.transformer import Transformer

    K, alpha, pad, bos, eos = 3, 0.6, 0, 1, 2
    with backend.using("numpy", dtype="float64"):
        model = Transformer(ModelConfig.preset("tiny", vocab_size=7, N=1), rng=0).eval()
        model.output_projection.params["b"][eos] += 1.5  # some beams end after one token
        src = np.array([[3, 4, 5, 0], [6, 4, 0, 0]])
        _, beams, scores = beam_search(
            model, src, beam_size=K, max_len=2, length_penalty=alpha, return_all=True
        )
        B, rows, sentences = src.shape[0], np.repeat(np.arange(src.shape[0]), K), np.arange(2)
        log_prob = np.full((B, K), -np.inf)
        log_prob[:, 0] = 0.0
        finished, lengths = np.zeros((B, K), dtype=bool), np.zeros((B, K), dtype=np.int64)
        fed, history = np.full((B, K, 1), bos), np.zeros((B, K, 0), dtype=np.int64)
        for t in range(2):
            step = _log_softmax(np.asarray(model.prefix_logits(src[rows], fed.reshape(B * K, -1))))
            args = (log_prob, step.reshape(B, K, -1), finished, lengths, alpha, pad)
            log_prob, parent, token = decoding.beam_search_step(*args)
            pick = (sentences[:, None], parent)
            lengths, finished = (lengths + ~finished)[pick], finished[pick] | (token == eos)
            history = np.concatenate([history[pick], token[..., None]], axis=2)
            fed = np.concatenate([fed[pick], np.where(finished, eos, token)[..., None]], axis=2)
            if t == 0:
                assert 0 < finished.sum() < finished.size  # step 2 sees both kinds of beam
    assert np.array_equal(np.asarray(beams), history)
    assert np.allclose(np.asarray(scores), log_prob / ((5.0 + lengths) / 6.0) ** alpha, rtol=1e-12)

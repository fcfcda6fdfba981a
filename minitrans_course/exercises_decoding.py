"""Exercise checkers for decoding (lessons 14 and 15): one step of beam
search, and one step of attention with a key/value cache.

The beam search reference lists every candidate (beam, token) of a sentence
as Python floats, sorts them with ``sorted`` and keeps the first K; the
cache reference recomputes causal attention over the whole sequence, query
by query with ``math.exp`` (``exercise_references.attention``), and takes
the last row. Neither calls ``decoding.beam_search`` or ``model.step``.
"""

import math

import numpy as np

from minitrans_course import exercise_references as ref
from minitrans_course.exercise_checker import make_case, normal, run_checker

# ---- references


def _candidates(log_prob, step_log_probs, finished, lengths, alpha, pad_id, b):
    """(ranking key, total, beam, token) of every candidate of sentence b with
    a finite total: a live beam may take any token but <pad>; a finished one
    only <pad>, at cost 0, and keeps its length."""
    K, V = step_log_probs.shape[1:]
    found = []
    for k in range(K):
        for token in range(V):
            if finished[b, k]:
                step = 0.0 if token == pad_id else -math.inf
            else:
                step = -math.inf if token == pad_id else float(step_log_probs[b, k, token])
            total = float(log_prob[b, k]) + step
            if total == -math.inf:
                continue
            length = int(lengths[b, k]) + (0 if finished[b, k] else 1)
            score = total / math.pow((5.0 + length) / 6.0, alpha)
            found.append(((-score, k * V + token), total, k, token))
    return sorted(found)


def beam_search_step(log_prob, step_log_probs, finished, lengths, alpha, pad_id):
    """(new log_prob (B, K), parent (B, K), token (B, K)): the K best
    candidates of each sentence by log P / lp(length), best first."""
    B, K = np.shape(log_prob)
    new, parent, token = np.zeros((B, K)), np.zeros((B, K), np.int64), np.zeros((B, K), np.int64)
    for b in range(B):
        best = _candidates(log_prob, step_log_probs, finished, lengths, alpha, pad_id, b)[:K]
        for i, (_, total, k, v) in enumerate(best):
            new[b, i], parent[b, i], token[b, i] = total, k, v
    return new, parent, token


def kv_cache_step_from_full(Q, K, V):
    """The last position's causal attention over the whole sequence (B, t+1, d),
    recomputed, and the cache after the step: (out (B, 1, d_v), K, V)."""
    T = Q.shape[1]
    causal = np.tril(np.ones((1, T, T), dtype=bool))
    out = ref.attention(Q, K, V, causal)[:, -1:]
    return out, np.asarray(K, dtype=np.float64), np.asarray(V, dtype=np.float64)


# ---- cases


def _well_separated(args, K):
    """No near tie among the K + 1 best scores of any sentence, so that float32
    and float64 rank alike (the exercise's ties go to the lower k * V + v)."""
    for b in range(args[0].shape[0]):
        keys = [c[0][0] for c in _candidates(*args, b)[: K + 1]]
        if any(abs(x - y) < 1e-3 * max(1.0, abs(x)) for x, y in zip(keys, keys[1:])):
            return False
    return True


def beam_cases(rng):
    def case(
        name,
        B,
        K,
        V,
        dtype=np.float64,
        alpha=0.6,
        first=False,
        done=0.0,
        pad_id=0,
        penalty_matters=False,
    ):
        for _ in range(1000):
            logits = normal(rng, (B, K, V), scale=2.0)
            logits[..., pad_id] += 4.0  # <pad> looks likely: it must still never be chosen
            step = np.stack([ref.softmax(logits[b]) for b in range(B)])
            step = np.log(step).astype(dtype)
            log_prob = -rng.uniform(0.5, 6.0, size=(B, K)).astype(dtype)
            lengths = rng.integers(1, 8, size=(B, K))
            finished = rng.random((B, K)) < done
            if first:
                log_prob[:, 1:], lengths[:], finished[:] = -np.inf, 0, False
            args = (log_prob, step, finished, lengths, alpha, pad_id)
            if penalty_matters:  # the choice must differ without the length penalty
                plain = beam_search_step(*args[:4], 0.0, pad_id)
                if np.array_equal(plain[1:], beam_search_step(*args)[1:]):
                    continue
            if _well_separated(args, K):
                break
        else:  # about 1.04 draws per case are needed; a thousand failing means a bug here
            raise RuntimeError(f"beam case '{name}': no draw without near ties")
        sizes = f"B={B}, K={K}, V={V}, alpha={alpha}, pad_id={pad_id}, {int(finished.sum())} done"
        return make_case(name, sizes, args, beam_search_step, dtype)

    B, K = int(rng.integers(2, 4)), int(rng.integers(2, 5))
    V = int(rng.integers(K + 2, 12))
    return [
        case("first step: one live beam", B, K, V, first=True),
        case("the length penalty changes the choice", B, K, V, penalty_matters=True),
        case("random beams", B, K, V),
        case("alpha = 0: raw log-probabilities", B, K, V, alpha=0.0),
        case("some beams finished", B, K, V, done=0.5),
        case("every beam finished", B, K, V, done=1.0),
        case("K = 1: greedy", B, 1, V),
        case("a batch of one", 1, K, V, done=0.3),
        case("<pad> is not id 0", B, K, V, done=0.3, pad_id=int(rng.integers(1, V))),
        case("random beams, float32", B, K, V, np.float32, done=0.3),
    ]


def kv_cache_cases(rng):
    def case(name, B, t, dtype=np.float64, top_score=None):
        d_k, d_v = int(rng.integers(2, 7)), int(rng.integers(2, 7))
        Q = normal(rng, (B, t + 1, d_k), dtype)
        K, V = normal(rng, (B, t + 1, d_k), dtype), normal(rng, (B, t + 1, d_v), dtype)
        if top_score:  # the first key along the new query, at a score of top_score
            q = Q[:, t].astype(np.float64)
            along = q * (top_score * math.sqrt(d_k) / (q * q).sum(axis=-1, keepdims=True))
            K[:, 0] = along.astype(dtype)
        expected = kv_cache_step_from_full(Q, K, V)  # from the whole sequence, not the args
        args = (K[:, :t], V[:, :t], Q[:, t:], K[:, t:], V[:, t:])
        sizes = f"B={B}, t={t} cached, d_k={d_k}, d_v={d_v}"
        return make_case(name, sizes, args, lambda *_: expected, dtype)

    B, t = int(rng.integers(2, 4)), int(rng.integers(2, 7))
    return [
        case("random cache", B, t),
        case("empty cache (t = 0)", B, 0),
        case("one cached position", B, 1),
        case("a batch of one", 1, t),
        case("random cache, float32", B, t, np.float32),
        case("a score of 1000", B, t, top_score=1000.0),
        case("a score of 1000, float32", B, t, np.float32, top_score=1000.0),
    ]


# ---- checkers


def check_beam_search_step(fn, quiet=False, seed=None):
    """fn(log_prob (B, K), step_log_probs (B, K, V), finished (B, K) bool,
    lengths (B, K) int, alpha, pad_id) -> (new_log_prob, parent, token), each
    (B, K), best first: one step of minitrans's beam search (lesson 14)."""
    return run_checker(
        "beam search step",
        fn,
        beam_cases,
        "candidates = log_prob[:, :, None] + step_log_probs, with <pad> at -inf "
        "for live beams and a finished beam's only continuation <pad> at 0; rank "
        "the K * V of a sentence by candidate / ((5 + new length) / 6)**alpha "
        "(a finished beam does not grow); parent = index // V, token = index % V; "
        "return the log-probabilities, not the ranking scores",
        quiet,
        seed,
        outputs=("new_log_prob", "parent", "token"),
    )


def check_kv_cache_step(fn, quiet=False, seed=None):
    """fn(K_cache (B, t, d_k), V_cache (B, t, d_v), q (B, 1, d_k), k (B, 1, d_k),
    v (B, 1, d_v)) -> (out (B, 1, d_v), K (B, t+1, d_k), V (B, t+1, d_v))."""
    return run_checker(
        "kv cache step",
        fn,
        kv_cache_cases,
        "append first: K = concatenate([K_cache, k], axis=1), likewise V; then "
        "softmax(q K^T / sqrt(d_k)) V over all t + 1 positions (no mask: the "
        "cache holds only the past and the present)",
        quiet,
        seed,
        outputs=("out", "K", "V"),
    )


CHECKERS = {
    "beam_search_step": check_beam_search_step,
    "kv_cache_step": check_kv_cache_step,
}

"""Exercises of lessons 6, 7 and 8: the decoder's mask, splitting the model's
features into heads and merging them back, and single-head cross-attention.

The references here work element by element (a mask entry from its two
positions, a head's block of features copied by a loop, projections by
``math.fsum`` dot products), never through ``minitrans.ops.masks`` or
``MultiHeadAttention``; cross-attention then uses ``exercise_references``'s
query-by-query attention.
"""

import math

import numpy as np

from minitrans_course import exercise_references as ref
from minitrans_course.exercise_checker import Case, make_case, normal, run_checker

# ------------------------------------------------------------------ lesson 6: the decoder mask


def decoder_mask_reference(ids, pad_id):
    """(B, T, T) bool, entry by entry: query i may attend to key j when j
    comes no later than i (causal) and key j is not padding. Padding hides
    keys only: a padding query still sees the real tokens before it, as
    minitrans's ``decoder_mask`` does."""
    B, T = ids.shape
    mask = np.zeros((B, T, T), dtype=bool)
    for b in range(B):
        for i in range(T):
            for j in range(T):
                mask[b, i, j] = j <= i and ids[b, j] != pad_id
    return mask


def _padded_ids(rng, lengths, T, pad_id):
    """(B, T) ids: sentence b has lengths[b] real tokens (not pad_id), then padding."""
    ids = rng.integers(pad_id + 1, pad_id + 20, size=(len(lengths), T))
    for b, length in enumerate(lengths):
        ids[b, length:] = pad_id
    return ids


def decoder_mask_cases(rng):
    def case(name, lengths, T, pad_id=0):
        ids = _padded_ids(rng, lengths, T, pad_id)
        sizes = f"ids {ids.shape}, lengths {list(lengths)}, pad_id={pad_id}"
        return Case(name, sizes, (ids, pad_id), decoder_mask_reference(ids, pad_id))

    B, T = int(rng.integers(2, 5)), int(rng.integers(3, 8))
    lengths = [int(n) for n in rng.integers(1, T + 1, size=B)]
    lengths[0] = T - 1  # at least one sentence is padded
    return [
        case("no padding", [T] * B, T),
        case("padding at the end", lengths, T),
        case("all but one token padded", [1] * B, T),
        case("a batch of one", lengths[:1], T),
        case("T = 1", [1] * B, 1),
        case("pad_id = 7, not 0", lengths, T, pad_id=7),
    ]


def check_decoder_mask(fn, quiet=False, seed=None):
    """fn(ids, pad_id) -> the (B, T, T) boolean mask of the decoder's
    self-attention, True where query i may attend to key j; ids (B, T)."""
    return run_checker(
        "decoder mask",
        fn,
        decoder_mask_cases,
        "np.tril(np.ones((T, T), bool)) (key j <= query i, the diagonal "
        "included) AND (ids != pad_id)[:, None, :], padding on the KEY axis "
        "(the last): a padding query still sees the tokens before it",
        quiet,
        seed,
    )


# ------------------------------------------------------------------ lesson 7: heads


def split_heads_reference(x, h):
    """(B, T, d_model) -> (B, h, T, d_k), head by head: head i is the block of
    features i*d_k .. (i+1)*d_k of every position."""
    B, T, d_model = x.shape
    d_k = d_model // h
    heads = np.empty((B, h, T, d_k), dtype=x.dtype)
    for i in range(h):
        for t in range(T):
            heads[:, i, t, :] = x[:, t, i * d_k : (i + 1) * d_k]
    return heads


def merge_heads_reference(heads):
    """(B, h, T, d_k) -> (B, T, h * d_k), head by head: the heads side by
    side, head i in features i*d_k .. (i+1)*d_k."""
    B, h, T, d_k = heads.shape
    x = np.empty((B, T, h * d_k), dtype=heads.dtype)
    for i in range(h):
        for t in range(T):
            x[:, t, i * d_k : (i + 1) * d_k] = heads[:, i, t, :]
    return x


def _head_shapes(rng):
    """(name, B, T, h, d_k) for both head checkers: the random ones have
    T >= 2 and h >= 2, where a reshape without a transpose goes wrong."""
    B, T = int(rng.integers(2, 4)), int(rng.integers(2, 6))
    h, d_k = int(rng.integers(2, 5)), int(rng.integers(2, 5))
    return [
        ("random", B, T, h, d_k, np.float64),
        ("random, float32", B, T, h, d_k, np.float32),
        ("a batch of one", 1, T, h, d_k, np.float64),
        ("one head (h = 1)", B, T, 1, d_k, np.float64),
        ("d_k = 1 (h = d_model)", B, T, h, 1, np.float64),
        ("T = 1", B, 1, h, d_k, np.float64),
    ]


def split_heads_cases(rng):
    return [
        make_case(
            name,
            f"x ({B}, {T}, {h * d_k}), h={h}",
            (normal(rng, (B, T, h * d_k), dtype), h),
            split_heads_reference,
            dtype,
        )
        for name, B, T, h, d_k, dtype in _head_shapes(rng)
    ]


def merge_heads_cases(rng):
    return [
        make_case(
            name,
            f"heads ({B}, {h}, {T}, {d_k})",
            (normal(rng, (B, h, T, d_k), dtype),),
            merge_heads_reference,
            dtype,
        )
        for name, B, T, h, d_k, dtype in _head_shapes(rng)
    ]


def check_split_heads(fn, quiet=False, seed=None):
    """fn(x, h) -> (B, h, T, d_k): x (B, T, d_model) cut into h heads of
    d_k = d_model / h features, head i taking features i*d_k .. (i+1)*d_k."""
    return run_checker(
        "split heads",
        fn,
        split_heads_cases,
        "x.reshape(B, T, h, d_k) keeps each position's features together; "
        "then swap the T and h axes (.swapaxes(1, 2)); reshaping straight to "
        "(B, h, T, d_k) mixes positions",
        quiet,
        seed,
    )


def check_merge_heads(fn, quiet=False, seed=None):
    """fn(heads) -> (B, T, h * d_k): the inverse of splitting, the heads
    (B, h, T, d_k) side by side in each position's features."""
    return run_checker(
        "merge heads",
        fn,
        merge_heads_cases,
        "bring the position axis back next to the batch first, "
        "heads.swapaxes(1, 2) -> (B, T, h, d_k), then reshape to (B, T, h * d_k)",
        quiet,
        seed,
    )


# ------------------------------------------------------------------ lesson 8: cross-attention


def _project(a, W):
    """a (B, T, d) @ W (d, d_k), one dot product at a time with math.fsum."""
    B, T, _ = a.shape
    out = np.empty((B, T, W.shape[1]))
    for b in range(B):
        for t in range(T):
            for k in range(W.shape[1]):
                out[b, t, k] = math.fsum(a[b, t] * W[:, k])
    return out


def cross_attention_reference(x, memory, W_Q, W_K, W_V, src_mask):
    """(B, T_t, d_k): queries x W_Q from the decoder, keys memory W_K and
    values memory W_V from the encoder, attention query by query."""
    x, memory = np.asarray(x, np.float64), np.asarray(memory, np.float64)
    W_Q, W_K, W_V = (np.asarray(W, np.float64) for W in (W_Q, W_K, W_V))
    Q, K, V = _project(x, W_Q), _project(memory, W_K), _project(memory, W_V)
    return ref.attention(Q, K, V, src_mask)


def cross_attention_cases(rng):
    def case(name, B, T_t, T_s, lengths=None, dtype=np.float64):
        d, d_k = int(rng.integers(3, 7)), int(rng.integers(2, 5))
        lengths = [T_s] * B if lengths is None else lengths
        src_mask = np.arange(T_s)[None, None, :] < np.array(lengths)[:, None, None]
        x, memory = normal(rng, (B, T_t, d), dtype), normal(rng, (B, T_s, d), dtype)
        W_Q, W_K, W_V = (normal(rng, (d, d_k), dtype, d**-0.5) for _ in range(3))
        sizes = f"B={B}, T_t={T_t}, T_s={T_s}, d={d}, d_k={d_k}, source lengths {lengths}"
        args = (x, memory, W_Q, W_K, W_V, src_mask)
        return make_case(name, sizes, args, cross_attention_reference, dtype)

    B, T_s = int(rng.integers(2, 4)), int(rng.integers(3, 7))
    T_t = T_s + int(rng.choice([-2, -1, 1, 2]))  # never T_s, at least 1
    lengths = [int(n) for n in rng.integers(1, T_s + 1, size=B)]
    lengths[0] = T_s - 1  # at least one source is padded
    return [
        case("no padding, T_t != T_s", B, T_t, T_s),
        case("source padding", B, T_t, T_s, lengths),
        case("a source of one real token", B, T_t, T_s, [1] * B),
        case("a batch of one", 1, T_t, T_s, lengths[:1]),
        case("one target position (T_t = 1)", B, 1, T_s, lengths),
        case("source padding, float32", B, T_t, T_s, lengths, np.float32),
    ]


def check_cross_attention(fn, quiet=False, seed=None):
    """fn(x, memory, W_Q, W_K, W_V, src_mask) -> (B, T_t, d_k): one head of
    cross-attention, x (B, T_t, d) the decoder's states, memory (B, T_s, d)
    the encoder's output, W_* (d, d_k), src_mask (B, 1, T_s) True at real
    source tokens."""
    return run_checker(
        "cross-attention",
        fn,
        cross_attention_cases,
        "Q = x @ W_Q (the decoder asks), K = memory @ W_K and V = memory @ W_V "
        "(the source answers); scores Q K^T / sqrt(d_k) are (B, T_t, T_s); "
        "masked source keys get -inf before the softmax",
        quiet,
        seed,
    )


CHECKERS = {
    "decoder_mask": check_decoder_mask,
    "split_heads": check_split_heads,
    "merge_heads": check_merge_heads,
    "cross_attention": check_cross_attention,
}

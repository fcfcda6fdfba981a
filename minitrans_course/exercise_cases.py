"""The cases the exercise checkers try: a few drawn at random, plus the edge
cases each exercise is about (fully masked rows, padding, a batch of one,
logits of 1000, a constant row, float32 inputs).

Every ``*_cases(rng)`` returns a list of ``Case``: the arguments handed to the
learner's function and the answer of ``exercise_references`` (float64), worked
out another way than minitrans computes it.
"""

import numpy as np

from minitrans_course import exercise_references as ref
from minitrans_course.exercise_checker import make_case, normal


def softmax_cases(rng):
    def case(name, z):
        B, V = z.shape[0], z.shape[-1]
        return make_case(name, f"B={B}, V={V}, shape {z.shape}", (z,), ref.softmax, z.dtype)

    B, V = rng.integers(2, 6), rng.integers(3, 10)
    large = rng.standard_normal((4, V)) * np.array([[1.0], [10.0], [100.0], [1000.0]])
    large[3, rng.integers(V)] = 1000.0  # exp(1000) overflows even float64
    return [
        case("random logits", normal(rng, (B, V), scale=3.0)),
        case("random logits, float32", normal(rng, (B, V), np.float32, 3.0)),
        case("a batch of one", normal(rng, (1, V), scale=3.0)),
        case("a (B, T, V) batch", normal(rng, (2, 3, V))),
        case("logits up to 1000", large),
        case("logits up to 1000, float32", large.astype(np.float32)),
    ]


def softmax_backward_cases(rng):
    def case(name, z, dtype=np.float64):
        y = ref.softmax(z).astype(dtype)
        dy = normal(rng, z.shape, dtype)
        return make_case(name, f"shape {z.shape}", (y, dy), ref.softmax_backward, dtype)

    B, V = rng.integers(2, 6), rng.integers(3, 10)
    return [
        case("random", normal(rng, (B, V))),
        case("random, float32", normal(rng, (B, V)), np.float32),
        case("a batch of one", normal(rng, (1, V))),
        case("a (B, T, V) batch", normal(rng, (2, 3, V))),
        case("peaked y (logits x 5)", normal(rng, (B, V), scale=5.0)),
    ]


def _attention_inputs(rng, B, T_q, T_k, dtype=np.float64, scale=1.0):
    d_k, d_v = rng.integers(2, 7), rng.integers(2, 7)
    Q = normal(rng, (B, T_q, d_k), dtype, scale)
    return Q, normal(rng, (B, T_k, d_k), dtype), normal(rng, (B, T_k, d_v), dtype)


def _padding_mask(rng, B, T_k):
    """(B, 1, T_k): each sequence has 1..T_k real keys, the rest padding."""
    lengths = rng.integers(1, T_k + 1, size=B)
    lengths[0] = max(1, T_k - 2)  # at least one sequence is padded
    return np.arange(T_k)[None, None, :] < lengths[:, None, None]


def _attention_setups(rng):
    """(name, Q, K, V, mask) for both attention checkers; the dtype is Q's."""
    B, T_q, T_k = rng.integers(2, 4), rng.integers(2, 5), rng.integers(3, 7)
    T = rng.integers(3, 6)
    causal = np.tril(np.ones((1, T, T), dtype=bool))
    fully = np.ones((1, 3, T_k), dtype=bool)
    fully[0, 1] = False  # the second query may attend to no key at all
    no_padding = np.ones((B, 1, T_k), dtype=bool)

    def setup(name, B, T_q, T_k, mask, dtype=np.float64, scale=1.0):
        return (name, *_attention_inputs(rng, B, T_q, T_k, dtype, scale), mask)

    return [
        setup("random, no padding", B, T_q, T_k, no_padding),
        setup("padding mask (B, 1, T_k)", B, T_q, T_k, _padding_mask(rng, B, T_k)),
        setup("causal mask (1, T, T)", B, T, T, causal),
        setup("fully masked row", 1, 3, T_k, fully),
        setup("a batch of one", 1, T_q, T_k, _padding_mask(rng, 1, T_k)),
        setup("large scores (Q x 30)", B, T_q, T_k, no_padding, scale=30.0),
        setup("padding mask, float32", B, T_q, T_k, _padding_mask(rng, B, T_k), np.float32),
    ]


def _attention_sizes(Q, K, V, mask):
    B, T_q, d_k = Q.shape
    return f"B={B}, T_q={T_q}, T_k={K.shape[1]}, d_k={d_k}, d_v={V.shape[-1]}, mask {mask.shape}"


def attention_cases(rng):
    return [
        make_case(name, _attention_sizes(Q, K, V, mask), (Q, K, V, mask), ref.attention, Q.dtype)
        for name, Q, K, V, mask in _attention_setups(rng)
    ]


def attention_backward_cases(rng):
    cases = []
    for name, Q, K, V, mask in _attention_setups(rng):
        if name.startswith("large scores"):
            continue  # a saturated softmax's gradients are tiny: rounding would dominate
        P = ref.attention_weights(Q, K, mask).astype(Q.dtype)  # masked weights are 0 in P
        dout = normal(rng, Q.shape[:2] + V.shape[-1:], Q.dtype)
        sizes = _attention_sizes(Q, K, V, mask)
        cases.append(make_case(name, sizes, (Q, K, V, P, dout), ref.attention_backward, Q.dtype))
    return cases


def _layernorm_setups(rng):
    """(name, x, gamma, beta, eps) for both layer norm checkers; the dtype is x's."""
    B, T, d = rng.integers(2, 4), rng.integers(2, 5), rng.integers(3, 9)

    def setup(name, x, eps=1e-5):
        gamma, beta = 1 + normal(rng, d, x.dtype, 0.5), normal(rng, d, x.dtype, 0.5)
        return name, x, gamma, beta, eps

    constant = normal(rng, (B, T, d), scale=3.0) + 1
    constant[0, 0] = 2.5  # every feature equal: var = 0, only eps keeps it finite
    return [
        setup("random (B, T, d)", normal(rng, (B, T, d), scale=3.0) + 1),
        setup("random, float32", normal(rng, (B, T, d), np.float32, 3.0) + 1),
        setup("a batch of one", normal(rng, (1, 1, d), scale=2.0)),
        setup("2-D input (N, d)", normal(rng, (B * T, d))),
        setup("a constant row", constant),
        setup("tiny variance, eps = 1e-3", normal(rng, (B, T, d), scale=0.01), eps=1e-3),
    ]


def layernorm_cases(rng):
    return [
        make_case(name, f"x {x.shape}, eps={eps:g}", (x, gamma, beta, eps), ref.layernorm, x.dtype)
        for name, x, gamma, beta, eps in _layernorm_setups(rng)
    ]


def layernorm_backward_cases(rng):
    cases = []
    for name, x, gamma, beta, eps in _layernorm_setups(rng):
        args = (x, gamma, beta, eps, normal(rng, x.shape, x.dtype))
        sizes = f"x {x.shape}, eps={eps:g}"
        cases.append(make_case(name, sizes, args, ref.layernorm_backward, x.dtype))
    return cases


def positional_encoding_cases(rng):
    def case(name, max_len, d_model):
        sizes = f"max_len={max_len}, d_model={d_model}"
        return make_case(name, sizes, (max_len, d_model), ref.positional_encoding)

    length = int(rng.integers(5, 60))
    return [
        case("random even d_model", length, 2 * int(rng.integers(2, 16))),
        case("random odd d_model", length, 2 * int(rng.integers(2, 16)) + 1),
        case("a single position", 1, 8),
        case("a single sine/cosine pair", 10, 2),
        case("long and wide", 200, 64),
    ]


def top_p_cases(rng):
    def case(name, probs, p, dtype=np.float64):
        probs = probs.astype(dtype)
        return make_case(
            name, f"B={probs.shape[0]}, V={probs.shape[1]}, p={p:.3g}", (probs, p), ref.top_p, dtype
        )

    B, V = int(rng.integers(2, 6)), int(rng.integers(4, 12))
    peaked = np.array([[0.02, 0.95, 0.01, 0.02]])
    return [
        case("random rows", rng.dirichlet(np.ones(V), size=B), float(rng.uniform(0.5, 0.95))),
        case(
            "random rows, float32",
            rng.dirichlet(np.ones(V), size=B),
            float(rng.uniform(0.5, 0.95)),
            np.float32,
        ),
        case("a batch of one", rng.dirichlet(np.ones(V), size=1), float(rng.uniform(0.3, 0.9))),
        case("one token already holds p", peaked, 0.9),
        case("small p keeps only the top token", rng.dirichlet(np.ones(V), size=B), 0.01),
        case("p = 1 keeps every token", rng.dirichlet(np.ones(V) * 5, size=B), 1.0),
        case("rows sorted ascending", np.sort(rng.dirichlet(np.ones(V), size=B), axis=-1), 0.8),
    ]

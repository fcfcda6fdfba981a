"""Exercise checkers for training (lessons 13 and 21): one Adam step, the
paper's learning-rate schedule, clipping by the global norm, and the
gradient of a batch from the gradients of its shards.

Each reference works number by number with ``math`` (``math.sqrt``,
``math.fsum``, Python floats), not with minitrans's ``adam_update``,
``transformer_lr``, ``clip_grad_norm`` or ``DataParallel``, and each
checker's cases include the edges the exercise is about: step 1, where
Adam's bias correction matters most; the peak of the schedule; gradients
under, at and over the norm; a shard without a single real token; float32.
"""

import math

import numpy as np

from minitrans_course.exercise_checker import make_case, normal, run_checker

# ---- references


def adam_step(param, grad, m, v, t, lr, beta1, beta2, eps):
    """(new_param, new_m, new_v), one scalar at a time, as lesson 13 writes it."""
    flat = [np.asarray(a, dtype=np.float64).ravel() for a in (param, grad, m, v)]
    out = [np.empty(flat[0].size) for _ in range(3)]
    for i, (w, g, m_i, v_i) in enumerate(zip(*flat)):
        m_i = beta1 * float(m_i) + (1.0 - beta1) * float(g)
        v_i = beta2 * float(v_i) + (1.0 - beta2) * float(g) * float(g)
        m_hat = m_i / (1.0 - math.pow(beta1, t))
        v_hat = v_i / (1.0 - math.pow(beta2, t))
        out[0][i] = float(w) - lr * m_hat / (math.sqrt(v_hat) + eps)
        out[1][i], out[2][i] = m_i, v_i
    return tuple(a.reshape(np.shape(param)) for a in out)


def learning_rate(steps, d_model, warmup, factor):
    """factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), step by step."""
    rates = [
        factor * math.pow(d_model, -0.5) * min(math.pow(s, -0.5), s * math.pow(warmup, -1.5))
        for s in np.asarray(steps).ravel().tolist()
    ]
    return np.array(rates).reshape(np.shape(steps))


def clip_by_global_norm(grads, max_norm):
    """Every gradient times max_norm / norm when the norm of all of them
    together exceeds max_norm (minitrans's clip_grad_norm), else unchanged."""
    squares = [float(x) ** 2 for g in grads for x in np.asarray(g, dtype=np.float64).ravel()]
    norm = math.sqrt(math.fsum(squares))
    scale = max_norm / norm if norm > max_norm else 1.0
    return tuple(np.asarray(g, dtype=np.float64) * scale for g in grads)


def combine_shard_gradients(grads, counts):
    """sum_s (n_s / n) g_s element by element; zeros when n = 0 (no real token)."""
    total = sum(counts)
    flat = [np.asarray(g, dtype=np.float64).ravel() for g in grads]
    out = np.zeros(flat[0].size)
    for i in range(out.size):
        if total:
            out[i] = math.fsum(float(g[i]) * n / total for g, n in zip(flat, counts))
    return out.reshape(np.shape(grads[0]))


# ---- cases


def adam_cases(rng):
    def case(
        name,
        shape,
        t,
        grad_scale=1.0,
        dtype=np.float64,
        betas=(0.9, 0.98),
        eps=1e-9,
        fresh=False,
        lr=1e-3,
    ):
        g = normal(rng, shape, dtype, grad_scale)
        m = np.zeros(shape, dtype) if fresh else normal(rng, shape, dtype, 0.1 * grad_scale)
        v = np.zeros(shape, dtype) if fresh else normal(rng, shape, dtype, grad_scale) ** 2
        args = (normal(rng, shape, dtype), g, m, v, t, lr, *betas, eps)
        sizes = f"shape {shape}, t={t}, lr={lr:g}, betas={betas}, eps={eps:g}"
        return make_case(name, sizes, args, adam_step, dtype)

    n, rows, cols = int(rng.integers(2, 9)), int(rng.integers(2, 5)), int(rng.integers(2, 5))
    t = int(rng.integers(2, 60))
    return [
        case("step t = 1, m = v = 0", (n,), 1, fresh=True),
        case("random (d_in, d_out), step t", (rows, cols), t),
        case("random, float32", (rows, cols), t, dtype=np.float32),
        case("a batch of one (1, d)", (1, n), t),
        _zero_grad_case(rng, n, t),
        case("tiny gradients (1e-6): eps counts", (rows, cols), t, grad_scale=1e-6),
        case("large t = 10^6", (2, rows, cols), 10**6),
        case("other betas and eps", (n,), t, betas=(0.8, 0.999), eps=1e-8, lr=0.01),
    ]


def _zero_grad_case(rng, n, t):
    """g = 0 with m, v left from earlier steps: the moments decay, w still moves."""
    m, v = normal(rng, (n,), scale=0.1), normal(rng, (n,)) ** 2
    args = (normal(rng, (n,)), np.zeros(n), m, v, t, 1e-3, 0.9, 0.98, 1e-9)
    return make_case("zero gradient", f"shape ({n},), t={t}", args, adam_step)


def learning_rate_cases(rng):
    def case(name, steps, d_model, warmup, factor=1.0):
        steps = np.asarray(steps, dtype=np.int64)
        sizes = f"{steps.size} steps, d_model={d_model}, warmup={warmup}, factor={factor:g}"
        return make_case(name, sizes, (steps, d_model, warmup, factor), learning_rate)

    warmup, d_model = int(rng.integers(10, 5000)), int(rng.choice([16, 64, 256, 512]))
    return [
        case("random steps", rng.integers(1, 5 * warmup, size=20), d_model, warmup),
        case("step = warmup, the peak", [warmup - 1, warmup, warmup + 1], d_model, warmup),
        case("step 1", [1], d_model, warmup),
        case("huge steps (10^9)", [10**6, 10**9], d_model, warmup),
        case("warmup 1: decay from the start", [1, 2, 3, 100], d_model, 1),
        case("a factor", rng.integers(1, 3 * warmup, size=8), d_model, warmup, 2.5),
        case("the paper: d_model 512, warmup 4000", [1, 100, 4000, 100000], 512, 4000),
    ]


def clip_cases(rng):
    def case(name, grads, max_norm, dtype=np.float64):
        grads = [g.astype(dtype) for g in grads]
        sizes = f"{len(grads)} arrays, shapes {[g.shape for g in grads]}, max_norm={max_norm:g}"
        return make_case(name, sizes, (grads, max_norm), clip_by_global_norm, dtype)

    def some_grads(scale, count=3):
        return [
            normal(rng, tuple(rng.integers(1, 5, size=rng.integers(1, 3))), scale=scale)
            for _ in range(count)
        ]

    over = some_grads(5.0)
    at = some_grads(1.0)
    at_norm = math.sqrt(math.fsum(float(x) ** 2 for g in at for x in g.ravel()))
    return [
        case("over the norm", over, 1.0),
        case("over the norm, float32", over, 1.0, np.float32),
        case("under the norm: unchanged", some_grads(0.01), 1.0),
        case("exactly at the norm: unchanged", at, at_norm),
        case("one array", some_grads(3.0, count=1), 0.5),
        case("one large array among small ones", some_grads(0.01) + [normal(rng, (3, 4))], 1.0),
        case("all zero: norm 0", [np.zeros((2, 3)), np.zeros(4)], 1.0),
    ]


def shard_cases(rng):
    def case(name, counts, dtype=np.float64, shape=None):
        shape = shape or (int(rng.integers(2, 5)), int(rng.integers(2, 5)))
        grads = [normal(rng, shape, dtype) if n else np.zeros(shape, dtype) for n in counts]
        sizes = f"{len(counts)} shards, tokens {list(counts)}, shape {shape}"
        return make_case(name, sizes, (grads, list(counts)), combine_shard_gradients, dtype)

    S = int(rng.integers(2, 5))
    counts = [int(n) for n in rng.integers(1, 40, size=S)]
    counts[0] = counts[-1] + 7  # shards of different sizes: 1/S is not n_s / n
    return [
        case("shards of different sizes", counts),
        case("different sizes, float32", counts, np.float32),
        case("equal shards", [12] * S),
        case("a shard with one token", [30, 1]),
        case("a shard with no real token", [25, 0, 9]),
        case("no real token in the batch", [0, 0]),
        case("one shard", [17]),
        case("a 1-D gradient (bias)", counts, shape=(int(rng.integers(2, 7)),)),
    ]


# ---- checkers


def check_adam_step(fn, quiet=False, seed=None):
    """fn(param, grad, m, v, t, lr, beta1, beta2, eps) -> (new_param, new_m,
    new_v): one Adam step at step t = 1, 2, ... (lesson 13)."""
    return run_checker(
        "adam step",
        fn,
        adam_cases,
        "m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; m_hat = m / (1 - b1^t), "
        "v_hat = v / (1 - b2^t); w - lr m_hat / (sqrt(v_hat) + eps): eps outside "
        "the square root",
        quiet,
        seed,
        outputs=("new_param", "new_m", "new_v"),
    )


def check_learning_rate(fn, quiet=False, seed=None):
    """fn(steps, d_model, warmup, factor) -> the rate at each step, same shape."""
    return run_checker(
        "learning rate",
        fn,
        learning_rate_cases,
        "factor * d_model**-0.5 * np.minimum(steps**-0.5, steps * warmup**-1.5), "
        "with steps as floats",
        quiet,
        seed,
    )


def check_clip_by_global_norm(fn, quiet=False, seed=None):
    """fn(grads, max_norm) -> the list of clipped gradients, in order."""
    return run_checker(
        "clip by global norm",
        lambda *a: _as_tuple(fn(*a)),
        clip_cases,
        "one norm for all the arrays together, sqrt(sum of every g^2); only if "
        "it exceeds max_norm, multiply every array by max_norm / norm",
        quiet,
        seed,
    )


def check_combine_shard_gradients(fn, quiet=False, seed=None):
    """fn(grads, counts) -> the gradient of the batch's mean loss, from the
    shards' mean-loss gradients and their numbers of real tokens."""
    return run_checker(
        "combine shard gradients",
        fn,
        shard_cases,
        "weigh shard s by n_s / n, its share of the real tokens, not by 1 / S; "
        "with no real token at all (n = 0) the gradient is zero",
        quiet,
        seed,
    )


def _as_tuple(answer):
    """A list of arrays is compared array by array, as a tuple."""
    return tuple(answer) if isinstance(answer, list) else answer


CHECKERS = {
    "adam_step": check_adam_step,
    "learning_rate": check_learning_rate,
    "clip_by_global_norm": check_clip_by_global_norm,
    "combine_shard_gradients": check_combine_shard_gradients,
}

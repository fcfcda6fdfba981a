"""Each fast kernel against its reference, on the shapes of the benchmark's configs.

    python benchmarks/kernels.py                    # every pair, five configs, 1 and 2 threads
    python benchmarks/kernels.py --configs base --kernels sum_last,layer_norm
    python benchmarks/kernels.py --quick            # a smoke run: checks the script, not the speed

Every kernel pair of ``minitrans.core.kernels.PAIRS`` is timed on the arrays
it meets in a training step of the configs of ``vs_pytorch.py`` (tiny,
small, base, copy): layer norm on (batch, length, d_model), the loss on
(batch, length, vocab), attention's softmax on (batch, h, length, length),
Adam on the model's parameters in the optimiser's blocks. The kernels only
the modern decoder has (the sigmoid of SwiGLU, rotary positions,
grouped-query attention, forward and backward) are timed on the llama
config's arrays, and on nothing else. The reference and
the fast version take turns (ref, fast, ref, fast, ...), so that a busy
moment of the machine hits both alike, and each keeps its best time; BLAS
is limited to 1, then 2 threads (threadpoolctl). An input that a fast
version writes over is restored before every call of either version.

It prints a Markdown table, ratio = reference / fast (above 1: the fast
version is faster), a row per kernel, config and shape, and writes it into
the run's results file, benchmarks/results/kernels/, under the lowest,
median and highest ratio and each pair's range over the configs. A run of
every pair also times the choices the library's comments explain that are
not pairs (``harness.code_choices``: the slower way against the way the
code takes). A fast version stays where
it is never slower; the one shape whose winner has depended on the machine
is the sum over the base config's 8000 logits a row, so on a new machine
run ``--kernels sum_last --configs base`` (minitrans/ops/sums.py).
"""

import argparse
import sys
import timeit

import numpy as np
from threadpoolctl import threadpool_limits

import minitrans
from minitrans.core import backend, kernels
from minitrans.layers import (  # noqa: F401  (the modules of the pairs)
    dropout, embedding, grouped, layernorm, loss, rmsnorm, rotary,
)
from minitrans.layers.multihead import MultiHeadAttention
from minitrans.model.config import ModelConfig
from minitrans.model.transformer import Transformer
from minitrans.ops import activations, softmax, sums  # noqa: F401
from minitrans.ops.random_bits import stream_key
from minitrans.training.optimisation import adam  # noqa: F401  (the module of the adam_update pair)
from minitrans.training.optimisation.adam import Adam
from minitrans.training.optimisation.optimizer import block

from harness import machine, results
from harness.code_choices import CHOICES
from harness.configs import ALL_CONFIGS, LLAMA_CONFIGS, QUICK_SIZES

# the argument that a pair's fast version writes over, restored before every call
OVERWRITTEN = {"attention_softmax": 0, "attention_softmax_backward": 1}
# the pairs of the modern decoder's layers, timed on the llama configs only
MODERN = {"sigmoid", "rotate_pairs", "grouped_attention"}


def applies(name, config):
    """Whether pair ``name`` runs in a training step of ``config``."""
    return (name in MODERN) == (config in LLAMA_CONFIGS)


def cases(name, c, rng):
    """[(shape label, argument list)] for pair ``name`` and config sizes
    ``c``: the arrays of one training step that go through the kernel."""
    B, T, D, V, h, d_ff = c["batch"], c["length"], c["d_model"], c["vocab_size"], c["h"], c["d_ff"]
    N = B * T  # tokens in a batch

    def normal(*shape, scale=1.0):
        return backend.from_host(rng.standard_normal(shape) * scale)

    def tokens(*shape):
        return backend.to_device(rng.integers(0, V, size=shape))

    def keep(*shape):  # dropout's mask of kept elements, p = 0.1
        return backend.to_device(rng.random(shape) >= 0.1)

    def scores_and_mask():
        return [normal(B, h, T, T, scale=2.0), backend.to_device(np.tril(np.ones((T, T), bool)))]

    def layer_norm_backward_args():
        gamma = normal(D)
        _, (x_hat, inv_std) = layernorm.layer_norm.reference(normal(B, T, D), gamma, gamma, 1e-5)
        return [normal(B, T, D), gamma, x_hat, inv_std]

    def rms_norm_backward_args():
        g = normal(D)
        _, (x_hat, inv_rms) = rmsnorm.rms_norm.reference(normal(B, T, D), g, 1e-5)
        return [normal(B, T, D), g, x_hat, inv_rms]

    def gelu_backward_args():
        a = normal(B, T, d_ff)
        return [a, activations.gelu_gate(a), normal(B, T, d_ff)]

    def loss_args():
        return [normal(B, T, V, scale=3.0), tokens(B, T),
                backend.from_host(np.full((B, T), 1.0 / N)), 0.1]

    def loss_backward_args():
        logits, targets, weights, eps = loss_args()
        _, exps, total = loss.smoothed_cross_entropy.reference(logits, targets, weights, eps)
        return [1.0, exps, total, targets, weights, eps]

    if name in ("sum_last", "mean_last", "sum_leading"):
        widths = {"sum_last": (D, V), "mean_last": (D,), "sum_leading": (D, d_ff, V)}[name]
        return [(f"({N}, {n})", [normal(N, n)]) for n in widths]
    if name in ("dot_last", "dot_leading"):
        return [(f"({N}, {D})", [normal(N, D), normal(N, D)])]
    if name == "adam_update":
        return [adam_case(c)]
    if name in MODERN:
        return [modern_case(name, c, normal)]
    label, make = {
        "attention_softmax": (f"({B}, {h}, {T}, {T}) causal", scores_and_mask),
        "attention_softmax_backward": (f"({B}, {h}, {T}, {T})", lambda: [
            softmax.attention_softmax.reference(*scores_and_mask()), normal(B, h, T, T)]),
        "layer_norm": (f"({B}, {T}, {D})", lambda: [normal(B, T, D), normal(D), normal(D), 1e-5]),
        "layer_norm_backward": (f"({B}, {T}, {D})", layer_norm_backward_args),
        "rms_norm": (f"({B}, {T}, {D})", lambda: [normal(B, T, D), normal(D), 1e-5]),
        "rms_norm_backward": (f"({B}, {T}, {D})", rms_norm_backward_args),
        "smoothed_cross_entropy": (f"({B}, {T}, {V})", lambda: loss_args() + [
            backend.get_xp().empty((B, T, V), backend.get_dtype())]),
        "smoothed_cross_entropy_backward": (f"({B}, {T}, {V})", loss_backward_args),
        "add_rows_at": (f"({V}, {D}) += {N} rows", lambda: [normal(V, D), tokens(N),
                                                            normal(N, D)]),
        "dropout_keep_mask": (f"({B}, {T}, {D})", lambda: [stream_key(0), (B, T, D), 0.1]),
        "dropout_scale": (f"({B}, {T}, {D})", lambda: [normal(B, T, D), keep(B, T, D), 1 / 0.9]),
        "residual_dropout": (f"({B}, {T}, {D})", lambda: [normal(B, T, D), normal(B, T, D),
                                                          keep(B, T, D), 1 / 0.9]),
        "bias_relu": (f"({B}, {T}, {d_ff})", lambda: [normal(B, T, d_ff), normal(d_ff)]),
        "bias_gelu": (f"({B}, {T}, {d_ff})", lambda: [normal(B, T, d_ff), normal(d_ff)]),
        "relu_backward": (f"({B}, {T}, {d_ff})", lambda: [
            normal(B, T, d_ff), backend.get_xp().maximum(normal(B, T, d_ff), 0.0)]),
        "gelu_backward": (f"({B}, {T}, {d_ff})", gelu_backward_args),
    }[name]
    return [(label, make())]


def modern_case(name, c, normal):
    """(label, arguments) of a pair of the llama config's layers."""
    B, T, h, d_ff = c["batch"], c["length"], c["h"], c["d_ff"]
    d_k, kv_heads = c["d_model"] // h, c["kv_heads"]
    if name == "sigmoid":
        return f"({B}, {T}, {d_ff})", [normal(B, T, d_ff, scale=2.0)]
    if name == "rotate_pairs":  # the queries as split_heads gives them: a (B, T, h, d_k) view
        cos, sin = rotary.rotary_tables(T, d_k)
        return f"({B}, {h}, {T}, {d_k})", [normal(B, T, h, d_k).swapaxes(1, 2), cos, sin]
    layer = MultiHeadAttention(c["d_model"], h, rng=0, kv_heads=kv_heads, bias=False)
    causal = backend.to_device(np.tril(np.ones((1, 1, T, T), bool)))
    return (f"({B}, {h}, {T}, {d_k}) over {kv_heads} heads, causal",
            [layer, normal(B, h, T, d_k), normal(B, kv_heads, T, d_k),
             normal(B, kv_heads, T, d_k), causal, normal(B, h, T, d_k)])


def run_grouped(attend):
    """Forward and backward of a version of grouped_attention."""
    def forward_backward(layer, Q, K, V, mask, dheads):
        _, backward = attend(layer, Q, K, V, mask)
        backward(layer, dheads)
    return forward_backward


def adam_case(c):
    """Adam over every parameter of the config's model, in the optimiser's
    blocks, one thread: one (param, grad, m, v) per block."""
    config = ModelConfig(**{k: c[k] for k in ("d_model", "h", "N", "d_ff", "vocab_size")})
    model = Transformer(config, rng=0)
    xp, step, blocks, count = backend.get_xp(), Adam.BLOCK_BYTES // 4, [], 0
    for _, param, grad in model.named_parameters():
        grad[...] = 1e-3
        m, v = xp.zeros_like(param), xp.full_like(param, 1e-6)
        parts = [None] if param.size <= step else [
            slice(s, s + step) for s in range(0, param.size, step)]
        blocks += [tuple(block(a, part) for a in (param, grad, m, v)) for part in parts]
        count += param.size
    return f"{count:,} parameters", [blocks]


def run_adam(update):
    """Adam over every block, as the optimiser runs it: one scratch array
    for all the blocks (the reference ignores it)."""
    def over_blocks(blocks):
        xp = backend.get_xp()
        scratch = xp.empty(max(grad.size for _, grad, _, _ in blocks), dtype=blocks[0][1].dtype)
        for param, grad, m, v in blocks:
            update(param, grad, m, v, 10, 1e-4, (0.9, 0.98), 1e-9,
                   scratch=scratch[:grad.size].reshape(grad.shape))
    return over_blocks


def best_times(pair, name, args, repeats, number):
    """Best seconds per call of the reference and the fast version, taking turns."""
    versions = [pair.reference, pair.fast]
    if name == "adam_update":
        versions = [run_adam(v) for v in versions]
    if name == "grouped_attention":
        versions = [run_grouped(v) for v in versions]
    index = OVERWRITTEN.get(name)
    saved = None if index is None else args[index].copy()
    xp = backend.get_xp()

    def call(version):
        if saved is not None:
            xp.copyto(args[index], saved)
        version(*args)

    timers = [timeit.Timer(lambda v=v: call(v)) for v in versions]
    if number is None:  # enough calls for about 20 ms a turn, from one reference call
        number = max(1, min(200, int(0.02 / max(timers[0].timeit(1), 1e-6))))
    best = [np.inf, np.inf]
    for _ in range(repeats):
        for i, timer in enumerate(timers):
            best[i] = min(best[i], timer.timeit(number) / number)
    return best


def time_choice(setup, statements, repeats, number, threads):
    """Best seconds per run of each of ``statements`` after ``setup``, taking
    turns, with ``threads`` BLAS threads (None: as it is)."""
    namespace = {}
    exec(setup, namespace)  # noqa: S102  (the setups of harness.code_choices)
    timers = [timeit.Timer(statement, globals=namespace) for statement in statements]
    with threadpool_limits(threads, user_api="blas"):
        if number is None:  # enough runs for about 20 ms a turn
            number = max(1, min(200, int(0.02 / max(timers[0].timeit(1), 1e-6))))
        best = [np.inf] * len(timers)
        for _ in range(repeats):
            for i, timer in enumerate(timers):
                best[i] = min(best[i], timer.timeit(number) / number)
    return best


def choices_table(repeats, number):
    """A row per choice of harness.code_choices: both ways' milliseconds."""
    lines = ["| where | what | the slower way | the code's way | slower ms | code's ms "
             "| ratio |", "|---|---|---|---|---:|---:|---:|"]
    print("\n".join(lines))
    for where, what, setup, slower, chosen, threads in CHOICES:
        slow, fast = time_choice(setup, [slower, chosen], repeats, number, threads)
        lines.append(f"| `{where}` | {what} | `{slower}` | `{chosen}` | {slow * 1e3:.3f} "
                     f"| {fast * 1e3:.3f} | {slow / fast:.2f} |")
        print(lines[-1], flush=True)
    return "\n".join(lines)


def overall_table(rows, threads):
    """A row per thread count: how many rows, the lowest ratio (the one to
    watch: below 1 a fast version is slower), the median and the highest."""
    lines = ["| BLAS threads | rows | lowest ratio | median ratio | highest ratio |",
             "|---:|---:|---|---:|---|"]
    for t in threads:
        ranked = sorted(rows, key=lambda row: row["ratios"][t])
        low, high = ranked[0], ranked[-1]
        median = ranked[len(ranked) // 2]["ratios"][t]
        lines.append(f"| {t} | {len(rows)} | {low['ratios'][t]:.2f} ({low['kernel']}, "
                     f"{low['config']}) | {median:.2f} | {high['ratios'][t]:.2f} "
                     f"({high['kernel']}, {high['config']}) |")
    return "\n".join(lines)


def summary_table(rows, threads):
    """A row per pair: its configs and the lowest and highest ratio over
    them (and their shapes), at each thread count."""
    lines = ["| kernel | configs | " + " | ".join(f"ratio ({t}t), lowest to highest"
                                                for t in threads) + " |",
             "|---|---|" + "---:|" * len(threads)]
    for name in dict.fromkeys(row["kernel"] for row in rows):
        mine = [row for row in rows if row["kernel"] == name]
        cells = [name, ", ".join(dict.fromkeys(row["config"] for row in mine))]
        for t in threads:
            ratios = [row["ratios"][t] for row in mine]
            cells.append(f"{min(ratios):.2f} to {max(ratios):.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def pair_rows(names, configs, sizes, threads, repeats, number):
    """Time every pair of ``names`` on every config it runs in, printing a
    table row as each ends; returns the rows (dicts) and the table."""
    header = ["kernel", "config", "shape"]
    for t in threads:
        header += [f"reference ms ({t}t)", f"fast ms ({t}t)", f"ratio ({t}t)"]
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join(["---"] * 3 + ["---:"] * (3 * len(threads))) + "|"]
    print("\n".join(lines))
    rng, rows = np.random.default_rng(0), []
    with minitrans.using("numpy", dtype="float32"):
        for name in names:
            for config in (config for config in configs if applies(name, config)):
                for label, kernel_args in cases(name, sizes[config], rng):
                    cells, ratios = [name, config, label], {}
                    for t in threads:
                        with threadpool_limits(t, user_api="blas"):
                            ref, fast = best_times(kernels.PAIRS[name], name, kernel_args,
                                                   repeats, number)
                        ratios[t] = ref / fast
                        cells += [f"{ref * 1e3:.3f}", f"{fast * 1e3:.3f}", f"{ref / fast:.2f}"]
                    lines.append("| " + " | ".join(cells) + " |")
                    print(lines[-1], flush=True)
                    rows.append({"kernel": name, "config": config, "ratios": ratios})
    return rows, "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default=",".join(ALL_CONFIGS))
    parser.add_argument("--kernels", default=None,
                        help="comma-separated pair names (default: all, and the code's choices)")
    parser.add_argument("--threads", default="1,2", help="BLAS thread counts (default 1,2)")
    parser.add_argument("--repeats", type=int, default=5, help="turns of each version (default 5)")
    parser.add_argument("--quick", action="store_true",
                        help="tiny config (and llama's quick sizes for the modern "
                             "decoder's pairs), one turn of one call, 1 thread: a smoke run")
    results.add_option(parser, "kernels")
    args = parser.parse_args(argv)
    configs = args.configs.split(",")
    try:
        threads = [int(t) for t in args.threads.split(",")]
    except ValueError:
        parser.error(f"--threads: expected comma-separated whole numbers, got {args.threads!r}")
    if min(threads) < 1 or args.repeats < 1:
        parser.error(f"--threads, --repeats: expected numbers >= 1, got {args.threads!r} and "
                     f"{args.repeats}")
    repeats, number = args.repeats, None
    sizes = dict(ALL_CONFIGS)
    if args.quick:
        configs, threads, repeats, number = ["tiny", "llama"], [1], 1, 1
        sizes["llama"] = {**sizes["llama"], **QUICK_SIZES["llama"]}
    unknown = sorted(set(configs) - set(ALL_CONFIGS))
    if unknown:
        parser.error(f"--configs: unknown {unknown}; expected some of {sorted(ALL_CONFIGS)}")
    # a pair whose fast version is its reference has only a device version to
    # measure, on a GPU (the device check): on the CPU there is nothing to time
    timed = sorted(name for name, pair in kernels.PAIRS.items() if pair.fast is not pair.reference)
    names = args.kernels.split(",") if args.kernels else timed
    unknown = sorted(set(names) - set(kernels.PAIRS))
    if unknown:
        parser.error(f"--kernels: unknown {unknown}; expected some of {sorted(kernels.PAIRS)}")

    rows, table = pair_rows(names, configs, sizes, threads, repeats, number)
    parts = [overall_table(rows, threads), "Each pair over its configs and shapes (ratio = "
             "reference / fast):", summary_table(rows, threads), "Every row:", table]
    if not args.kernels:
        print()
        parts += ["The code's choices that are not pairs (ratio = the slower way / the code's "
                  "way):", choices_table(repeats, number)]
    results.save(args.results, "kernels", "Fast kernels against their references",
                 "\n\n".join(parts) + "\n", machine.summary(), smoke=args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())

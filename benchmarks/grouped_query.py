"""Grouped-query against multi-head attention in minitrans: the key/value
cache's memory and greedy decoding's time.

    python benchmarks/grouped_query.py              # the llama config: kv_heads 2 against 8
    python benchmarks/grouped_query.py --rounds 5 --sequences 16 --tokens 128
    python benchmarks/grouped_query.py --quick      # a smoke run: checks the script, not the speed

Two DecoderOnlyLMs of vs_pytorch.py's llama config (RMSNorm, rotary, SwiGLU,
no biases), one with its kv_heads (2: each key/value head shared by 4 of the
8 query heads), one with kv_heads = h (8: the paper's multi-head
attention), the same other sizes, each greedily continue the same
``--sequences`` one-token prompts by ``--tokens`` tokens with the key/value
cache (``minitrans.decoding.generate``), no token ending a sequence early.
The model's max_len is ``--tokens``: the cache holds every position fed.

The cache's bytes are read off the cache arrays that the decoding used
(``KVCache.keys`` and ``.values`` of every layer, at the length decoded:
sequences x kv_heads x positions x d_k numbers, float32, K and V, per layer)
and checked against ``minitrans.core.memory_budget.kv_cache_numbers``. The
times are the best of ``--rounds`` runs of each, taken in turn (A B A B),
with ``--threads`` BLAS threads, in this one process. The weights are
random (rng 0): the time of a step does not depend on what it predicts.
"""

import argparse
import datetime
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_runner import llama_model_config  # noqa: E402
from machine_info import cpu_model, numpy_blas  # noqa: E402
from vs_pytorch import LLAMA_CONFIGS  # noqa: E402

MB = 2**20
# --quick: small enough for the test suite, still 8 query heads over 2 key/value heads
QUICK = dict(d_model=64, N=2, d_ff=176, vocab_size=500)


def build(sizes, kv_heads, tokens):
    """A DecoderOnlyLM of ``sizes`` with ``kv_heads`` key/value heads and
    room for ``tokens`` positions, remembering the decoding state that its
    last ``start`` made."""
    from minitrans.model.language_model import DecoderOnlyLM

    class RememberingLM(DecoderOnlyLM):
        def start(self, batch_size):
            self.last_state = super().start(batch_size)
            return self.last_state

    return RememberingLM(llama_model_config({**sizes, "kv_heads": kv_heads}, max_len=tokens),
                         rng=0)


def cache_bytes(state):
    """Bytes of the keys and values that the caches of every layer hold at
    the length decoded (their buffers, allocated for max_len at the first
    step, are as long here: max_len is the length decoded)."""
    return sum(int(cache.keys.nbytes) + int(cache.values.nbytes) for cache in state.caches)


def decode(model, prompt, tokens):
    """Seconds of one greedy decoding with the cache."""
    from minitrans.decoding import generate

    start = time.perf_counter()
    new = generate(model, prompt, tokens, eos_id=-1)  # eos_id=-1: no row ends early
    seconds = time.perf_counter() - start
    if new.shape != (prompt.shape[0], tokens):
        raise RuntimeError(f"decoded {new.shape}, expected {(prompt.shape[0], tokens)}")
    return seconds


def compare(sizes, sequences, tokens, rounds, threads):
    """{kv_heads: measurements} for the config's kv_heads and for h."""
    from threadpoolctl import threadpool_limits

    import minitrans
    from minitrans.core.memory_budget import kv_cache_numbers

    prompt = np.random.default_rng(1).integers(4, sizes["vocab_size"], size=(sequences, 1))
    results = {}
    with minitrans.using("numpy", dtype="float32"), threadpool_limits(threads, user_api="blas"):
        models = {kv: build(sizes, kv, tokens) for kv in (sizes["kv_heads"], sizes["h"])}
        for kv, model in models.items():
            results[kv] = {"parameters": model.num_parameters(), "seconds": []}
        for _ in range(rounds):
            for kv, model in models.items():
                results[kv]["seconds"].append(decode(model, prompt, tokens))
        for kv, model in models.items():
            held = cache_bytes(model.last_state)
            positions = model.last_state.caches[0].length
            expected = sequences * kv_cache_numbers(model.config, positions) * 4  # float32
            if held != expected:
                raise RuntimeError(f"kv_heads {kv}: the cache holds {held} bytes, the formula "
                                   f"gives {expected}")
            results[kv].update(held=held, positions=positions)
    return results


def table(results, sizes, sequences, tokens):
    grouped, full = sizes["kv_heads"], sizes["h"]
    a, b = results[grouped], results[full]
    best = {kv: min(result["seconds"]) for kv, result in results.items()}
    rows = [
        ("key/value heads (query heads: %d)" % sizes["h"], f"{grouped}", f"{full}", ""),
        ("parameters", f"{a['parameters']:,}", f"{b['parameters']:,}",
         f"{a['parameters'] / b['parameters']:.2f}"),
        (f"key/value cache at {a['positions']} positions, bytes",
         f"{a['held']:,} ({a['held'] / MB:.1f} MB)", f"{b['held']:,} ({b['held'] / MB:.1f} MB)",
         f"{a['held'] / b['held']:.2f}"),
        (f"greedy decoding with the cache, {sequences} x {tokens} tokens, seconds (best of "
         f"{len(a['seconds'])})", f"{best[grouped]:.2f}", f"{best[full]:.2f}",
         f"{best[grouped] / best[full]:.2f}"),
        ("tokens per second", f"{sequences * tokens / best[grouped]:,.0f}",
         f"{sequences * tokens / best[full]:,.0f}",
         f"{best[full] / best[grouped]:.2f}"),
    ]
    lines = [f"| llama config | grouped-query (kv_heads {grouped}) | multi-head (kv_heads {full}) "
             f"| grouped / multi-head |", "| --- | --- | --- | --- |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def machine_line(threads, sizes):
    import minitrans

    shown = ", ".join(f"{key} {sizes[key]}" for key in ("d_model", "h", "N", "d_ff",
                                                        "vocab_size"))
    return (f"{datetime.date.today()}, {cpu_model()} with {os.cpu_count()} cores; NumPy "
            f"{np.__version__} BLAS: {numpy_blas()}; {threads} BLAS threads; Python "
            f"{platform.python_version()}; minitrans {getattr(minitrans, '__version__', '?')}; "
            f"float32; sizes: {shown}.")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=16, help="rows decoded (default 16)")
    parser.add_argument("--tokens", type=int, default=128,
                        help="tokens decoded per row, and the model's max_len (default 128)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="runs of each model, in turn; the best counts (default 3)")
    parser.add_argument("--threads", type=int, default=2, help="BLAS threads (default 2)")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes, 4 rows of 16 tokens, one round: a smoke run")
    args = parser.parse_args(argv)
    for option in ("sequences", "tokens", "rounds", "threads"):
        if getattr(args, option) < 1:
            parser.error(f"--{option}: expected a number >= 1, got {getattr(args, option)}")
    sizes = dict(LLAMA_CONFIGS["llama"])
    if args.quick:
        sizes.update(QUICK)
        args.sequences, args.tokens, args.rounds = 4, 16, 1
    results = compare(sizes, args.sequences, args.tokens, args.rounds, args.threads)
    print(machine_line(args.threads, sizes))
    print()
    print(table(results, sizes, args.sequences, args.tokens))
    return 0


if __name__ == "__main__":
    sys.exit(main())

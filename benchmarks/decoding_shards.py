"""Decoding on one thread or two: where splitting the rows pays.

    python benchmarks/decoding_shards.py
    python benchmarks/decoding_shards.py --rows 16,96 --rounds 2

Greedy decoding and beam search split a batch's rows over threads
(``minitrans.decoding.shards``) only where each shard gets at least
``MIN_ROWS_PER_SHARD`` rows: 64 for greedy decoding with the cache, 8 when
the prefix is recomputed, 4 for beam search. This script is the measurement
behind those numbers: the small config of vs_pytorch.py (d_model 128, 2
layers, 1000 tokens; random weights), sources of 32 tokens, 32 tokens
decoded with no row ending, on one thread (two BLAS threads) and on two (one
BLAS thread each, forced whatever the rows), best of ``--rounds``. Run it
with the tuned allocator for the figures in benchmarks/README.md:
MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=68719476736.
"""

import argparse
import datetime
import os
import platform
import time

import numpy as np

from benchmark_worker import model_config
from machine_info import cpu_model
from vs_pytorch import CONFIGS

SOURCE_LENGTH, NEW_TOKENS = 32, 32


def best_seconds(decode, rounds):
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        decode()
        best = min(best, time.perf_counter() - start)
    return best


def methods(model, src):
    """(name, way of MIN_ROWS_PER_SHARD, decode(workers)) of each way to decode."""
    from minitrans import decoding

    def greedy(use_cache):
        return lambda workers: decoding.greedy(model, src, NEW_TOKENS, eos_id=-1,
                                               use_cache=use_cache, workers=workers)

    def beam(workers):
        return decoding.beam_search(model, src, beam_size=4, max_len=NEW_TOKENS, eos_id=-1,
                                    workers=workers)

    return [("greedy, cache", "cache", greedy(True)),
            ("greedy, recomputing", "recompute", greedy(False)),
            ("beam search, width 4", "beam", beam)]


def main(argv=None):
    import minitrans
    from minitrans.decoding import shards
    from minitrans.model.transformer import Transformer

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="8,16,32,64,96,128",
                        help="comma-separated batch sizes (default 8,16,32,64,96,128)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per setting (default 3)")
    args = parser.parse_args(argv)
    try:
        row_counts = [int(rows) for rows in args.rows.split(",")]
    except ValueError:
        parser.error(f"--rows: expected comma-separated positive integers, got {args.rows!r}")
    if not row_counts or min(row_counts) < 1:
        parser.error(f"--rows: expected comma-separated positive integers, got {args.rows!r}")
    if args.rounds < 1:
        parser.error(f"--rounds: expected a positive number, got {args.rounds}")
    minitrans.use("numpy", dtype="float32")
    sizes = CONFIGS["small"]
    model = Transformer(model_config(sizes, SOURCE_LENGTH + NEW_TOKENS + 1), rng=0).eval()
    print(f"{datetime.date.today()}, {cpu_model()} with {os.cpu_count()} cores; NumPy "
          f"{np.__version__}; Python {platform.python_version()}; MIN_ROWS_PER_SHARD = "
          f"{shards.MIN_ROWS_PER_SHARD}.\n")
    print("| decoding | rows | 1 thread | 2 threads | 2 / 1 | minitrans uses |")
    print("| --- | --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(1)
    chosen_by_minitrans = shards.MIN_ROWS_PER_SHARD
    for rows in row_counts:
        src = rng.integers(4, sizes["vocab_size"], size=(rows, SOURCE_LENGTH))
        for name, way, decode in methods(model, src):
            one = best_seconds(lambda: decode(1), args.rounds)
            shards.MIN_ROWS_PER_SHARD = dict.fromkeys(chosen_by_minitrans, 1)  # two, always
            try:
                two = best_seconds(lambda: decode(2), args.rounds)
            finally:
                shards.MIN_ROWS_PER_SHARD = chosen_by_minitrans
            chosen = shards.shard_count(rows, way)
            print(f"| {name} | {rows} | {one:.3f} s | {two:.3f} s | {two / one:.2f} | "
                  f"{chosen} thread{'s' if chosen > 1 else ''} |")


if __name__ == "__main__":
    main()

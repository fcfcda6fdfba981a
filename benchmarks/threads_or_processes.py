"""The workers' forward and backward as threads of one process, or as
processes side by side: what sharing one Python interpreter costs the step.

    python benchmarks/threads_or_processes.py                  # the llama and copy configs
    python benchmarks/threads_or_processes.py --configs base --rounds 9
    python benchmarks/threads_or_processes.py --quick          # a smoke run: tiny, one round

minitrans's DataParallel splits a batch over worker threads of one process
(minitrans.training.parallel). Their NumPy calls release Python's lock while
they compute, but every call takes it back, so the threads wait for each
other between calls. Here the same shards run three ways, in turns:

* **threads**: one process runs ``forward_backward`` of the whole batch on W
  worker threads, one BLAS thread each, as vs_pytorch.py's step does (the
  replicas' gradients added up included);
* **processes**: W processes, each with one BLAS thread, run the forward and
  backward of one shard each, started at the same moment;
* **one shard alone**: the first of those processes again, the other cores
  idle: how much the shards slow each other down beside each other.

The processes exchange no gradients, which a data-parallel step made of
processes would have to, so their time is a lower bound, and the ratio
threads / processes the most that moving the workers into processes could
gain on this machine. Neither side runs Adam. Every process uses the tuned
allocator of vs_pytorch.py.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from allocators import worker_env
from minitrans.model.replicas import shard_bounds
from vs_pytorch import (ALL_CONFIGS, available_configs, check_lowest, chosen_configs,
                        config_sizes, thread_env)

DEFAULT_CONFIGS = ["llama", "copy"]
WARMUP_STEPS = 2


# ------------------------------------------------------------- a child


def child(name, workers, shard, steps, quick):
    """Build the config's model with ``workers`` worker threads (on the
    whole batch) or, with ``shard`` set, one worker on that shard of the
    batch; answer each line of stdin ("go") with the seconds of ``steps``
    forward and backward passes, one JSON line."""
    from benchmark_worker import make_runner

    sizes = config_sizes(name, quick)
    if shard is not None:
        sizes = {**sizes, "batch": shard_size(sizes["batch"], workers, shard)}
    runner = make_runner("minitrans", sizes, "cpu", threads=workers if shard is None else 1,
                         workers=workers if shard is None else 1)
    passes = runner.parallel.forward_backward
    for _ in range(WARMUP_STEPS):
        passes(*runner.next_batch())
    print(json.dumps({"ready": True}), flush=True)
    for _ in sys.stdin:
        times = []
        for _ in range(steps):
            batch = runner.next_batch()
            start = time.perf_counter()
            passes(*batch)
            times.append(time.perf_counter() - start)
        print(json.dumps({"times": times}), flush=True)
    return 0


def shard_size(batch, workers, shard):
    """Rows of shard ``shard`` when ``batch`` rows are split over ``workers``,
    as DataParallel splits them."""
    start, stop = shard_bounds(batch, workers)[shard]
    return stop - start


# ------------------------------------------------------------ the parent


class Child:
    def __init__(self, name, args, workers, shard=None):
        threads = workers if shard is None else 1
        command = [sys.executable, os.path.abspath(__file__), "--child", name,
                   "--workers", str(workers), "--steps", str(args.steps)]
        command += ["--shard", str(shard)] if shard is not None else []
        command += ["--quick"] if args.quick else []
        env = {**worker_env("tuned"), **thread_env(threads)}
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True, env=env)
        self.read()  # ready

    def go(self):
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def read(self):
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"a child died (exit status {self.process.wait()})")
        return json.loads(line)

    def close(self):
        self.process.stdin.close()
        self.process.wait()


def measure(name, args):
    """Median seconds of a step's forward and backward: {"threads": ...,
    "processes": the slowest shard's, step by step, "alone": the first
    shard's with the others idle}."""
    threaded = Child(name, args, args.workers)
    shards = [Child(name, args, args.workers, shard) for shard in range(args.workers)]
    times = {"threads": [], "processes": [], "alone": []}
    try:
        for _ in range(args.rounds):
            time.sleep(args.pause)
            threaded.go()
            times["threads"] += threaded.read()["times"]
            time.sleep(args.pause)
            for shard in shards:  # all started before any is read
                shard.go()
            answers = [shard.read()["times"] for shard in shards]
            times["processes"] += [max(step) for step in zip(*answers)]
            time.sleep(args.pause)
            shards[0].go()
            times["alone"] += shards[0].read()["times"]
    finally:
        for process in [threaded, *shards]:
            process.close()
    return {label: statistics.median(values) for label, values in times.items()}


def report(results, workers):
    rows = [f"| config | {workers} worker threads, one process | {workers} processes side by "
            "side, one shard each | threads / processes | one shard alone | processes / alone |",
            "| --- | --- | --- | --- | --- | --- |"]
    for name, result in results.items():
        threads, processes, alone = result["threads"], result["processes"], result["alone"]
        rows.append(f"| {name} | {threads * 1e3:.0f} ms | {processes * 1e3:.0f} ms | "
                    f"{threads / processes:.2f} | {alone * 1e3:.0f} ms | "
                    f"{processes / alone:.2f} |")
    return "\n".join(rows)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", help=f"comma-separated, of {', '.join(ALL_CONFIGS)} "
                                          f"(default: {','.join(DEFAULT_CONFIGS)})")
    parser.add_argument("--rounds", type=int, default=5, help="turns of each side (default 5)")
    parser.add_argument("--steps", type=int, default=3, help="steps per turn (default 3)")
    parser.add_argument("--workers", type=int, default=2, help="workers (default 2)")
    parser.add_argument("--pause", type=float, default=0.3,
                        help="seconds before each turn, for BLAS threads to settle (default 0.3)")
    parser.add_argument("--quick", action="store_true", help="one round of tiny, a smoke run")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--shard", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    check_lowest(parser, (("--rounds", args.rounds, 1), ("--steps", args.steps, 1),
                          ("--workers", args.workers, 1), ("--pause", args.pause, 0)))
    args.names = chosen_configs(parser, args.configs,
                                ["tiny"] if args.quick else DEFAULT_CONFIGS)
    if args.quick:
        args.rounds, args.steps = 1, 1
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        return child(args.child, args.workers, args.shard, args.steps, args.quick)
    results = {}
    for name in available_configs(args.names):
        print(f"measuring {name} ...", file=sys.stderr, flush=True)
        results[name] = measure(name, args)
    if not results:
        print("no config could run", file=sys.stderr)
        return 1
    from machine_info import cpu_model

    print(f"{time.strftime('%Y-%m-%d')}, {cpu_model()} with {os.cpu_count()} cores; float32; "
          f"forward and backward only; medians of {args.rounds} rounds of {args.steps} steps.\n")
    print(report(results, args.workers))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Before and after: the training step of two checkouts of minitrans, in one run.

    git worktree add ../before HEAD~1
    python benchmarks/dev/ab_steps.py ../before .                # every config, 10 rounds
    python benchmarks/dev/ab_steps.py ../before . --configs tiny,small --rounds 20

A change that should not cost speed (a refactor, a rename) is judged here.
Two runs of ``vs_pytorch.py``, one per checkout, can differ by more than
the change on a shared machine (benchmarks/results/ab_steps/ has such a
pair of runs, minutes apart). This script starts one
minitrans worker of ``vs_pytorch.py`` per checkout (``--worker minitrans``,
the tuned allocator, the same threads) and asks them for steps in turn,
A B B A A B ..., so that a slow minute hits both alike; it prints the median
step time of each and their ratio.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

BENCHMARKS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, BENCHMARKS)  # the suite's harness, beside this folder

from harness.allocators import worker_env  # noqa: E402
from harness.configs import (  # noqa: E402
    ALL_CONFIGS, CONFIGS, PAUSE_SECONDS, STEPS_PER_TURN, WARMUP_STEPS,
)


def start_worker(checkout, config, threads):
    """A minitrans worker of ``checkout``'s own vs_pytorch.py, importing
    ``checkout``'s minitrans (PYTHONPATH comes before an installed copy)."""
    checkout = os.path.abspath(checkout)
    threads_env = {name: str(threads)
                   for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    env = {**worker_env("tuned"), **threads_env, "PYTHONPATH": checkout}
    script = os.path.join(checkout, "benchmarks", "vs_pytorch.py")
    command = [sys.executable, script, "--worker", "minitrans", "--config", config,
               "--threads", str(threads), "--device", "cpu"]
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=env, cwd=checkout)


def ask(worker, request):
    worker.stdin.write(json.dumps(request) + "\n")
    worker.stdin.flush()
    line = worker.stdout.readline()
    if not line:
        raise RuntimeError(f"a worker died (exit status {worker.wait()})")
    return json.loads(line)


def compare(config, checkouts, rounds, threads):
    """{label: median step seconds} of the checkouts, steps asked in turn."""
    workers = {label: start_worker(path, config, threads) for label, path in checkouts.items()}
    times = {label: [] for label in workers}
    try:
        for worker in workers.values():
            ask(worker, {"do": "ready"})
            ask(worker, {"do": "train", "steps": WARMUP_STEPS})
        for round_ in range(rounds):
            order = list(workers) if round_ % 2 == 0 else list(reversed(workers))
            for label in order:
                time.sleep(PAUSE_SECONDS)  # the other worker's BLAS threads go to sleep
                answer = ask(workers[label], {"do": "train", "steps": STEPS_PER_TURN[config]})
                times[label] += answer["times"]
    finally:
        for worker in workers.values():
            worker.stdin.close()
            worker.wait()
    return {label: statistics.median(values) for label, values in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", help="a checkout of minitrans (e.g. a git worktree)")
    parser.add_argument("after", help="another checkout (e.g. .)")
    parser.add_argument("--configs", default=",".join(CONFIGS),
                        help=f"comma-separated, of {', '.join(CONFIGS)} (default: all)")
    parser.add_argument("--rounds", type=int, default=10, help="turns of each (default 10)")
    parser.add_argument("--threads", type=int, default=2, help="threads of each (default 2)")
    args = parser.parse_args()
    names = args.configs.split(",")
    unknown = sorted(set(names) - set(ALL_CONFIGS))
    if unknown:
        parser.error(f"--configs: expected names of {', '.join(ALL_CONFIGS)}, got {unknown}")
    print("| config | before step | after step | after / before |\n| --- | --- | --- | --- |")
    for name in names:
        median = compare(name, {"before": args.before, "after": args.after}, args.rounds,
                         args.threads)
        print(f"| {name} | {median['before'] * 1e3:.1f} ms | {median['after'] * 1e3:.1f} ms "
              f"| {median['after'] / median['before']:.3f} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())

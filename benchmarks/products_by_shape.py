"""Each matrix product of a training step, NumPy's BLAS against PyTorch's:
alone on one thread, and at once on the step's worker threads.

    python benchmarks/products_by_shape.py                      # the llama and copy configs
    python benchmarks/products_by_shape.py --configs base,llama --rounds 5 --top 20
    python benchmarks/products_by_shape.py --quick              # a smoke run: tiny, one round

vs_pytorch.py splits a step into its matrix products and the rest, and
times one minitrans worker's products with each library as the step runs
them: the workers' threads multiplying at once. This script says which
products make the difference between the two libraries, and whether it
lies in their kernels or in how they share the cores:

* **alone**: each product on one thread, with the other cores idle: the
  two libraries' kernels on the same shapes and layouts;
* **at once**: each product on as many threads as the step has workers,
  each thread on operands of its own with the workers' BLAS threads, as the
  step computes them (``matmul_timer.time_on_threads``).

Each library runs in a worker process of its own (``vs_pytorch.Worker``,
with vs_pytorch.py's allocator and threads): one library's threads keep
spinning after a product and would take the cores from the other's in a
shared process. The rounds take turns, NumPy alone, PyTorch alone, NumPy at
once, PyTorch at once, and each product keeps its best time of all rounds.
Needs PyTorch, and transformers for the llama config.
"""

import argparse
import math
import os
import sys

from benchmark_report import machine_text
from vs_pytorch import (ALL_CONFIGS, PROFILE_STEPS, Worker, available_configs, check_lowest,
                        chosen_configs, config_sizes, thread_env)

DEFAULT_CONFIGS = ["llama", "copy"]
LIBRARIES = ("numpy", "torch")
MODES = ("alone", "at once")


def measure(name, args, make_worker=Worker):
    """One config's products, each timed by both libraries in both modes:
    {"products": one worker's list, "workers": W, "blas_threads": b,
    "seconds": {(library, mode): best seconds of each product}}."""
    workers = []  # closed at the end, also those started before a failure
    try:
        for kind in ("minitrans", "torch"):
            workers.append(make_worker(kind, name, args))
        ours, theirs = workers
        profile = ours.ask({"do": "profile", "steps": PROFILE_STEPS})
        products = profile["products"]
        threads = {"alone": {"threads": 1, "blas_threads": 1},
                   "at once": {"threads": profile["workers"],
                               "blas_threads": profile["blas_threads"]}}
        best = {(library, mode): [math.inf] * len(products)
                for library in LIBRARIES for mode in MODES}
        for _ in range(args.rounds):
            for mode in MODES:
                for library, worker in zip(LIBRARIES, (ours, theirs)):
                    request = {"do": "products", "products": products, **threads[mode]}
                    seconds = worker.turn(request)["seconds"]
                    best[library, mode] = list(map(min, best[library, mode], seconds))
    finally:
        for worker in workers:
            worker.close()
    return {"products": products, "workers": profile["workers"],
            "blas_threads": profile["blas_threads"], "seconds": best}


def per_step(result, library, mode):
    """Seconds of one worker's products in a step: each product's time,
    times how often a step computes it."""
    counts = [product[-1] for product in result["products"]]
    return sum(count * seconds for count, seconds in zip(counts, result["seconds"][library, mode]))


def ms_pair(ours, theirs, digits=".1f"):
    """"12.3 / 10.1 ms (1.22)": NumPy's and PyTorch's milliseconds and their
    ratio; ``digits`` formats the milliseconds."""
    return f"{ours * 1e3:{digits}} / {theirs * 1e3:{digits}} ms ({ours / theirs:.2f})"


def summary_table(results):
    rows = ["| config | products in a worker's step | alone, one thread: NumPy / PyTorch "
            "(ratio) | at once, the workers' threads: NumPy / PyTorch (ratio) | at once / "
            "alone: NumPy, PyTorch |", "| --- | --- | --- | --- | --- |"]
    for name, result in results.items():
        totals = {(library, mode): per_step(result, library, mode)
                  for library in LIBRARIES for mode in MODES}
        slowdown = ", ".join(f"{totals[library, 'at once'] / totals[library, 'alone']:.2f}"
                             for library in LIBRARIES)
        rows.append(
            f"| {name} | {sum(product[-1] for product in result['products'])} | "
            f"{ms_pair(totals['numpy', 'alone'], totals['torch', 'alone'])} | "
            f"{ms_pair(totals['numpy', 'at once'], totals['torch', 'at once'])} "
            f"({result['workers']} threads) | {slowdown} |")
    return "\n".join(rows)


def product_label(product):
    """"(1024, 256) x (256, 8000), N N": the shapes, and the layouts ("T":
    stored column by column, as a transposed view)."""
    a_shape, b_shape, a_layout, b_layout = product[:4]
    return f"({', '.join(map(str, a_shape))}) x ({', '.join(map(str, b_shape))}), " \
           f"{a_layout} {b_layout}"


def products_table(name, result, top):
    """The ``top`` products whose time at once differs most between the
    libraries in a step (NumPy's longer first), in ms per product."""
    seconds = result["seconds"]
    rows = []
    for index, product in enumerate(result["products"]):
        times = {key: values[index] for key, values in seconds.items()}
        difference = product[-1] * (times["numpy", "at once"] - times["torch", "at once"])
        rows.append((difference, product, times))
    rows.sort(key=lambda row: -row[0])
    lines = [f"| {name}: product | per step | alone: NumPy / PyTorch (ratio) | at once: NumPy / "
             "PyTorch (ratio) | difference at once, per step |",
             "| --- | --- | --- | --- | --- |"]
    for difference, product, times in rows[:top]:
        lines.append(
            f"| {product_label(product)} | {product[-1]} | "
            f"{ms_pair(times['numpy', 'alone'], times['torch', 'alone'], '.3g')} | "
            f"{ms_pair(times['numpy', 'at once'], times['torch', 'at once'], '.3g')} | "
            f"{difference * 1e3:+.2f} ms |")
    return "\n".join(lines)


def header(machine, results):
    """The report's first line: the machine, both BLAS libraries, the workers."""
    first = next(iter(results.values()))
    return (f"{machine_text(machine)}; minitrans with {first['workers']} worker threads of "
            f"{first['blas_threads']} BLAS thread(s); float32; each product's best of the "
            f"rounds.")


def report(machine, results, top):
    parts = [header(machine, results), "", summary_table(results)]
    parts += ["\n" + products_table(name, result, top) for name, result in results.items()]
    return "\n".join(parts)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", help=f"comma-separated, of {', '.join(ALL_CONFIGS)} "
                                          f"(default: {','.join(DEFAULT_CONFIGS)})")
    parser.add_argument("--rounds", type=int, default=3,
                        help="turns of each library in each mode (default 3)")
    parser.add_argument("--threads", type=int, default=2,
                        help="threads of each library, as in vs_pytorch.py (default 2)")
    parser.add_argument("--top", type=int, default=12,
                        help="products listed per config (default 12)")
    parser.add_argument("--quick", action="store_true",
                        help="one round of the tiny config (or --configs, at their quick sizes)")
    args = parser.parse_args(argv)
    names = chosen_configs(parser, args.configs, ["tiny"] if args.quick else DEFAULT_CONFIGS)
    check_lowest(parser, (("--rounds", args.rounds, 1), ("--threads", args.threads, 1),
                          ("--top", args.top, 1)))
    args.names, args.rounds = names, 1 if args.quick else args.rounds
    # what vs_pytorch.Worker reads: CPU, tuned allocator, its pause between turns
    args.device, args.allocator, args.workers, args.pause, args.untuned = (
        "cpu", "tuned", None, 0.3, False)
    return args


def main(argv=None):
    args = parse_args(argv)
    os.environ.update(thread_env(args.threads))
    from benchmark_worker import minitrans_threads
    from machine_info import machine

    results = {}
    for name in available_configs(args.names):
        print(f"measuring {name} {config_sizes(name, args.quick)} ...", file=sys.stderr,
              flush=True)
        results[name] = measure(name, args)
    if not results:
        print("no config could run", file=sys.stderr)
        return 1
    print(report(machine(args, minitrans_threads), results, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())

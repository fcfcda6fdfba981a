"""minitrans against PyTorch on the same model, in the same run.

    python benchmarks/vs_pytorch.py                     # four configs and decoding, about 3 minutes on 2 cores
    python benchmarks/vs_pytorch.py --configs tiny,copy --rounds 3
    python benchmarks/vs_pytorch.py --device gpu        # CuPy against PyTorch CUDA
    python benchmarks/vs_pytorch.py --workers 1         # minitrans without splitting its batches
    python benchmarks/vs_pytorch.py --quick             # a smoke run: checks the script, not the speed

Each implementation runs in a worker process of its own (so that each has
its own peak memory), with the same number of threads: PyTorch's own
threads, and minitrans's training step as its Trainer runs it, the batch
split over that many worker threads (minitrans.training.parallel). The parent asks them
for steps in turn, A B A B ..., so that a slow minute of the machine hits
both alike, and reports the median step time of each and their ratio. See
benchmarks/README.md for what every column means.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

CONFIGS = {  # name: model sizes, sequence length (source and target), batch
    "tiny": dict(d_model=64, h=4, N=2, d_ff=256, vocab_size=16, length=16, batch=64),
    "small": dict(d_model=128, h=4, N=2, d_ff=512, vocab_size=1000, length=32, batch=64),
    "base": dict(d_model=256, h=8, N=3, d_ff=1024, vocab_size=8000, length=64, batch=32),
    "copy": dict(d_model=512, h=8, N=2, d_ff=2048, vocab_size=11, length=10, batch=80),
}
STEPS_PER_TURN = {"tiny": 8, "small": 4, "base": 2, "copy": 2}
WARMUP_STEPS = 3
PROFILE_STEPS = 4  # of the pass that times the matrix products: more steps, a steadier share
# OpenBLAS's threads keep running for about 0.1 s after a matrix product,
# waiting for the next one, and take CPU from whatever runs then: PyTorch's
# turn, if it came straight after minitrans's. The parent waits this long
# before every turn (benchmarks/README.md, "How it measures").
PAUSE_SECONDS = 0.3
# glibc returns large blocks (over 128 KB) to the system on free() and maps
# them again on the next malloc(): every step of PyTorch's eager mode then
# page-faults its large tensors (the 65 MB logits of base among them) back
# in. These tunables keep freed memory in the process, as minitrans's reused
# buffers do; PyTorch's CPU performance guide recommends the same (or
# jemalloc, tcmalloc). Both workers get them (--allocator default: neither).
TUNED_MALLOC = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736"
SPECIALS = 4  # ids 0..3 are <pad>, <bos>, <eos>, <unk>; the batches use the others


def matmul_peak_flops(device, size=2048, repeats=5):
    """The best FLOP/s of a large float32 matrix product: the machine's
    practical ceiling, measured now, with the threads of this run."""
    if device == "gpu":
        import cupy as xp
    else:
        xp = np
    a = xp.ones((size, size), dtype=np.float32)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ a
        if device == "gpu":
            xp.cuda.Device().synchronize()
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


# ------------------------------------------------------------ the parent


class Worker:
    """A child process that runs one implementation; one JSON line per request."""

    def __init__(self, kind, config, args):
        self.pause = args.pause
        env = {**os.environ, **thread_env(args.threads), **allocator_env(args.allocator)}
        command = [sys.executable, os.path.abspath(__file__), "--worker", kind, "--config", config,
                   "--threads", str(args.threads), "--device", args.device]
        if args.workers is not None:
            command += ["--workers", str(args.workers)]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True, env=env)
        self.ask({"do": "ready"})

    def ask(self, request):
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"a benchmark worker died (exit status {self.process.wait()})")
        return json.loads(line)

    def turn(self, request):
        """``ask``, after the pause that lets the other worker's BLAS
        threads go to sleep (see PAUSE_SECONDS): for every timed request."""
        time.sleep(self.pause)
        return self.ask(request)

    def close(self):
        self.process.stdin.close()
        self.process.wait()


def thread_env(threads):
    names = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    return {name: str(threads) for name in names}


def allocator_env(allocator):
    """The environment of a worker for ``--allocator``: tuned or default."""
    return {"GLIBC_TUNABLES": TUNED_MALLOC} if allocator == "tuned" else {}


def compare_training(name, args):
    """Median step times, memory and the matmul share for one config."""
    ours, theirs = Worker("minitrans", name, args), Worker("torch", name, args)
    times = {"minitrans": [], "torch": []}
    for worker in (ours, theirs):
        worker.ask({"do": "train", "steps": WARMUP_STEPS})
    for _ in range(args.rounds):
        for label, worker in (("minitrans", ours), ("torch", theirs)):
            times[label] += worker.turn({"do": "train", "steps": STEPS_PER_TURN[name]})["times"]
    profile = ours.ask({"do": "profile", "steps": PROFILE_STEPS})
    products_alone = None
    if profile.get("products"):
        products_alone = time_products_alone(profile["products"], ours, theirs)
    memory = {
        label: worker.ask({"do": "memory"})
        for label, worker in (("minitrans", ours), ("torch", theirs))
    }
    ours.close()
    theirs.close()
    return {"times": times, "profile": profile, "products_alone": products_alone, "memory": memory}


def time_products_alone(products, ours, theirs, rounds=3):
    """Seconds per step of minitrans's matrix products, each timed alone by
    each library: the best of ``rounds`` turns of the whole list per
    product (A B A B ...), times how often a step computes it."""
    best = {"minitrans": [float("inf")] * len(products), "torch": [float("inf")] * len(products)}
    for _ in range(rounds):
        for label, worker in (("minitrans", ours), ("torch", theirs)):
            seconds = worker.turn({"do": "products", "products": products})["seconds"]
            best[label] = [min(old, new) for old, new in zip(best[label], seconds)]
    counts = [product[-1] for product in products]
    return {
        label: sum(count * seconds for count, seconds in zip(counts, times))
        for label, times in best.items()
    }


def compare_decoding(args):
    ours, theirs = Worker("minitrans", "small", args), Worker("torch", "small", args)
    result = {}
    for _ in range(max(1, args.rounds // 2)):
        for label, worker, request in (("cached", ours, {"do": "decode", "cache": True}),
                                       ("recomputed", ours, {"do": "decode", "cache": False}),
                                       ("beam4", ours, {"do": "beam"}),
                                       ("torch", theirs, {"do": "decode", "cache": False})):
            answer = worker.turn(request)
            result.setdefault(label, []).append(answer["seconds"])
            result.setdefault(f"{label}_tokens", answer.get("tokens"))
    ours.close()
    theirs.close()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--configs", default=",".join(CONFIGS), help="comma-separated: " + ", ".join(CONFIGS)
    )
    parser.add_argument(
        "--rounds", type=int, default=5, help="turns of each implementation per config (default 5)"
    )
    parser.add_argument(
        "--threads", type=int, default=2, help="threads for both libraries (default 2)"
    )
    parser.add_argument("--workers", type=int, default=None,
                        help="minitrans's worker threads (default: --threads on cpu, 1 on gpu), "
                             "each with --threads / --workers BLAS threads")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--pause", type=float, default=PAUSE_SECONDS,
                        help=f"seconds to wait before each turn (default {PAUSE_SECONDS})")
    parser.add_argument("--allocator", choices=["tuned", "default"], default="tuned",
                        help="glibc malloc of both workers: tuned, so that freed memory is not "
                             "unmapped and page-faulted in again every step (default), or default")
    parser.add_argument("--no-decoding", action="store_true", help="skip the decoding comparison")
    parser.add_argument(
        "--quick", action="store_true", help="one round, the tiny config: a smoke run"
    )
    parser.add_argument("--json", help="also write the raw measurements here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        from benchmark_worker import serve  # noqa: E402  (imports the libraries)

        return serve(args.worker, CONFIGS[args.config], args.device, args.threads, args.workers)
    names = ["tiny"] if args.quick else args.configs.split(",")
    unknown = [name for name in names if name not in CONFIGS]
    if unknown:
        parser.error(f"--configs: unknown {unknown}, expected some of {list(CONFIGS)}")
    checked = (
        ("--rounds", args.rounds, 1),
        ("--threads", args.threads, 1),
        ("--pause", args.pause, 0),
        ("--workers", args.workers, 1),
    )
    for option, value, lowest in checked:
        if value is not None and not value >= lowest:
            parser.error(f"{option}: expected a number >= {lowest}, got {value}")
    if args.device == "gpu" and args.workers not in (None, 1):
        parser.error(f"--workers: expected 1 with --device gpu, got {args.workers}")
    if args.quick:
        args.rounds = 1
    os.environ.update(thread_env(args.threads))
    peak = matmul_peak_flops(args.device)
    results = {"peak_flops": peak, "configs": {}, "machine": machine(args)}
    for name in names:
        print(f"measuring {name} ...", file=sys.stderr, flush=True)
        results["configs"][name] = compare_training(name, args)
    if not args.no_decoding and not args.quick:
        print("measuring decoding ...", file=sys.stderr, flush=True)
        results["decoding"] = compare_decoding(args)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1)
    from benchmark_report import report  # noqa: E402

    print(report(results))


def machine(args):
    import torch
    from benchmark_worker import minitrans_threads

    workers, blas_threads = minitrans_threads(args.device, args.threads, args.workers)
    return {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": torch.__version__,
        "threads": args.threads,
        "device": args.device,
        "date": time.strftime("%Y-%m-%d"),
        "workers": workers,
        "blas_threads": blas_threads,
    }


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())

"""minitrans against PyTorch on the same model, in the same run.

    python benchmarks/vs_pytorch.py                 # every config, decoding (6 min without llama)
    python benchmarks/vs_pytorch.py --configs tiny,copy --rounds 3
    python benchmarks/vs_pytorch.py --configs llama --no-untuned --no-decoding  # vs transformers
    python benchmarks/vs_pytorch.py --compile       # and torch.compile (about 30 s per config)
    python benchmarks/vs_pytorch.py --allocator jemalloc   # where installed; or tcmalloc
    python benchmarks/vs_pytorch.py --no-untuned    # without the glibc-default column
    python benchmarks/vs_pytorch.py --device gpu    # CuPy against PyTorch CUDA, eager
    python benchmarks/vs_pytorch.py --workers 1     # minitrans without splitting its batches
    python benchmarks/vs_pytorch.py --only-decoding # the decoding comparison alone
    python benchmarks/vs_pytorch.py --quick         # a smoke run: checks the script, not the speed
    python benchmarks/vs_pytorch.py --quick --configs tiny   # the smoke run of the configs named

How it measures:

* **The same model.** The encoder-decoder configs (tiny, small, base, copy;
  ``harness.configs``) time minitrans's Transformer against its mirror in
  torch.nn.Transformer (``minitrans.interop.torch.to_torch``: the same
  weights, embeddings, positions, dropout places and label-smoothed loss,
  whose parity tests/library/test_torch_parity.py proves in float64); the
  llama config times minitrans's DecoderOnlyLM with Llama's options against
  transformers' LlamaForCausalLM, eager, with the same sizes and weights
  (``harness.llama_runner``). Without transformers the llama config is
  skipped, and the report says why. Both run in float32.
* **A step** is forward, loss, backward and Adam (beta 0.9, 0.98, eps 1e-9),
  ending when the loss is back on the host, on random batches without
  padding. minitrans's step is its Trainer's: the batch split over as many
  workers as the run has threads (processes on Linux), one BLAS thread each
  (minitrans.training.optimisation.parallel; ``--workers 1``: the whole batch on one).
* **Separate processes, in turns.** Each library runs in a worker process
  of its own (its own peak memory and allocator) with the same thread
  count. After three warm-up steps the parent asks each in turn for a few
  steps, A B C D ..., ``--rounds`` times, so that a slow minute of the
  machine falls on all, and reports the median step of each and their
  ratio, and the middle half of the rounds' own ratios: a target near that
  range is not settled by one run. Before every turn it waits ``--pause``
  seconds, since OpenBLAS's threads spin for about 0.1 s after a product and
  take the cores from whatever runs next.
* **An allocator that keeps freed memory** (``harness.allocators``): glibc's
  malloc as it comes unmaps every large block when it is freed, and
  PyTorch's eager step then page-faults its large tensors in again every
  step; PyTorch's CPU guide recommends an allocator that keeps them, and
  both workers get the same one. The untuned pair (``--no-untuned`` skips
  it) is both libraries as they come: glibc's malloc, and PyTorch's default
  Adam where the tuned PyTorch runs its fused one (``harness.torch_runner``).
* **torch.compile** (``--compile``) is a fifth worker, timed in the same
  rounds; its first step, which compiles, is its compile time, and a
  compilation that fails is a cell that says why.
* **Decoding**: greedy decoding of 32 sequences of 64 tokens with the small
  config, with the key/value cache and recomputing the prefix (the same
  tokens, checked), beam search of width 4, and nn.Transformer recomputing
  the prefix (it has no cache).

With ``--device gpu`` both run on the GPU, float32 without TF32, every timed
step ending with a synchronisation of the device; the CPU's tuning is left
out there (the allocator setting and its untuned pair: CuPy and PyTorch pool
the device's memory whatever malloc does; the pause; the matrix-product
profile), and memory is the peak that each library's device allocator held.
The report (``harness.report``, whose docstring says what each column
means) goes to standard output and into the run's results file,
benchmarks/results/vs_pytorch/ (``--results``); ``--json`` keeps every
measurement.
"""

import argparse
import json
import os
import subprocess
import sys
import time

from harness import results
from harness.allocators import ALLOCATORS, allocator_env, worker_env
from harness.configs import (ALL_CONFIGS, LLAMA_CONFIGS, PAUSE_SECONDS, PROFILE_STEPS,
                             STEPS_PER_TURN, WARMUP_STEPS, available_configs, config_sizes,
                             thread_env)
from harness.report import report

# The workers of one config, in the order of their turns: (label, library,
# allocator, PyTorch's fused Adam), where None stands for --allocator. The
# untuned pair runs unless --no-untuned or --allocator default: PyTorch as
# it comes, its default malloc and Adam. torch.compile's only with --compile.
TUNED = (("minitrans", "minitrans", None, True), ("torch", "torch", None, True))
UNTUNED = (("minitrans default", "minitrans", "default", False),
           ("torch default", "torch", "default", False))
COMPILED = (("torch.compile", "torch.compile", None, True),)


# ------------------------------------------------------------ the parent


class Worker:
    """A child process that runs one implementation (minitrans, torch or
    torch.compile) with one allocator; one JSON line per request."""

    def __init__(self, kind, config, args, allocator=None, fused_adam=True):
        self.pause, self.kind = args.pause, kind
        env = {**worker_env(allocator or args.allocator), **thread_env(args.threads),
               "CUPY_TF32": "0"}  # CuPy's float32 products in full precision, as PyTorch's
        command = [sys.executable, os.path.abspath(__file__), "--worker", kind,
                   "--config", config, "--threads", str(args.threads), "--device", args.device]
        if args.quick:
            command += ["--quick"]  # the config's quick sizes
        if args.workers is not None:
            command += ["--workers", str(args.workers)]
        if not fused_adam:
            command += ["--unfused-adam"]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True, env=env)
        ready = self.ask({"do": "ready"})
        self.allocator, self.adam = ready["allocator"], ready["adam"]  # as the worker sees them

    def ask(self, request, errors=False):
        """The worker's answer to ``request``; its error raises RuntimeError
        unless ``errors``, where the answer {"error": ...} is returned."""
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"a benchmark worker ({self.kind}) died "
                               f"(exit status {self.process.wait()})")
        answer = json.loads(line)
        if "error" in answer and not errors:
            raise RuntimeError(f"a benchmark worker ({self.kind}) failed: {answer['error']}")
        return answer

    def turn(self, request):
        """``ask``, after the pause that lets the other worker's BLAS
        threads go to sleep (see PAUSE_SECONDS): for every timed request."""
        time.sleep(self.pause)
        return self.ask(request)

    def close(self):
        self.process.stdin.close()
        self.process.wait()


def start_workers(name, args):
    """{label: Worker} for one config, in the order of their turns."""
    plan = TUNED + (UNTUNED if args.untuned else ()) + (COMPILED if args.compile else ())
    return {label: Worker(kind, name, args, allocator, fused)
            for label, kind, allocator, fused in plan}


def warm_up(workers, result):
    """WARMUP_STEPS steps of each worker. torch.compile compiles in its
    first step, which is its compile time; if that fails, its worker is
    closed and the result says why ("compile": {"error": one line})."""
    for label, worker in list(workers.items()):
        try:
            answer = worker.ask({"do": "train", "steps": WARMUP_STEPS}, errors=True)
        except RuntimeError as died:
            if label != "torch.compile":
                raise
            answer = {"error": str(died)}
        if label == "torch.compile":
            result["compile"] = (
                {"error": answer["error"]} if "error" in answer
                else {"seconds": answer["times"][0]}  # compiling, then one step
            )
        if "error" in answer:
            if label != "torch.compile":
                raise RuntimeError(f"a benchmark worker ({label}) failed: {answer['error']}")
            worker.close()
            del workers[label]


def compare_training(name, args):
    """Median step times, page faults, system time, memory and the matmul
    share for one config."""
    workers = start_workers(name, args)
    result = {"allocators": {label: worker.allocator for label, worker in workers.items()},
              "adam": {label: worker.adam for label, worker in workers.items()},
              "steps_per_turn": STEPS_PER_TURN[name],
              "sizes": config_sizes(name, args.quick)}
    warm_up(workers, result)
    result["times"] = {label: [] for label in workers}
    result["rusage"] = {label: {"faults": 0, "system_seconds": 0.0, "steps": 0}
                        for label in workers}
    for _ in range(args.rounds):
        for label, worker in workers.items():
            answer = worker.turn({"do": "train", "steps": STEPS_PER_TURN[name]})
            result["times"][label] += answer["times"]
            usage = result["rusage"][label]
            usage["faults"] += answer["faults"]
            usage["system_seconds"] += answer["system_seconds"]
            usage["steps"] += len(answer["times"])
    ours, theirs = workers["minitrans"], workers["torch"]
    result["profile"] = profile = ours.ask({"do": "profile", "steps": PROFILE_STEPS})
    result["products_alone"] = None
    if profile.get("products"):
        # as minitrans's step runs them: its workers at once, each with its BLAS threads
        threads = {"threads": profile["workers"], "blas_threads": profile["blas_threads"]}
        result["products_alone"] = time_products_alone(profile["products"], ours, theirs, threads)
    result["memory"] = {label: worker.ask({"do": "memory"}) for label, worker in workers.items()}
    for worker in workers.values():
        worker.close()
    return result


def time_products_alone(products, ours, theirs, threads, rounds=3):
    """Seconds per step of one minitrans worker's matrix products, each
    timed alone by each library, on ``threads["threads"]`` threads at once
    with ``threads["blas_threads"]`` BLAS threads each, as the workers run
    them: the best of ``rounds`` turns of the whole list per product (A B
    A B ...), times how often a step computes it."""
    best = {"minitrans": [float("inf")] * len(products), "torch": [float("inf")] * len(products)}
    request = {"do": "products", "products": products, **threads}
    for _ in range(rounds):
        for label, worker in (("minitrans", ours), ("torch", theirs)):
            seconds = worker.turn(request)["seconds"]
            best[label] = [min(old, new) for old, new in zip(best[label], seconds)]
    counts = [product[-1] for product in products]
    return {
        label: sum(count * seconds for count, seconds in zip(counts, times))
        for label, times in best.items()
    }


def compare_decoding(args):
    ours, theirs = Worker("minitrans", "small", args), Worker("torch", "small", args)
    result = {}
    # The best of two turns at least: the first pays what runs once (on a
    # GPU, CuPy compiling kernels for these sizes: seconds on an H200).
    for _ in range(max(2, args.rounds // 2)):
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


def set_device_defaults(args):
    """The defaults that depend on --device: on a GPU no pause between turns
    and glibc's malloc as it comes (so no untuned pair), see the docstring."""
    gpu = args.device == "gpu"
    if args.pause is None:
        args.pause = 0.0 if gpu else PAUSE_SECONDS
    if args.allocator is None:
        args.allocator = "default" if gpu else "tuned"


def save_json(measured, path):
    """The raw measurements so far, where --json asks for them."""
    if path:
        with open(path, "w") as handle:
            json.dump(measured, handle, indent=1)


def measure(names, args):
    """Every config of ``names`` (and decoding), the raw measurements."""
    # NumPy loads here, after main() set the thread variables
    from harness.machine import machine, matmul_peak_flops
    from harness.workload import minitrans_threads

    measured = {"peak_flops": matmul_peak_flops(args.device), "configs": {},
                "machine": machine(args, minitrans_threads)}
    skipped = {}
    names = [] if args.only_decoding else available_configs(names, skipped)
    if skipped:
        measured["skipped"] = skipped  # beside "configs", not in it
    if any(name in LLAMA_CONFIGS for name in names):
        from importlib.metadata import version

        measured["machine"]["transformers"] = version("transformers")
    for name in names:
        print(f"measuring {name} ...", file=sys.stderr, flush=True)
        measured["configs"][name] = compare_training(name, args)
        save_json(measured, args.json)  # after each config: a run stopped later keeps it
    if not args.no_decoding and not args.quick:
        print("measuring decoding ...", file=sys.stderr, flush=True)
        measured["decoding"] = compare_decoding(args)
        save_json(measured, args.json)
    return measured


def machine_line(measured):
    """The results file's "Machine:" line: the report's first line names the
    machine, its libraries and the run's settings."""
    from harness.machine import summary

    return summary(with_torch=True) + (f"; {measured['machine']['gpu']}"
                                       if measured["machine"].get("gpu") else "")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--configs", default=None,
        help="comma-separated: " + ", ".join(ALL_CONFIGS) + " (default: all; with --quick "
             "tiny,llama)"
    )
    parser.add_argument(
        "--rounds", type=int, default=5, help="turns of each implementation per config (default 5)"
    )
    parser.add_argument(
        "--threads", type=int, default=2, help="threads for both libraries (default 2)"
    )
    parser.add_argument("--workers", type=int, default=None,
                        help="minitrans's workers (default: --threads on cpu, 1 on gpu), "
                             "each with --threads / --workers BLAS threads")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--pause", type=float, default=None,
                        help=f"seconds to wait before each turn (default {PAUSE_SECONDS} on cpu, "
                             "0 on gpu)")
    parser.add_argument("--allocator", choices=ALLOCATORS, default=None,
                        help="the allocator of both libraries: tuned glibc malloc, so that freed "
                             "memory is not unmapped and page-faulted in again every step "
                             "(default on cpu), jemalloc or tcmalloc (where installed), or "
                             "default (default on gpu)")
    parser.add_argument("--no-untuned", dest="untuned", action="store_false",
                        help="skip the second pair of workers with glibc's default malloc")
    parser.add_argument("--compile", action="store_true",
                        help="also time PyTorch with torch.compile of the model "
                             "(about 30 s per config to compile)")
    parser.add_argument("--no-decoding", action="store_true", help="skip the decoding comparison")
    parser.add_argument("--only-decoding", action="store_true",
                        help="the decoding comparison alone, no training step (not with --quick)")
    parser.add_argument(
        "--quick", action="store_true",
        help="one round, the tiny config and a small llama (where transformers is installed), "
             "or the --configs given (llama at its quick sizes): a smoke run"
    )
    parser.add_argument("--json", help="also write the raw measurements here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--unfused-adam", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    results.add_option(parser, "vs_pytorch")
    args = parser.parse_args(argv)
    set_device_defaults(args)
    if args.worker:
        from harness.worker import serve  # imports the libraries


        return serve(args.worker, config_sizes(args.config, args.quick), args.device,
                     args.threads, args.workers, fused_adam=not args.unfused_adam)
    default = ["tiny", *LLAMA_CONFIGS] if args.quick else list(ALL_CONFIGS)
    names = args.configs.split(",") if args.configs else default
    unknown = [name for name in names if name not in ALL_CONFIGS]
    if unknown:
        parser.error(f"--configs: unknown {unknown}, expected some of {list(ALL_CONFIGS)}")
    checked = (("--rounds", args.rounds, 1), ("--threads", args.threads, 1),
               ("--pause", args.pause, 0), ("--workers", args.workers, 1))
    for option, value, lowest in checked:
        if value is not None and not value >= lowest:
            parser.error(f"{option}: expected a number >= {lowest}, got {value}")
    if args.only_decoding and (args.no_decoding or args.quick):
        parser.error("--only-decoding: expected without --no-decoding and --quick")
    if args.device == "gpu" and args.workers not in (None, 1):
        parser.error(f"--workers: expected 1 with --device gpu, got {args.workers}")
    try:
        allocator_env(args.allocator)
    except ValueError as error:
        parser.error(f"--{error}")
    args.untuned = args.untuned and args.allocator != "default"
    if args.quick:
        args.rounds = 1
    os.environ.update(thread_env(args.threads))
    measured = measure(names, args)
    text = report(measured)
    print(text)
    results.save(args.results, "vs_pytorch", "minitrans against PyTorch", text + "\n",
                 machine_line(measured), smoke=args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())

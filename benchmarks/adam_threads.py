"""Adam's step on one thread, on two, and on flat arrays, for every config's model.

    python benchmarks/adam_threads.py
    python benchmarks/adam_threads.py --configs tiny,base --rounds 5

The optimiser updates its parameters on several threads only from
``Optimizer.THREADED_NUMBERS`` numbers on (minitrans/training/optim.py):
below that, handing work to a second thread costs more than it saves. This
script is the measurement behind that number: each config's model
(vs_pytorch.py's sizes, float32, every gradient 1e-3), Adam's step timed
with ``threads=1`` and ``threads=2``, forcing the threads even below the
threshold, best of ``--rounds`` rounds of several steps, one BLAS thread.
It also times the flat update (``minitrans/training/flat_state.py``: all
gradients, m and v as views of three flat arrays, on one thread), the
measurement behind ``Adam.FLAT_NUMBERS``, up to which Adam takes it.

Where PyTorch is installed it times PyTorch's Adam on the same shapes too,
on two threads, as vs_pytorch.py runs it: its default implementation on
the CPU (a for-loop over the parameters) and the fused one that
vs_pytorch.py gives it, with minitrans's choice over the fused one.
"""

import argparse
import datetime
import importlib.util
import os
import platform
import time

import numpy as np
from threadpoolctl import threadpool_limits

from benchmark_worker import ADAM_SETTINGS, model_config
from llama_runner import llama_model_config
from machine_info import cpu_model
from vs_pytorch import ALL_CONFIGS, LLAMA_CONFIGS

STEPS = {"tiny": 20, "small": 20}  # steps per round; 5 for the larger models


def build_model(name):
    from minitrans.model.language_model import DecoderOnlyLM
    from minitrans.model.transformer import Transformer

    sizes = ALL_CONFIGS[name]
    if name in LLAMA_CONFIGS:
        return DecoderOnlyLM(llama_model_config(sizes), rng=0)
    return Transformer(model_config(sizes, sizes["length"] + 1), rng=0)


def adam_milliseconds(model, threads, steps, rounds, flat=False):
    """Best of ``rounds`` rounds: milliseconds per step of Adam on ``threads``
    (parameter by parameter), or with ``flat`` on flat arrays."""
    from minitrans.training.optim import Adam

    optimizer = Adam(model, **ADAM_SETTINGS, threads=threads)
    optimizer.THREADED_NUMBERS = 0  # on ``threads`` threads whatever the size
    optimizer.FLAT_NUMBERS = float("inf") if flat else -1
    return best_milliseconds(optimizer.step, steps, rounds)


def best_milliseconds(step, steps, rounds):
    """Milliseconds per call of ``step``: after 3 calls to warm up, the best
    of ``rounds`` rounds of ``steps`` calls."""
    for _ in range(3):
        step()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        best = min(best, (time.perf_counter() - start) / steps * 1e3)
    return best


def torch_adam_milliseconds(model, fused, steps, rounds, threads=2):
    """Best of ``rounds`` rounds: milliseconds per step of PyTorch's Adam over
    tensors of the model's shapes (every gradient 1e-3), on ``threads``
    threads, made as vs_pytorch.py makes it (``torch_runner.torch_adam``);
    ``fused``: its fused implementation, else its default. Returns
    (milliseconds, the implementation's words, as the report gives them)."""
    import torch
    from torch_runner import torch_adam

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        params = [torch.nn.Parameter(torch.from_numpy(np.array(param)))
                  for _, param, _ in model.named_parameters()]
        for param in params:
            param.grad = torch.full_like(param, 1e-3)
        optimizer, words = torch_adam(torch, params, fused)
        return best_milliseconds(optimizer.step, steps, rounds), words
    finally:
        torch.set_num_threads(before)


def main(argv=None):
    import minitrans
    from minitrans.training.optim import Adam, Optimizer

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default=",".join(ALL_CONFIGS),
                        help=f"comma-separated, of {', '.join(ALL_CONFIGS)} (default: all)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per setting (default 3)")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.configs.split(",") if name.strip()]
    unknown = [name for name in names if name not in ALL_CONFIGS]
    if unknown:
        parser.error(f"--configs: expected names of {', '.join(ALL_CONFIGS)}, got {unknown}")
    if args.rounds < 1:
        parser.error(f"--rounds: expected a positive number, got {args.rounds}")
    minitrans.use("numpy", dtype="float32")
    print(f"{datetime.date.today()}, {cpu_model()} with {os.cpu_count()} cores; NumPy "
          f"{np.__version__}; Python {platform.python_version()}; one BLAS thread; "
          f"THREADED_NUMBERS = {Optimizer.THREADED_NUMBERS:,}, FLAT_NUMBERS = "
          f"{Adam.FLAT_NUMBERS:,}.\n")
    with_torch = importlib.util.find_spec("torch") is not None
    columns = ["config", "parameters", "1 thread", "2 threads", "2 / 1", "flat, 1 thread",
               "flat / 1", "the optimiser uses"]
    if with_torch:
        columns += ["PyTorch, default", "PyTorch, fused", "minitrans / fused"]
    print("| " + " | ".join(columns) + " |")
    print("| " + " | ".join(["---"] * len(columns)) + " |")
    with threadpool_limits(1, user_api="blas"):
        for name in names:
            model = build_model(name)
            for _, _, grad in model.named_parameters():
                grad[...] = 1e-3
            steps = STEPS.get(name, 5)
            one, two = (adam_milliseconds(model, threads, steps, args.rounds)
                        for threads in (1, 2))
            flat = adam_milliseconds(model, 1, steps, args.rounds, flat=True)
            count = model.num_parameters()
            chosen = ("flat" if count <= Adam.FLAT_NUMBERS else
                      "2 threads" if count >= Optimizer.THREADED_NUMBERS else "1 thread")
            cells = [name, f"{count:,}", f"{one:.2f} ms", f"{two:.2f} ms", f"{two / one:.2f}",
                     f"{flat:.2f} ms", f"{flat / one:.2f}", chosen]
            if with_torch:
                ours = {"flat": flat, "2 threads": two, "1 thread": one}[chosen]
                (default, _), (fused, words) = (
                    torch_adam_milliseconds(model, fused, steps, args.rounds)
                    for fused in (False, True))
                # a PyTorch without the fused kernel fell back to its default: said so
                said = "" if words == "fused" else f" ({words})"
                cells += [f"{default:.2f} ms", f"{fused:.2f} ms{said}", f"{ours / fused:.2f}"]
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

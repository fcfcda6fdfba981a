"""Where a training step's time goes, config by config.

    python benchmarks/dev/step_breakdown.py                  # every config of vs_pytorch.py
    python benchmarks/dev/step_breakdown.py --configs tiny,llama --steps 6

Each config's minitrans step runs as vs_pytorch.py runs it (the same
runner: DataParallel's workers, each with its share of BLAS threads, Adam;
the workers on threads, whose kernels the timers of this process see,
where training on Linux runs them in processes of their own;
the script starts itself again with the tuned malloc and the thread
variables of vs_pytorch's workers), first
plainly, to time the step, then with every array of the model viewed as a
``KernelTimedArray`` (kernel_timer.py), to split it:

* **matrix products**, and their **GEMM bound**: the same products timed
  alone, one at a time on one worker's BLAS threads, best of 3; the step
  cannot be faster than its products. Two bounds: each product alone
  with the other cores idle, and the workers' products at once, each
  worker's on its own thread (``matmul_timer.time_on_threads``), as the
  step computes them: two products on two cores at once run slower than
  one alone, so the second is the bound the step can reach. The plain step
  and the bounds are timed in turn, ``--rounds`` times (a slow minute of a
  shared machine falls on all), and the report gives the median of the
  rounds' own step / bound and their range;
* **element-wise kernels** (ufuncs, reductions, scatters) and their memory
  traffic (bytes read and written), against the machine's streaming
  bandwidth measured in the same run;
* **NumPy functions** (``where``, ``concatenate``, ...);
* **Python**: the rest, spread over the layer calls of a step (forward and
  backward of every Module), so also given per call;
* **the workers' wait**: how long a worker idles at the end of the batch
  for the other;
* **Adam**, the optimiser's step on its own.

The kernels' times come from the timed steps, each kernel on its own
thread's CPU clock, so that the interception's own cost (a Python call per
kernel) is not counted in them; Python is what the plain step has left
once they, Adam and the wait are taken out (shown as 0 where the timed
steps' kernels ran slower than the plain step's and nothing is left). On
a shared machine two runs can differ by a fifth: compare configs within a
run, and changes with ``ab_steps.py`` or vs_pytorch.py's interleaved turns.
"""

import argparse
import datetime
import os
import platform
import statistics
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

BENCHMARKS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, BENCHMARKS)  # the suite's harness, beside this folder

from kernel_timer import KernelTimedArray, enter_layer, kernel_totals, leave_layer  # noqa: E402

from harness.allocators import allocator_in_use, worker_env  # noqa: E402
from harness.configs import ALL_CONFIGS, STEPS_PER_TURN, thread_env  # noqa: E402
from harness.machine import cpu_model, numpy_blas  # noqa: E402
from harness.matmul_timer import TimedArray, time_products  # noqa: E402
from harness.worker import make_runner  # noqa: E402

RESTARTED = "MINITRANS_BREAKDOWN_RESTARTED"  # set in the environment of the second start

KERNELS_SHOWN = int(os.environ.get("KERNELS_SHOWN", 6))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default=",".join(ALL_CONFIGS),
                        help=f"comma-separated, of {', '.join(ALL_CONFIGS)} (default: all)")
    parser.add_argument("--steps", type=int, default=None,
                        help="steps timed each way (default: vs_pytorch's steps per turn, x3)")
    parser.add_argument("--threads", type=int, default=2, help="threads in all (default 2)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="turns of the plain step and the GEMM bound (default 5)")
    args = parser.parse_args(argv)
    args.configs = [name.strip() for name in args.configs.split(",") if name.strip()]
    unknown = [name for name in args.configs if name not in ALL_CONFIGS]
    if unknown:
        parser.error(f"--configs: expected names of {', '.join(ALL_CONFIGS)}, got {unknown}")
    if args.steps is not None and args.steps < 1:
        parser.error(f"--steps: expected a positive number, got {args.steps}")
    if args.rounds < 1:
        parser.error(f"--rounds: expected a positive number, got {args.rounds}")
    return args


class WorkerClock:
    """Each worker's busy time in a step (its replica's forward to the end of
    its backward) and the span from the first start to the last end."""

    def __init__(self, parallel):
        self.starts, self.ends = {}, {}
        for index, replica in enumerate(parallel.replicas):
            replica.forward = self._stamped(replica.forward, self.starts, index)
            replica.backward = self._stamped(replica.backward, self.ends, index, after=True)

    @staticmethod
    def _stamped(method, stamps, index, after=False):
        def stamped(*args, **kwargs):
            if not after:
                stamps[index] = time.perf_counter()
            result = method(*args, **kwargs)
            if after:
                stamps[index] = time.perf_counter()
            return result
        return stamped

    def wait(self):
        """Seconds the workers idled, on average, while the slowest finished."""
        if len(self.ends) < 2:
            return 0.0
        span_end = max(self.ends.values())
        return statistics.mean(span_end - end for end in self.ends.values())


def count_layer_calls(parallel):
    """Wrap forward and backward of every module of every replica with a
    counter, which also tells the kernel timer whose kernels run; returns
    the counter (a one-item list)."""
    count = [0]

    def counted(method, label):
        def call(*args, **kwargs):
            count[0] += 1
            enter_layer(label)
            try:
                return method(*args, **kwargs)
            finally:
                leave_layer()
        return call

    for module in parallel.modules():
        kind = type(module).__name__
        module.forward = counted(module.forward, f"{kind}.forward")
        module.backward = counted(module.backward, f"{kind}.backward")
    return count


def timed(function, steps):
    """Median seconds of ``steps`` calls."""
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class PlainSteps:
    """The runner's step as it runs, its Adam and its workers' wait timed
    (the clocks are put in place once, for every round)."""

    def __init__(self, runner):
        self.runner, self.clock, self.adam = runner, WorkerClock(runner.parallel), []
        optimizer_step = runner.optimizer.step

        def timed_adam():
            start = time.perf_counter()
            optimizer_step()
            self.adam.append(time.perf_counter() - start)

        runner.optimizer.step = timed_adam

    def measure(self, steps):
        """The step, Adam's part and the workers' wait, median seconds of ``steps``."""
        self.adam.clear()
        waits = []

        def step():
            self.runner.step()
            waits.append(self.clock.wait())

        seconds = timed(step, steps)
        return seconds, statistics.median(self.adam), statistics.median(waits)


def timed_step(runner, steps):
    """Kernel totals per worker per step, and layer calls per worker per step."""
    runner.model.apply_to_arrays(lambda a: a.view(KernelTimedArray))
    optimizer = runner.optimizer
    optimizer.m = {k: v.view(KernelTimedArray) for k, v in optimizer.m.items()}
    optimizer.v = {k: v.view(KernelTimedArray) for k, v in optimizer.v.items()}
    calls = count_layer_calls(runner.parallel)
    optimizer_step = optimizer.step

    def adam_apart():
        KernelTimedArray.phase = "adam"
        try:
            optimizer_step()
        finally:
            KernelTimedArray.phase = "model"

    optimizer.step = adam_apart
    runner.step()  # the views' first step
    KernelTimedArray.reset()
    calls[0] = 0
    for _ in range(steps):
        runner.step()
    workers = runner.parallel.workers
    totals = kernel_totals(steps, workers)
    products = [[*key, count // (steps * workers)]
                for key, count in TimedArray.products.items()]
    return totals, calls[0] / (steps * workers), products


def gemm_bound(products, blas_threads, workers=1):
    """Seconds of one worker's products, each timed alone: on one thread
    with the other cores idle, or with ``workers`` above 1 on that many
    threads at once, each on operands of its own."""
    with threadpool_limits(blas_threads, user_api="blas"):
        best = time_products(products, np.matmul, lambda a: a, threads=workers)
    return sum(seconds * product[-1] for seconds, product in zip(best, products))


def streaming_bandwidth():
    """Bytes per second of a large copy (read and write), best of 5."""
    source = np.ones(64 * 2**20 // 4, dtype=np.float32)
    target = np.empty_like(source)
    seconds = min(timed(lambda: np.copyto(target, source), 1) for _ in range(5))
    return 2 * source.nbytes / seconds


def breakdown(name, args):
    sizes = ALL_CONFIGS[name]
    steps = args.steps or 3 * STEPS_PER_TURN[name]
    timed_runner = make_runner("minitrans", sizes, "cpu", args.threads)
    timed_runner.use_threads()  # its kernels timed in this process
    timed_runner.step()  # the optimiser's moments, before the views
    totals, layer_calls, products = timed_step(timed_runner, steps)
    runner = make_runner("minitrans", sizes, "cpu", args.threads)  # plain arrays
    runner.use_threads()  # the step the kernels split
    for _ in range(3):
        runner.step()
    workers, blas_threads = runner.parallel.workers, runner.parallel.blas_threads
    plain = PlainSteps(runner)
    rounds = [(*plain.measure(steps), gemm_bound(products, blas_threads),
               gemm_bound(products, blas_threads, workers))
              for _ in range(args.rounds)]
    step, adam, wait, bound, bound_at_once = (statistics.median(column)
                                              for column in zip(*rounds))
    ratios = [round_step / round_bound for round_step, _, _, round_bound, _ in rounds]
    ratios_at_once = [round_step / at_once for round_step, _, _, _, at_once in rounds]
    measured = totals["matmul"] + totals["elementwise"] + totals["functions"]
    # the timed step's kernels, in the plain step: the rest is Python
    worker_step = step - adam - wait
    python = max(0.0, worker_step - measured)
    return {"config": name, "step": step, "adam": adam, "wait": wait, "bound": bound,
            "bound_ratios": ratios, "bound_at_once": bound_at_once,
            "bound_at_once_ratios": ratios_at_once,
            "python": python, "layer_calls": layer_calls, "workers": workers,
            **totals}


def milliseconds(seconds):
    return f"{seconds * 1e3:.1f} ms"


def share(part, whole):
    return f"{milliseconds(part)} ({part / whole:.0%})"


def report(rows, bandwidth):
    lines = [
        "| config | step | GEMM bound, each product alone (step / bound: the rounds' "
        "median, range) | GEMM bound, the workers' products at once (step / bound) "
        "| matrix products | element-wise "
        "(GB/s) | NumPy functions | Python (per layer call) | workers' wait | Adam |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        step, speed = r["step"], r["elementwise_bytes"] / max(r["elementwise"], 1e-12) / 1e9
        per_call = r["python"] / max(r["layer_calls"], 1) * 1e6
        lines.append(
            f"| {r['config']} | {milliseconds(step)} | {milliseconds(r['bound'])} "
            f"({bound_ratios(r['bound_ratios'])}) | {milliseconds(r['bound_at_once'])} "
            f"({bound_ratios(r['bound_at_once_ratios'])}) | {share(r['matmul'], step)} | "
            f"{share(r['elementwise'], step)} ({speed:.0f}) | {share(r['functions'], step)} | "
            f"{share(r['python'], step)} ({per_call:.0f} us x {r['layer_calls']:.0f}) | "
            f"{share(r['wait'], step)} | {share(r['adam'], step)} |")
    lines += ["", f"Streaming bandwidth of this machine (a 64 MB copy): "
              f"{bandwidth / 1e9:.0f} GB/s read and written.", "",
              "| config | largest kernels, per worker per step: time (GB/s) |", "| --- | --- |"]
    for r in rows:
        shown = [f"{kernel} {seconds * 1e3:.1f} ms x {calls:.0f} "
                 f"({nbytes / max(seconds, 1e-12) / 1e9:.0f})"
                 for kernel, seconds, calls, nbytes in r["kernels"][:KERNELS_SHOWN]]
        lines.append(f"| {r['config']} | {', '.join(shown)} |")
    lines += ["", "| config | element-wise kernels and functions by the layer that ran them, "
              "per worker per step |", "| --- | --- |"]
    for r in rows:
        shown = [f"{layer} {seconds * 1e3:.1f} ms" for layer, seconds in r["by_layer"][:8]]
        lines.append(f"| {r['config']} | {', '.join(shown)} |")
    return "\n".join(lines)


def bound_ratios(ratios):
    """The rounds' step / bound: their median, and their range where there
    are several."""
    median = f"{statistics.median(ratios):.2f}"
    return median if len(ratios) < 2 else f"{median}, {min(ratios):.2f} to {max(ratios):.2f}"


def machine_line(threads):
    return (f"{datetime.date.today()}, {cpu_model()} with {os.cpu_count()} cores; NumPy "
            f"{np.__version__} BLAS: {numpy_blas()}; Python {platform.python_version()}; "
            f"{threads} threads; allocator: {allocator_in_use()}; float32.")


def restart_with_workers_environment(threads):
    """Start this script again with tuned malloc and the thread variables:
    both are read when the process starts, as in vs_pytorch's workers."""
    env = {**worker_env("tuned"), **thread_env(threads), RESTARTED: "1"}
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def main(argv=None):
    args = parse_args(argv)
    if argv is None and not os.environ.get(RESTARTED):
        restart_with_workers_environment(args.threads)
    print(machine_line(args.threads), "\n")
    bandwidth = streaming_bandwidth()
    rows = []
    for name in args.configs:
        print(f"measuring {name} ...", file=sys.stderr, flush=True)
        rows.append(breakdown(name, args))
    print(report(rows, bandwidth))


if __name__ == "__main__":
    main()

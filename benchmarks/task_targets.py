"""Train each built-in task with its default settings and check its target.

Run from the repository root, after `pip install ".[train,data]"`:

    python benchmarks/task_targets.py                          # all six tasks
    python benchmarks/task_targets.py --tasks copy,translate   # some of them
    python benchmarks/task_targets.py --output results.md      # also write the report to a file

The report (Markdown) goes to standard output; the progress bars (on a
terminal) and the trainer's evaluation lines go to standard error. See benchmarks/README.md.
"""

import argparse
import contextlib
import datetime
import os
import platform
import sys
import tempfile
import time

import numpy

from minitrans.training import evaluation, experiment

# The held-out exact match each task must reach, and how the table shows it.
TARGETS = {
    "copy": (1.00, "100%"),
    "reverse": (0.99, ">= 99%"),
    "translate": (0.95, ">= 95%"),
    "lm": (0.99, ">= 99%"),
    "numbers": (0.99, ">= 99%"),  # these two need pip install ".[data]"
    "dates": (0.99, ">= 99%"),
}
SEED = 0


def machine_description():
    """One line about where the numbers were measured: timings depend on it."""
    cpu = platform.processor() or platform.machine()
    try:  # Linux names the CPU model here; platform.processor() often does not
        with open("/proc/cpuinfo") as info:
            cpu = next(
                line.split(":", 1)[1].strip() for line in info if line.startswith("model name")
            )
    except (OSError, StopIteration):
        pass
    # NumPy's matrix products use a BLAS library, which may start its own
    # threads; these variables cap them ("unset" = the library's default).
    threads = ", ".join(f"{name}={os.environ.get(name, 'unset')}"
                        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"))
    return (
        f"{platform.platform()}, {cpu}, {os.cpu_count()} CPUs; Python {platform.python_version()}, "
        f"NumPy {numpy.__version__}; {threads}"
    )


def run_task(name, steps, folder):
    """Train one task from scratch; return a dict of what the table shows."""
    overrides = {"steps": steps} if steps else {}
    config = experiment.train_config_for(
        name, seed=SEED, out_dir=os.path.join(folder, name), **overrides
    )
    # a bar only on a terminal, as the train command draws it: in a log file
    # the trainer writes one line of loss, learning rate and tokens/s per evaluation
    trainer = experiment.new_trainer(config, progress=sys.stderr.isatty())
    start = time.perf_counter()
    # The trainer prints its evaluations on stdout through the progress bar;
    # send them to stderr so that stdout holds only the report.
    with contextlib.redirect_stdout(sys.stderr):
        trainer.fit()  # stops early once the task's default target is reached
    seconds = time.perf_counter() - start

    task, model = trainer.task, trainer.evaluated_model  # what its evaluations measured
    match, predictions = evaluation.exact_match(
        model, task, task.valid
    )  # greedy, every held-out pair
    bleu = None
    if name == "translate":
        references = [task.tokenizer.join(task.tokenizer.split(target)) for _, target in task.valid]
        bleu = evaluation.corpus_bleu(predictions, references)
    c = model.config
    target, shown = TARGETS[name]
    return {
        "task": name,
        "size": f"{model.num_parameters():,} ({c.d_model}/{c.h}/{c.N}/{c.d_ff})",
        "steps": f"{trainer.step} of {config.steps}",
        "seconds": f"{seconds:.0f}",
        "exact": f"{match:.1%} of {len(task.valid)}",
        "bleu": "-" if bleu is None else f"{bleu:.1f}",
        "target": f"{shown}: {'yes' if match >= target else 'NO'}",
    }


def markdown_table(rows):
    columns = [("task", "task"), ("size", "parameters (d_model/h/N/d_ff)"), ("steps", "steps"),
               ("seconds", "wall time (s)"), ("exact", "held-out exact match"), ("bleu", "BLEU"),
               ("target", "target met")]
    lines = ["| " + " | ".join(title for _, title in columns) + " |",
             "|" + "|".join(" --- " for _ in columns) + "|"]
    lines += ["| " + " | ".join(row[key] for key, _ in columns) + " |" for row in rows]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(
        description="Train the built-in tasks and check their targets."
    )
    parser.add_argument("--tasks", default=",".join(TARGETS),
                        help=f"comma-separated tasks (default {','.join(TARGETS)})")
    parser.add_argument("--steps", type=int,
                        help="steps for every task instead of its default (for a quick smoke run)")
    parser.add_argument("--output", help="also write the report to this Markdown file")
    args = parser.parse_args()
    names = [name.strip() for name in args.tasks.split(",") if name.strip()]
    unknown = [name for name in names if name not in TARGETS]
    if unknown or not names:
        parser.error(f"--tasks: expected names from {','.join(TARGETS)}, got {args.tasks!r}")

    # Checkpoints go to a temporary folder, deleted at the end.
    with tempfile.TemporaryDirectory() as folder:
        rows = [run_task(name, args.steps, folder) for name in names]

    report = "\n".join([
        f"Measured {datetime.date.today().isoformat()} on {machine_description()}.",
        "",
        markdown_table(rows),
        "",
    ])
    print(report)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as file:
            file.write(report)


if __name__ == "__main__":
    main()

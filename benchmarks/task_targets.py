"""Train each built-in task with its default settings and check its target.

Run from the repository root, after `pip install ".[train,data]"`:

    python benchmarks/task_targets.py                          # all six tasks
    python benchmarks/task_targets.py --tasks copy,translate   # some of them
    python benchmarks/task_targets.py --steps 20               # a smoke run: no targets judged

Each task is trained as `minitrans train TASK` trains it: the model sizes
and schedule of ``TASK_DEFAULTS`` (minitrans/training/experiment.py), seed
0, the NumPy backend, stopping at the task's own threshold of held-out exact
match or at its step limit. Checkpoints go to a temporary folder, deleted at
the end. The accuracy does not depend on the machine (the seed fixes the
data, the weights and the batches); the wall time does.

The table (Markdown) goes to standard output and into the run's results
file, benchmarks/results/task_targets/ (``--results``); the progress bars
(on a terminal) and the trainer's evaluation lines go to standard error.
"""

import argparse
import contextlib
import os
import sys
import tempfile
import time

from minitrans.training.optimisation import evaluation
from minitrans.training import experiment

from harness import machine, results

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
    """The report's table, a row per task."""
    columns = [("task", "task"), ("size", "parameters (d_model/h/N/d_ff)"), ("steps", "steps"),
               ("seconds", "wall time (s)"), ("exact", "held-out exact match"), ("bleu", "BLEU"),
               ("target", "target met")]
    lines = ["| " + " | ".join(title for _, title in columns) + " |",
             "|" + "|".join(" --- " for _ in columns) + "|"]
    lines += ["| " + " | ".join(row[key] for key, _ in columns) + " |" for row in rows]
    return "\n".join(lines)


COLUMNS_TEXT = """\
Columns: trainable parameters and the model's sizes in the paper's names;
steps trained of the task's maximum (fewer: its stopping threshold was
reached); seconds in `Trainer.fit()` (training steps, held-out evaluations
and checkpoints); the greedy exact match on the 1000 held-out pairs, never
trained on; corpus BLEU (translate only); the task's goal and whether it is
met."""


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Train the built-in tasks and check their targets."
    )
    parser.add_argument("--tasks", default=",".join(TARGETS),
                        help=f"comma-separated tasks (default {','.join(TARGETS)})")
    parser.add_argument("--steps", type=int,
                        help="steps for every task instead of its default (a smoke run)")
    results.add_option(parser, "task_targets")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.tasks.split(",") if name.strip()]
    unknown = [name for name in names if name not in TARGETS]
    if unknown or not names:
        parser.error(f"--tasks: expected names from {','.join(TARGETS)}, got {args.tasks!r}")
    if args.steps is not None and args.steps < 1:
        parser.error(f"--steps: expected a number >= 1, got {args.steps}")

    with tempfile.TemporaryDirectory() as folder:
        rows = [run_task(name, args.steps, folder) for name in names]
    table = markdown_table(rows)
    print(table)
    results.save(args.results, "task_targets", "Task targets: the built-in tasks trained "
                 "with their defaults", f"{table}\n\n{COLUMNS_TEXT}\n", machine.summary(),
                 smoke=args.steps is not None)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The 2017 block against today's, at the same parameter budget, on the toy
``lm`` task (a decoder-only model completes two-digit sums, "12+34=" -> "46").

Run from the repository root, after `pip install ".[train]"`:

    python benchmarks/modern_ablation.py                  # every row, 3 seeds: about 20 minutes
    python benchmarks/modern_ablation.py --rows 2017,today --seeds 1
    python benchmarks/modern_ablation.py --steps 3 --eval-pairs 20 --out /tmp/m.json  # a smoke run

Lesson 22 reads the stored results, benchmarks/results/modern_ablation.json;
the table goes to the run's results file in benchmarks/results/modern_ablation/
(a run with ``--out`` elsewhere is a trial, as in ablations.py). Every row is a
decoder-only model of two layers, d_model 64 and 4 heads, trained from
scratch for the same steps on the same batches (a seed fixes the data split,
the initial weights and the batch order). The rows:

    2017        the paper's block: post-norm LayerNorm, sinusoidal positions,
                ReLU feed-forward (d_ff 256), multi-head attention
    pre-norm    the same with the norm before each sub-layer (GPT-2's
                arrangement; every row below is pre-norm too)
    RMSNorm, rotary, SwiGLU, GQA
                one of today's choices each, on top of pre-norm
    today       all four at once: RMSNorm, rotary positions, SwiGLU and 2
                key/value heads for the 4 query heads (Llama's block)
    no bias     today's block without the biases of its projections, as
                Llama has none

A row that changes the parameter count (SwiGLU's third matrix, GQA's smaller
W_K and W_V, RMSNorm's missing beta) gets the d_ff that brings its count
closest to the 2017 block's (``matched_d_ff``). Biases (but in the last row),
the output bias and the embedding scale stay as in the paper, so that only
the block differs. Measured on the held-out sums, as the lm task measures them
(``training.optimisation.evaluation``): the cross-entropy of the answer's tokens (and of
<eos>), teacher forced; the exact match of the greedy answers; and the
held-out loss every ``CURVE_EVERY`` steps, for the curves.
"""

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time

# One BLAS thread, before NumPy loads, as in ablations.py: the runs' numbers
# then do not depend on how a product was split over threads.
os.environ.setdefault("OMP_NUM_THREADS", "1")

from minitrans.data.tasks import load_task  # noqa: E402 (NumPy loads here)
from minitrans.training.optimisation import evaluation
from minitrans.training import experiment  # noqa: E402
from minitrans.training.trainer import TrainConfig, Trainer  # noqa: E402

from harness import machine, results  # noqa: E402
from harness.ablation_options import (  # noqa: E402
    json_path, load_average, measured_line, positive, write_json,
)

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "results", "modern_ablation.json")
TASK = "lm"

# The 2017 block at toy size: the lm task's default model (d_model 128)
# halved, d_ff = 4 d_model kept; no dropout, as the lm task's default.
BASE = dict(d_model=64, h=4, N=2, d_ff=256, dropout=0.0)
PRE_NORM = dict(pre_norm=True)
TODAY = dict(pre_norm=True, norm="rms", positions="rope", activation="swiglu", kv_heads=2)
ROWS = [  # id, what it is, changes from BASE
    ("2017", "post-norm LayerNorm, sinusoidal, ReLU, 4 heads", {}),
    ("pre-norm", "the 2017 block, pre-norm", PRE_NORM),
    ("RMSNorm", "pre-norm, RMSNorm", {**PRE_NORM, "norm": "rms"}),
    ("rotary", "pre-norm, rotary positions", {**PRE_NORM, "positions": "rope"}),
    ("SwiGLU", "pre-norm, SwiGLU", {**PRE_NORM, "activation": "swiglu"}),
    ("GQA", "pre-norm, 2 key/value heads", {**PRE_NORM, "kv_heads": 2}),
    ("today", "RMSNorm, rotary, SwiGLU, 2 key/value heads", TODAY),
    ("no bias", "today's block without biases, as Llama", {**TODAY, "bias": False}),
]
# How every row trains: batches of 64 sums, the paper's schedule with a
# short warm-up, no label smoothing (the loss reported is the plain one).
TRAINING = dict(steps=2000, batch_size=64, warmup=100, lr_factor=1.0, label_smoothing=0.0,
                workers=1)
CURVE_EVERY = 250  # held-out loss every this many steps, for the curves
MEASURES = ("loss", "exact_match", "token_accuracy", "seconds")


def matched_d_ff(config, budget):
    """The d_ff that brings ``config``'s parameter count closest to
    ``budget`` (the smaller d_ff on a tie)."""
    def count(d_ff):
        return dataclasses.replace(config, d_ff=d_ff).parameter_count()
    return min(range(1, 4 * config.d_ff), key=lambda d_ff: (abs(count(d_ff) - budget), d_ff))


def row_config(task, changes):
    """The ModelConfig of a row: BASE with ``changes``, its d_ff matched to
    the 2017 block's parameter count."""
    base = experiment.model_config_for(task, **BASE)
    config = dataclasses.replace(base, **changes)
    return dataclasses.replace(config, d_ff=matched_d_ff(config, base.parameter_count()))


def run_one(changes, seed, steps, tasks, eval_pairs=None):
    """Train one row with one seed: (its config, the held-out measures and
    the loss curve [(step, loss), ...]) on the first ``eval_pairs`` held-out
    sums (None: all of them)."""
    if seed not in tasks:
        tasks[seed] = load_task(TASK, seed=seed)
    task = tasks[seed]
    valid = task.valid[:eval_pairs] if eval_pairs else task.valid
    config = row_config(task, changes)
    train_config = TrainConfig(task=TASK, seed=seed, **{**TRAINING, "steps": steps})
    trainer = Trainer(experiment.build_model(config, seed), task, train_config,
                      log=lambda *_: None, progress=False)
    start, curve = time.perf_counter(), []
    for step in range(1, steps + 1):
        trainer.train_step()
        if step % CURVE_EVERY == 0 or step == steps:
            metrics = evaluation.teacher_forced_metrics(trainer.model, task, valid)
            curve.append((step, metrics["loss"]))
    match, _ = evaluation.exact_match(trainer.model, task, valid)
    measures = {"loss": metrics["loss"], "exact_match": match,
                "token_accuracy": metrics["token_accuracy"],
                "seconds": time.perf_counter() - start}
    return config, measures, curve


def run_rows(rows, seeds, steps, log=None, eval_pairs=None):
    """Every row for every seed: a list of dicts (id, what, config,
    parameters, runs, the mean and half-range of each measure, mean curve)."""
    tasks, results = {}, []
    for row_id, what, changes in rows:
        runs, curves = [], []
        for seed in range(seeds):
            config, measures, curve = run_one(changes, seed, steps, tasks, eval_pairs)
            runs.append({"seed": seed, **measures})
            curves.append(curve)
            if log:
                log(f"{row_id} seed {seed}: held-out loss {measures['loss']:.4f}, exact match "
                    f"{measures['exact_match']:.1%}, {measures['seconds']:.1f} s")
        results.append({
            "id": row_id, "what": what, "changes": changes, "d_ff": config.d_ff,
            "parameters": config.parameter_count(), "config": config.to_dict(), "runs": runs,
            "mean": {key: statistics.fmean(run[key] for run in runs) for key in MEASURES},
            "spread": {key: (max(run[key] for run in runs) - min(run[key] for run in runs)) / 2
                       for key in MEASURES},
            "curve": [[step, statistics.fmean(curve[i][1] for curve in curves)]
                      for i, (step, _) in enumerate(curves[0])],
        })
    return results


def markdown_table(results):
    """One line per row: what it is, d_ff, parameters, held-out loss and
    exact match (mean ± half the range over the seeds), seconds per run."""
    head = ["row", "block", "d_ff", "parameters", "held-out loss", "exact match", "s/run"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
    for row in results:
        mean, spread = row["mean"], row["spread"]
        lines.append("| " + " | ".join([
            row["id"], row["what"], str(row["d_ff"]), f"{row['parameters']:,}",
            f"{mean['loss']:.3f} ± {spread['loss']:.3f}",
            f"{mean['exact_match']:.1%} ± {spread['exact_match']:.1%}",
            f"{mean['seconds']:.0f}"]) + " |")
    return "\n".join(lines)


def select_rows(spec):
    """The rows a ``--rows`` value names (comma-separated ids, any case), in
    ROWS's order; ValueError naming an unknown one."""
    wanted = {word.strip().lower() for word in spec.split(",") if word.strip()}
    unknown = sorted(wanted - {row[0].lower() for row in ROWS})
    if unknown or not wanted:
        raise ValueError(f"rows: expected ids from {','.join(r[0] for r in ROWS)}, got {spec!r}")
    return [row for row in ROWS if row[0].lower() in wanted]


def main(argv=None):
    parser = argparse.ArgumentParser(description="The 2017 block against today's, toy scale.")
    parser.add_argument("--rows", default="all", help="comma-separated row ids (default: all)")
    parser.add_argument("--steps", type=positive, default=TRAINING["steps"],
                        help=f"training steps per run (default {TRAINING['steps']})")
    parser.add_argument("--seeds", type=positive, default=3,
                        help="seeds 0 .. n-1 per row, averaged (default 3)")
    parser.add_argument("--eval-pairs", type=positive, default=None,
                        help="held-out sums measured per run (default: all 1,000)")
    parser.add_argument("--out", help=f"the JSON of every run (default "
                                      f"{os.path.relpath(DEFAULT_OUT)}, the stored results; "
                                      f"elsewhere: a trial run)")
    parser.add_argument("--force", action="store_true", help="overwrite --out's file")
    results.add_option(parser, "modern_ablation")
    args = parser.parse_args(argv)
    try:
        rows = ROWS if args.rows == "all" else select_rows(args.rows)
        out = json_path(args.out, args.force, DEFAULT_OUT)
    except ValueError as error:
        parser.error(f"--{error}")
    start, load_before = time.perf_counter(), load_average()
    found = run_rows(rows, args.seeds, args.steps,
                     log=lambda line: print(line, file=sys.stderr, flush=True),
                     eval_pairs=args.eval_pairs)
    total = time.perf_counter() - start
    measured = measured_line(total, load_before)
    setup = {"task": TASK, "base": BASE, "training": {**TRAINING, "steps": args.steps},
             "seeds": args.seeds, "eval_pairs": args.eval_pairs or "all held-out sums",
             "curve_every": CURVE_EVERY}
    write_json(out, {"machine": measured, "seconds": total, "setup": setup, "rows": found})
    table = markdown_table(found)
    print(table)
    body = f"{table}\n\n{measured}.\n\nSetup: `{json.dumps(setup)}`\n"
    results.save(args.results, "modern_ablation", "The 2017 block against today's, at the "
                 "same parameter budget", body, machine.summary(), smoke=out != DEFAULT_OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())

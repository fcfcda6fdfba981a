"""Table 3 of the paper in miniature: train a toy base model and one variant
per row on the toy translation task, and compare them on held-out pairs.

Run from the repository root, after `pip install ".[train]"`:

    python benchmarks/ablations.py                       # every row, 3 seeds: 2 to 4 minutes
    python benchmarks/ablations.py --rows A,E1 --seeds 1 # rows (A) and E1 (and base), seed 0
    python benchmarks/ablations.py --steps 3 --eval-pairs 10 --out /tmp/smoke.json  # a smoke run

Every row is trained from scratch for the same number of steps on the same
batches (a seed fixes the data, the initial weights, the batch order and the
dropout masks); the base row is always trained, as every other row is read
against it. Each row's held-out measures, averaged over the seeds:

    PPL          exp(cross-entropy per target token), teacher forced, without
                 label smoothing: the paper's "PPL (dev)" column, per word here
    BLEU         corpus BLEU of the greedy translations (sacrebleu)
    exact match  the fraction of translations equal to the reference
    token acc.   the argmax token accuracy, teacher forced

By default every run's numbers go to benchmarks/results/ablations.json (the
stored results lesson 18 reads, rewritten) and the table to the run's
results file in benchmarks/results/ablations/. A run with ``--out`` elsewhere
is a trial: its JSON goes there (an existing file only with ``--force``) and
it writes no results file unless ``--results`` names a folder. The table is
also printed; the per-run lines go to standard error.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

# One BLAS thread, set before NumPy loads: how a product is split over threads
# changes the order of its sums, so its last bits, and over 100 steps a run's
# numbers. With one thread the stored runs and lesson 18's rerun agree to
# the last digit (and these small products gain nothing from a second).
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
DEFAULT_OUT = os.path.join(HERE, "results", "ablations.json")
TASK = "translate"

# The toy base model: the paper's base (N=6, d_model=512, d_ff=2048, h=8,
# d_k=64, dropout 0.1, label smoothing 0.1) scaled down, d_ff = 4 d_model kept.
# d_k is d_model / h unless a row gives it; positions are sinusoidal unless
# a row asks for learned ones.
BASE = dict(N=2, d_model=64, d_ff=256, h=4, dropout=0.1, label_smoothing=0.1, pre_norm=False)
# How it trains: 100 steps of 64 pairs, the paper's schedule at half its
# rate (at the full rate, 150 steps, whether a run had learnt the reordering
# by the end swung its exact match between 9% and 93% from seed to seed).
# The base model ends near 98% exact match: short enough that worse rows
# show, long enough that the base has learnt the task.
TRAINING = dict(steps=100, batch_size=64, warmup=50, lr_factor=0.5, workers=1)
TRAIN_FIELDS = ("label_smoothing",)  # the rest of a row's changes are the model's

# Table 3's rows, each (id, group, changes from BASE). (A) keeps d_k =
# d_model / h, so the computation stays the same; (B) makes d_k smaller at fixed
# h; (C) changes the sizes (d_k = d_model / h); (D) regularisation; (E)
# learned positions; (F), not in the paper's table: pre-norm,
# alone and with the four layers of C2.
ROWS = [
    ("base", "base", {}),
    ("A1", "A", dict(h=1)),
    ("A2", "A", dict(h=2)),
    ("A3", "A", dict(h=8)),
    ("A4", "A", dict(h=16)),
    ("B1", "B", dict(d_k=8)),
    ("B2", "B", dict(d_k=4)),
    ("C1", "C", dict(N=1)),
    ("C2", "C", dict(N=4)),
    ("C3", "C", dict(d_model=32)),
    ("C4", "C", dict(d_model=128)),
    ("C5", "C", dict(d_ff=128)),
    ("C6", "C", dict(d_ff=512)),
    ("D1", "D", dict(dropout=0.0)),
    ("D2", "D", dict(dropout=0.3)),
    ("D3", "D", dict(label_smoothing=0.0)),
    ("D4", "D", dict(label_smoothing=0.3)),
    ("E1", "E", dict(positions="learned")),
    ("F1", "F", dict(pre_norm=True)),
    ("F2", "F", dict(N=4, pre_norm=True)),  # C2 again, pre-norm
]
MEASURES = ("ppl", "loss", "bleu", "exact_match", "token_accuracy", "seconds")


def select_rows(spec):
    """The rows a ``--rows`` value names (comma-separated row ids or group
    letters, in any case), base first; ValueError naming an unknown one."""
    wanted = [word.strip() for word in spec.split(",") if word.strip()]
    ids, groups = {row[0].lower() for row in ROWS}, {row[1].lower() for row in ROWS}
    unknown = [word for word in wanted if word.lower() not in ids | groups]
    if unknown or not wanted:
        raise ValueError(
            f"rows: expected row ids or groups from "
            f"{','.join(row[0] for row in ROWS)} or A-F, got {spec!r}"
        )
    chosen = {word.lower() for word in wanted} | {"base"}
    return [row for row in ROWS if row[0].lower() in chosen or row[1].lower() in chosen]


def make_trainer(changes, seed, steps, tasks):
    """A Trainer of the base model with ``changes``, for ``steps`` steps with
    ``seed``; ``tasks`` caches one task (data and split) per seed, shared by
    every row."""
    if seed not in tasks:
        tasks[seed] = load_task(TASK, seed=seed)
    task = tasks[seed]
    settings = {**BASE, **changes}
    train = {key: settings.pop(key) for key in TRAIN_FIELDS}
    config = TrainConfig(task=TASK, seed=seed, **{**TRAINING, "steps": steps}, **train)
    model = experiment.build_model(experiment.model_config_for(task, **settings), seed)
    return Trainer(model, task, config, log=lambda *_: None, progress=False)


def measure(model, task, eval_pairs):
    """The held-out measures of ``model`` on the first ``eval_pairs`` pairs
    of ``task.valid`` (a dict: loss, ppl, bleu, exact_match, token_accuracy)."""
    pairs = task.valid[:eval_pairs]
    metrics = evaluation.teacher_forced_metrics(model, task, pairs)
    match, predictions = evaluation.exact_match(model, task, pairs)
    references = [evaluation.reference_text(task, target) for _, target in pairs]
    return {
        "loss": metrics["loss"],
        "ppl": math.exp(metrics["loss"]),
        "bleu": evaluation.corpus_bleu(predictions, references),
        "exact_match": match,
        "token_accuracy": metrics["token_accuracy"],
    }


def run_one(changes, seed, steps, eval_pairs, tasks):
    """Train the base model with ``changes`` for ``steps`` steps with
    ``seed``; return its parameter count and held-out measures (a dict,
    with the seconds of training and measuring)."""
    trainer = make_trainer(changes, seed, steps, tasks)
    start = time.perf_counter()
    for _ in range(steps):  # train_step alone: no evaluations, no checkpoints written
        trainer.train_step()
    measures = measure(trainer.model, trainer.task, eval_pairs)
    return trainer.model.num_parameters(), {**measures, "seconds": time.perf_counter() - start}


def run_rows(rows, seeds, steps, eval_pairs, log=None):
    """Every row for every seed: a list of dicts (id, group, changes,
    parameters, runs per seed, mean and spread of each measure)."""
    tasks, results = {}, []
    for row_id, group, changes in rows:
        runs = []
        for seed in range(seeds):
            parameters, measures = run_one(changes, seed, steps, eval_pairs, tasks)
            runs.append({"seed": seed, **measures})
            if log:
                log(
                    f"{row_id} seed {seed}: PPL {measures['ppl']:.3f}, BLEU {measures['bleu']:.1f},"
                    f" exact match {measures['exact_match']:.1%}, {measures['seconds']:.1f} s"
                )
        results.append(
            {
                "id": row_id,
                "group": group,
                "changes": changes,
                "parameters": parameters,
                "runs": runs,
                "mean": {key: statistics.fmean(run[key] for run in runs) for key in MEASURES},
                # half the range between the seeds: the table's "±"
                "spread": {
                    key: (max(run[key] for run in runs) - min(run[key] for run in runs)) / 2
                    for key in MEASURES
                },
            }
        )
    return results


COLUMNS = (
    "N",
    "d_model",
    "d_ff",
    "h",
    "d_k",
    "dropout",
    "label_smoothing",
    "positions",
    "pre_norm",
)
TITLES = ("N", "d_model", "d_ff", "h", "d_k", "P_drop", "ε_ls", "positions", "norm")


def markdown_table(results):
    """The table in the form of the paper's Table 3: a row shows only the
    settings it changes (d_k follows d_model / h unless given), then PPL,
    BLEU, exact match (± half the range over the seeds) and parameters."""
    head = ["", *TITLES, "PPL (dev)", "BLEU", "exact match", "params", "s/run"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
    for row in results:
        shown = dict(BASE, positions="sinusoidal") if row["id"] == "base" else dict(row["changes"])
        if "d_k" not in shown and {"h", "d_model"} & set(shown):  # d_k follows d_model / h
            sizes = {**BASE, **shown}
            shown["d_k"] = sizes["d_model"] // sizes["h"]
        shown["pre_norm"] = {True: "pre", False: "post"}.get(shown.get("pre_norm"), "")
        mean, spread = row["mean"], row["spread"]
        label = row["id"] if row["id"] == "base" else f"({row['group']}) {row['id']}"
        cells = [
            label,
            *(str(shown.get(key, "")) for key in COLUMNS),
            f"{mean['ppl']:.3f} ± {spread['ppl']:.3f}",
            f"{mean['bleu']:.1f} ± {spread['bleu']:.1f}",
            f"{mean['exact_match']:.1%} ± {spread['exact_match']:.1%}",
            f"{row['parameters']:,}",
            f"{mean['seconds']:.1f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Table 3's ablations at toy scale.")
    parser.add_argument(
        "--rows",
        default="all",
        help="comma-separated row ids (A1, D3, ...) or groups (A to F); "
        "base is always run (default: all)",
    )
    parser.add_argument(
        "--steps",
        type=positive,
        default=TRAINING["steps"],
        help=f"training steps per run (default {TRAINING['steps']})",
    )
    parser.add_argument(
        "--seeds", type=positive, default=3, help="seeds 0 .. n-1 per row, averaged (default 3)"
    )
    parser.add_argument(
        "--eval-pairs",
        type=positive,
        default=500,
        help="held-out pairs measured per run (default 500)",
    )
    parser.add_argument(
        "--out",
        help=f"the JSON of every run (default {os.path.relpath(DEFAULT_OUT)}, the stored "
        f"results; elsewhere: a trial run)",
    )
    parser.add_argument("--force", action="store_true", help="overwrite --out's file")
    results.add_option(parser, "ablations")
    args = parser.parse_args(argv)
    try:
        rows = ROWS if args.rows == "all" else select_rows(args.rows)
        out = json_path(args.out, args.force, DEFAULT_OUT)
    except ValueError as error:
        parser.error(f"--{error}")

    start, load_before = time.perf_counter(), load_average()
    found = run_rows(rows, args.seeds, args.steps, args.eval_pairs,
                     log=lambda line: print(line, file=sys.stderr, flush=True))
    setup = {"task": TASK, "base": BASE, "training": {**TRAINING, "steps": args.steps},
             "seeds": args.seeds, "eval_pairs": args.eval_pairs}
    measured = measured_line(time.perf_counter() - start, load_before)
    write_json(out, {"machine": measured, "setup": setup, "rows": found})
    table = markdown_table(found)
    print(table)
    body = f"{table}\n\n{measured}.\n\nSetup: `{json.dumps(setup)}`\n"
    results.save(args.results, "ablations", "Table 3 in miniature: the toy base model and one "
                 "variant per row", body, machine.summary(), smoke=out != DEFAULT_OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())

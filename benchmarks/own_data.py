"""Bring your own corpus: does `minitrans train translate --data FILE`, with no
other flag, learn it?

Generates a family of TSV corpora a learner might bring, 20,000 pairs each
by default (``harness/own_corpora.py``: number words to digits and back, dates in
eleven locales, Cyrillic to Latin transliteration, unit conversion, English
inflection), and trains on each exactly as a user would, in a fresh working
folder, with no flag but ``--data`` (and ``--no-progress``, for the log).

Then it measures the checkpoint a user would keep, ``best.npz``, with
``minitrans evaluate`` on the held-out pairs the run never looked at: the
train command holds out 10% of the pairs and evaluates on the first 1,000 of
them to choose ``best.npz`` and to stop, so the rest judge the choice without
favouring it. The table gives, per corpus, the level, merges and model the
command chose, the steps, why it stopped, the wall time of the training
command, and that exact match; the script exits with status 1 if a corpus
stays below 95%. Needs the optional libraries that write the corpora:
pip install ".[train,data]".

    python benchmarks/own_data.py                    # the real run: only --data is passed
    python benchmarks/own_data.py --keep corpora/    # keep the corpora and the runs
    python benchmarks/own_data.py --corpora dates,units --seed 3
    python benchmarks/own_data.py --pairs 11000 --steps 2   # smoke run: checks the script

Training output goes to standard error, the table to standard output and
into the run's results file, benchmarks/results/own_data/ (``--results``).
"""

import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import minitrans
from minitrans.core import backend
from minitrans.data import read_tsv, write_tsv
from minitrans.data.corpus import hold_out
from minitrans.training.corpus_defaults import PATIENCE

from harness import machine, results
from harness.own_corpora import CORPORA

TARGET = 0.95
REPOSITORY = pathlib.Path(minitrans.__file__).resolve().parents[1]
SELECTION_PAIRS = 1000  # the train command's eval_pairs: the held-out pairs it chooses by


def minitrans_command(arguments, folder):
    """Run ``python -m minitrans *arguments`` in ``folder`` (so that its
    ``runs/`` lands there), echo its output on stderr, and return (exit
    status, output lines, wall seconds)."""
    command = [sys.executable, "-m", "minitrans", *map(str, arguments)]
    path = os.environ.get("PYTHONPATH")  # this minitrans, installed or not
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPOSITORY), path]))}
    print(f"$ minitrans {' '.join(map(str, arguments))}   (in {folder})", file=sys.stderr,
          flush=True)
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, encoding="utf-8")
    lines = []
    for line in process.stdout:
        print(line, end="", file=sys.stderr, flush=True)
        lines.append(line.rstrip("\n"))
    status = process.wait()
    return status, lines, time.perf_counter() - start


def find(pattern, text, convert=str):
    """``convert`` of the first group of the last match of ``pattern``, or None."""
    found = re.findall(pattern, text)
    return convert(found[-1]) if found else None


def parse_run(lines):
    """What the train command said: the level and merges it chose, the
    model's width and parameters, the steps it trained, why it stopped
    (None: it trained every step of its budget), and the held-out exact
    match of its best evaluation (a fraction); None where a line is missing."""
    text = "\n".join(lines)
    best = find(r"\(best held-out exact match, ([\d.]+)%", text, float)
    return {
        "level": find(r"\((\w+) level\)", text),
        "merges": find(r"(\d+) merges \(", text, int),
        "d_model": find(r"d_model=(\d+)", text, int),
        "parameters": find(r"model: ([\d,]+) parameters", text),
        "steps": find(r"after (\d+) steps", text, int),
        "stopped": find(r"step \d+: (reached exact match|held-out exact match has not improved|"
                        r"the time budget)", text),
        "selection": None if best is None else best / 100,
    }


def parse_evaluation(lines):
    """The exact match (a fraction) that ``minitrans evaluate`` printed, or None."""
    return find(r"(?m)^exact match: ([\d.]+)%", "\n".join(lines), lambda text: float(text) / 100)


def unseen_pairs(path):
    """The held-out pairs of the corpus at ``path`` that the train command
    never evaluates on: it holds out 10% with seed 0 (``corpus.hold_out``)
    and chooses and stops by the first SELECTION_PAIRS of them."""
    _, valid = hold_out(path, read_tsv(path), 0.1, 0)
    return valid[SELECTION_PAIRS:]


def verdict(exact_match, smoke):
    if smoke:
        return "not judged (smoke run)"
    if exact_match is None:
        return "NO (the run failed)"
    return "yes" if exact_match >= TARGET else "NO"


STOPPED = {"reached exact match": "100% reached", None: "step budget",
           "held-out exact match has not improved": f"no gain in {PATIENCE} evaluations",
           "the time budget": "time budget"}


def run_corpus(name, pairs, seed, folder, steps):
    """Write the corpus ``name`` into ``folder``, train on it there, evaluate
    ``best.npz`` on the unseen held-out pairs; a table row."""
    corpus = CORPORA[name](backend.host_rng((seed, list(CORPORA).index(name))), pairs)
    path = pathlib.Path(folder) / f"{name}.tsv"
    write_tsv(path, corpus)
    work = pathlib.Path(folder) / name
    work.mkdir()
    extra = [] if steps is None else ["--steps", steps]
    status, lines, seconds = minitrans_command(
        ["train", "translate", "--data", path, "--no-progress", *extra], work)
    run = parse_run(lines)
    match, unseen = None, unseen_pairs(path)
    best = work / "runs" / name / "best.npz"
    if status == 0 and unseen and best.exists():
        write_tsv(work / "unseen.tsv", unseen)
        _, evaluated, _ = minitrans_command(
            ["evaluate", "--checkpoint", best, "--data", work / "unseen.tsv"], work)
        match = parse_evaluation(evaluated)
    smoke = steps is not None
    return {
        "corpus": f"{name} ({corpus[0][0]!r} -> {corpus[0][1]!r})",
        "pairs": f"{len(corpus):,}",
        "level": f"{run['level'] or '?'}, {run['merges'] if run['merges'] is not None else '?'}",
        "model": f"{run['d_model'] or '?'}, {run['parameters'] or '?'}",
        "steps": "-" if run["steps"] is None else str(run["steps"]),
        "stopped": STOPPED.get(run["stopped"], "?"),
        "seconds": f"{seconds:.0f}",
        "selection": "-" if run["selection"] is None else f"{run['selection']:.1%}",
        "exact": "-" if match is None else f"{match:.1%} of {len(unseen)}",
        "target": verdict(match, smoke) + ("" if status == 0 else f" (exit {status})"),
        # a smoke run needs only a run that ended well, the real run the target too
        "passed": status == 0 and (smoke or (match is not None and match >= TARGET)),
    }


COLUMNS = [
    ("corpus", "corpus (first pair)"),
    ("pairs", "pairs"),
    ("level", "level, merges"),
    ("model", "d_model, parameters"),
    ("steps", "steps"),
    ("stopped", "stopped by"),
    ("seconds", "training (s)"),
    ("selection", "best held-out (chooses best.npz)"),
    ("exact", "best.npz on unseen held-out"),
    ("target", f">= {TARGET:.0%}?"),
]


def markdown_table(rows):
    lines = [
        "| " + " | ".join(title for _, title in COLUMNS) + " |",
        "|" + "|".join(" --- " for _ in COLUMNS) + "|",
    ]
    lines += ["| " + " | ".join(row[key] for key, _ in COLUMNS) + " |" for row in rows]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20000, help="pairs per corpus (20000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the corpora (0)")
    parser.add_argument(
        "--keep",
        metavar="DIR",
        help="write the corpora and the runs into DIR (new or empty) and keep them",
    )
    parser.add_argument(
        "--corpora",
        default=",".join(CORPORA),
        help=f"comma-separated, from {','.join(CORPORA)} (default: all)",
    )
    parser.add_argument(
        "--steps",
        type=int,
        help="smoke run: pass --steps to train (checks the script, not the score)",
    )
    results.add_option(parser, "own_data")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.corpora.split(",") if name.strip()]
    if not names or any(name not in CORPORA for name in names):
        parser.error(f"--corpora: expected names from {','.join(CORPORA)}, got {args.corpora!r}")
    if args.pairs < 2 or (args.steps is not None and args.steps < 1):
        parser.error(
            f"--pairs: expected at least 2, --steps at least 1, got {args.pairs} "
            f"and {args.steps}"
        )
    if args.keep:
        keep = pathlib.Path(args.keep)
        if keep.exists() and (not keep.is_dir() or any(keep.iterdir())):
            parser.error(f"--keep: {keep} is not a new or empty folder (nothing is overwritten)")
        keep.mkdir(parents=True, exist_ok=True)
        rows = [run_corpus(name, args.pairs, args.seed, keep, args.steps) for name in names]
    else:
        with tempfile.TemporaryDirectory() as folder:
            rows = [run_corpus(name, args.pairs, args.seed, folder, args.steps) for name in names]

    command = "minitrans train translate --data FILE --no-progress"
    said = (f"`{command}{'' if args.steps is None else f' --steps {args.steps}'}`, "
            f"minitrans {minitrans.__version__}, corpora of seed {args.seed}:")
    table = markdown_table(rows)
    print(f"{said}\n\n{table}")
    results.save(args.results, "own_data", "Your own corpus: each trained with "
                 "`minitrans train translate --data FILE` and no other flag",
                 f"{table}\n\nEach corpus trained by {said[:-1]}.\n", machine.summary(),
                 smoke=args.steps is not None)
    return 0 if all(row["passed"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

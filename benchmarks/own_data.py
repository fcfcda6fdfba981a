"""Bring your own corpus: does `minitrans train translate --data FILE`, with no
other flag, learn it?

Generates two TSV corpora of real language, 20,000 pairs each by default,
and trains on each exactly as a user would, in a fresh working folder:

    numbers  English number words to digits, "three hundred and forty-five" -> "345"
             (0 to 999,999; the digit count drawn first, so short numbers appear too)
    dates    dates written out in English, German, French, Spanish or Italian to
             ISO 8601, "3. März 2021" -> "2021-03-03"

Then prints a table (corpus, pairs, level chosen, steps, wall time, held-out
exact match, whether it reaches 95%) and exits with status 1 if a corpus
stays below 95%. Needs the optional libraries that write the corpora:
pip install ".[train,data]".

    python benchmarks/own_data.py                    # the real run: only --data is passed
    python benchmarks/own_data.py --keep corpora/    # keep the corpora and the runs
    python benchmarks/own_data.py --pairs 200 --steps 20   # smoke run: checks the script

Training output goes to standard error, the table to standard output.
See benchmarks/README.md.
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
from minitrans.data import write_tsv
from minitrans.data.language_tasks import date_pairs, number_words

TARGET = 0.95
REPOSITORY = pathlib.Path(minitrans.__file__).resolve().parents[1]


def number_corpus(rng, count):
    """``count`` distinct (English words, digits) pairs of numbers in
    0..999,999: a digit count 1..6 is drawn, then a number with that many
    digits at most, so that "seven" and "ninety-one" appear beside
    "three hundred and forty-five thousand, six hundred and seventy-eight"."""
    return distinct(lambda n: [number_pair(rng) for _ in range(n)], count)


def number_pair(rng):
    number = int(rng.integers(0, 10 ** int(rng.integers(1, 7))))
    return number_words(number, "en"), str(number)


def date_corpus(rng, count):
    """``count`` distinct (written date, ISO date) pairs (see language_tasks.date_pairs)."""
    return distinct(lambda n: date_pairs(rng, n), count)


def distinct(draw, count):
    """``count`` pairs with distinct sources, drawn in order until there are enough."""
    by_source = {}
    while len(by_source) < count:
        for source, target in draw(count - len(by_source)):
            by_source.setdefault(source, target)
    return list(by_source.items())


CORPORA = {"numbers": number_corpus, "dates": date_corpus}


def train(corpus_path, folder, steps=None):
    """Run ``minitrans train translate --data corpus_path --no-progress`` in
    ``folder`` (so its ``runs/`` lands there), echo its output on stderr, and
    return (exit status, output lines, wall seconds). ``steps`` (smoke runs
    only) adds ``--steps``."""
    command = [sys.executable, "-m", "minitrans", "train", "translate"]
    command += ["--data", str(corpus_path), "--no-progress"]
    if steps is not None:
        command += ["--steps", str(steps)]
    path = os.environ.get("PYTHONPATH")  # this minitrans, installed or not
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPOSITORY), path]))}
    print(f"$ {' '.join(command[1:])}   (in {folder})", file=sys.stderr, flush=True)
    start = time.perf_counter()
    process = subprocess.Popen(
        command,
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        encoding="utf-8",
    )
    lines = []
    for line in process.stdout:
        print(line, end="", file=sys.stderr, flush=True)
        lines.append(line.rstrip("\n"))
    status = process.wait()
    return status, lines, time.perf_counter() - start


def parse_run(lines):
    """What the train command said: the level it chose, the steps it trained,
    the final held-out exact match (a fraction) and on how many pairs; None
    where a line is missing (the run failed)."""
    text = "\n".join(lines)
    level = re.search(r"\((\w+) level\)", text)
    final = re.findall(r"held-out exact match ([\d.]+)% on (\d+) pairs after (\d+) steps", text)
    result = {
        "level": level.group(1) if level else None,
        "exact_match": None,
        "held_out": None,
        "steps": None,
    }
    if final:
        match, pairs, steps = final[-1]
        result.update(exact_match=float(match) / 100, held_out=int(pairs), steps=int(steps))
    return result


def verdict(exact_match, smoke):
    if smoke:
        return "not judged (smoke run)"
    if exact_match is None:
        return "NO (the run failed)"
    return "yes" if exact_match >= TARGET else "NO"


def run_corpus(name, pairs, seed, folder, steps):
    """Write the corpus ``name`` into ``folder``, train on it there; a table row."""
    corpus = CORPORA[name](backend.host_rng((seed, list(CORPORA).index(name))), pairs)
    path = pathlib.Path(folder) / f"{name}.tsv"
    write_tsv(path, corpus)
    work = pathlib.Path(folder) / name
    work.mkdir()
    status, lines, seconds = train(path, work, steps)
    result = parse_run(lines)
    match = result["exact_match"]
    return {
        "corpus": f"{name} ({corpus[0][0]!r} -> {corpus[0][1]!r})",
        "pairs": f"{len(corpus):,}",
        "level": result["level"] or "?",
        "steps": "-" if result["steps"] is None else str(result["steps"]),
        "seconds": f"{seconds:.0f}",
        "exact": "-" if match is None else f"{match:.1%} of {result['held_out']}",
        "target": verdict(match, steps is not None) + ("" if status == 0 else f" (exit {status})"),
        # a smoke run needs only a run that ended well, the real run the target too
        "passed": status == 0 and (steps is not None or (match is not None and match >= TARGET)),
    }


COLUMNS = [
    ("corpus", "corpus (first pair)"),
    ("pairs", "pairs"),
    ("level", "level chosen"),
    ("steps", "steps"),
    ("seconds", "wall time (s)"),
    ("exact", "held-out exact match"),
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
        help=f"comma-separated, from {','.join(CORPORA)} (default: both)",
    )
    parser.add_argument(
        "--steps",
        type=int,
        help="smoke run: pass --steps to train (checks the script, not the score)",
    )
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
    print(
        f"{command}{'' if args.steps is None else f' --steps {args.steps}'}, "
        f"minitrans {minitrans.__version__}, seed {args.seed}:\n"
    )
    print(markdown_table(rows))
    return 0 if all(row["passed"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

"""No process talk and no dated narrative in the tracked tree.

A reader of minitrans meets READMEs, guide pages, docstrings, comments and
lessons that say what the code does and why. How it came to be (which issue
asked for it, what a session did, what a change gained on which day) belongs
to git, to ``CHANGELOG.md`` and to the measurements' own files in
``benchmarks/results/``, each of which names its date, machine and commit.

The test reads every tracked text file except those two places, and this
file (it plants the patterns it looks for). Citations of other projects'
issues (``numpy/numpy#24067``), colours (``#333333``) and example data (the
date ``"2021-03-03"``) are not process talk, and the planted lines show that
each pattern passes them.
"""

import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
THIS_FILE = pathlib.Path(__file__).resolve().relative_to(ROOT).as_posix()
EXEMPT_PREFIXES = ("benchmarks/results/", "CHANGELOG.md")
# Executed notebooks repeat their lesson's source (which is read) and hold outputs.
SKIPPED_SUFFIXES = (".ipynb", ".npz", ".woff", ".woff2", ".png", ".svg", ".ico", ".gz")

MONTH = (r"(?:January|February|March|April|May|June|July|August|September|October|November"
         r"|December)")
PATTERNS = {
    "an issue number": r"(?<![\w/])issues? #?\d+",
    "an issue by its title": r"\bissue [\"“]",
    "an issue by #": r"(?:(?<=\s)|(?<=\())#\d{1,4}\b(?![0-9a-fA-F])",
    "a session": r"\b(?:this|last|previous|earlier|next|that) session\b",
    "the last run": r"\b(?:last|previous) run\b",
    "someone's changes": r"\b(?:after|before) [\w .-]{1,40}'s (?:changes|work)\b",
    "a dated narrative": r"\b(?:on|since|until|as of|before|after) 20\d\d-\d\d-\d\d\b",
    "a dated narrative, in words": rf"\b(?:on|since|until|as of) {MONTH} \d{{1,2}},? 20\d\d\b",
}
TALK = re.compile("|".join(f"(?:{pattern})" for pattern in PATTERNS.values()), re.IGNORECASE)


def talk_in(text):
    """The lines of ``text`` that speak of the project's process: [(line number, line)]."""
    return [(number, line.strip()) for number, line in enumerate(text.splitlines(), start=1)
            if TALK.search(line)]


# What .gitignore leaves out, for a copy of the tree without .git (as .ci/run makes).
IGNORED_FOLDERS = {".git", ".venv", "build", "dist", "runs", "__pycache__", ".pytest_cache",
                   ".hypothesis"}


def tree_files():
    """The tree's files by name: what git tracks or would track, or, in a copy
    without .git, every file outside the folders that .gitignore leaves out."""
    if (ROOT / ".git").exists():
        # Files not yet added count too: .ci/run copies them, and so does a commit.
        return subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
            capture_output=True, text=True, check=True).stdout.splitlines()
    return sorted(path.relative_to(ROOT).as_posix() for path in ROOT.rglob("*")
                  if path.is_file() and not any(
                      part in IGNORED_FOLDERS or part.endswith(".egg-info")
                      for part in path.relative_to(ROOT).parts))


def tracked_text_files():
    for name in tree_files():
        if name == THIS_FILE or name.startswith(EXEMPT_PREFIXES) or name.endswith(
                SKIPPED_SUFFIXES):
            continue
        path = ROOT / name
        if path.is_file():
            yield name, path.read_text(encoding="utf-8", errors="replace")


def test_no_tracked_file_speaks_of_issues_sessions_or_dated_runs():
    found = {name: talk for name, text in tracked_text_files() if (talk := talk_in(text))}
    assert not found, "process talk or dated narrative (say what the code does, not how it " \
        f"came to be; measurements go to benchmarks/results/): {found}"


PLANTED = """\
Before issue 16 there was no recurrent layer (issue "The course, mended").
    # issues 23 and 24 asked for this (see #41)
It was measured in this session, and the last session measured it too.
The last run read 0.93.
After issue 24's changes the step took 25.8 ms; after the trainer's changes it took less.
On 2026-11-27 the machine was an AMD EPYC; since 2026-11-26 PyTorch runs its fused Adam.
As of November 27, 2026 the suite takes 506 s.
"""
ALLOWED = """\
OpenBLAS sets the flag (numpy/numpy#24067); cupy/cupy#6290 is open.
edgecolor="#333333", stroke="#333"
"3. März 2021" -> "2021-03-03"
A folder that holds the checkpoint of an earlier run is refused; this run's lock is removed.
Each results file names the date of its run, such as 2026-11-27.
"""


def test_the_grep_catches_every_planted_line():
    assert [number for number, _ in talk_in(PLANTED)] == [1, 2, 3, 4, 5, 6, 7]
    for name, pattern in PATTERNS.items():
        assert re.search(pattern, PLANTED, re.IGNORECASE), f"{name} catches nothing planted"


def test_the_grep_passes_citations_colours_and_example_data():
    assert talk_in(ALLOWED) == []

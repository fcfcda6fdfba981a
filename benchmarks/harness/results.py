"""The results file of a run: one Markdown file per run, written by the
script that measured it, in ``benchmarks/results/<script stem>/``.

Its name, ``YYYY-MM-DD-HHMMSS-<commit>.md`` (the time in UTC), sorts the
runs of a script by time, so the last name is the latest run. It begins with
the same four lines in every file, so that a number can always be traced to
where, when and from what code it came:

    # <title>

    - Date: 2026-11-27 14:05:09 UTC
    - Machine: <CPU or GPU, cores, system; NumPy and its BLAS; PyTorch if used>
    - Commit: <7-hex commit>, "+ uncommitted changes" where the tracked files differ
    - Command: `python benchmarks/task_targets.py --tasks copy`

then the script's tables. A smoke run (``--quick``, ``--steps``) checks a
script, not a number: it writes no file unless ``--results`` names a folder.
"""

import datetime
import os
import pathlib
import re
import shlex
import subprocess
import sys

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1]
REPO = BENCHMARKS.parent
RESULTS = BENCHMARKS / "results"
HEX_COMMIT = re.compile(r"[0-9a-f]{7}")


def git_commit(repo=REPO, environ=None):
    """The commit of the code that runs, for the header: the checkout's
    short commit, "+ uncommitted changes" when a tracked file differs from
    it (untracked files, such as new results files, do not count); or
    ``MINITRANS_COMMIT`` where it is set, for a copy of a checkout whose
    .git is missing or not its own; "unknown (no git)" otherwise."""
    environ = os.environ if environ is None else environ
    stated = environ.get("MINITRANS_COMMIT", "").strip()
    if stated:
        return f"{stated} (MINITRANS_COMMIT)"

    def git(*arguments):
        return subprocess.run(["git", *arguments], cwd=repo, capture_output=True, text=True,
                              timeout=10).stdout.strip()

    try:
        commit = git("rev-parse", "--short=7", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown (no git)"
    return (commit or "unknown (no git)") + (" + uncommitted changes" if commit and changed
                                             else "")


def file_name(when, commit):
    """``2026-11-27-140509-abc1234.md``: the time (UTC) and the commit's 7
    hex digits ("unknown" where the commit is not known)."""
    found = HEX_COMMIT.match(commit)
    return f"{when:%Y-%m-%d-%H%M%S}-{found.group(0) if found else 'unknown'}.md"


def command_line(argv=None):
    """The command as typed from the repository root: ``python``, the
    script's path relative to the repository, its arguments, quoted."""
    argv = list(sys.argv if argv is None else argv)
    script = pathlib.Path(argv[0]).resolve()
    if script.is_relative_to(REPO):
        argv[0] = script.relative_to(REPO).as_posix()
    return shlex.join(["python", *argv])


def header(title, when, machine, commit, command):
    """The lines every results file begins with."""
    return "\n".join([f"# {title}", "", f"- Date: {when:%Y-%m-%d %H:%M:%S} UTC",
                      f"- Machine: {machine}", f"- Commit: {commit}",
                      f"- Command: `{command}`", ""])


def write_run(folder, title, body, machine, command=None, when=None, commit=None):
    """Write one run's results file into ``folder`` (made if missing) and
    return its path: the header, then ``body`` (Markdown). An existing
    file is never overwritten."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    commit = commit or git_commit()
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name(when, commit)
    text = header(title, when, machine, commit, command or command_line()) + "\n" + body
    with open(path, "x", encoding="utf-8") as handle:
        handle.write(text.rstrip("\n") + "\n")
    return path


def add_option(parser, stem):
    """The ``--results DIR`` option every suite script takes."""
    parser.add_argument("--results", metavar="DIR",
                        help=f"the folder of this run's results file (default "
                             f"benchmarks/results/{stem}/; a smoke run writes none unless "
                             f"given)")


def folder_for(results, stem, smoke=False):
    """Where a run's results file goes: ``results`` (the --results value)
    where given, else RESULTS/stem, and nowhere (None) for a smoke run."""
    if results:
        return pathlib.Path(results)
    return None if smoke else RESULTS / stem


def save(results, stem, title, body, machine, smoke=False):
    """Write the results file where ``folder_for`` says, say where on
    standard error, and return its path (None: a smoke run, nothing written)."""
    folder = folder_for(results, stem, smoke)
    if folder is None:
        return None
    path = write_run(folder, title, body, machine)
    print(f"results: {os.path.relpath(path)}", file=sys.stderr, flush=True)
    return path

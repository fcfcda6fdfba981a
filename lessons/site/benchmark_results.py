"""The guide's benchmarks page: the latest run of each benchmark, read at build time.

Each benchmark script writes one Markdown file per run into its own folder,
``benchmarks/results/<script>/``, named so that the last name in sorted order
is the latest run; the file begins with a ``# title`` and a list of Date,
Machine, Commit and Command, followed by its tables. ``build.py --site`` puts
``latest_results`` in place of the line ``MARKER`` of
``lessons/guide/benchmarks.md``, so the page shows what the newest files say
and nothing that was copied by hand.

A file is shown whole, with its headings one level down (its title becomes a
section of the page), its links to other files as their text (the page is
not beside them) and its ``$`` as dollars, not mathematics.
"""

import functools
import importlib.util
import pathlib
import re

MARKER = "<!-- the latest results: lessons/build.py writes them here -->"
# The suite a user runs, in the order the page shows it, and the script of each.
SUITE = {
    "task_targets": "benchmarks/task_targets.py",
    "ablations": "benchmarks/ablations.py",
    "modern_ablation": "benchmarks/modern_ablation.py",
    "own_data": "benchmarks/own_data.py",
    "vs_pytorch": "benchmarks/vs_pytorch.py",
    "kernels": "benchmarks/kernels.py",
    "device_check": "benchmarks/device/check.py",
}
FOLDER = "benchmarks/results"  # as the page names it, from the repository's root
ROOT = pathlib.Path(__file__).resolve().parents[2]
HEADING = re.compile(r"^(#{1,6})(?=\s)")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:.+?)\1")
# A Markdown link or image, [text](target): kept as a link only when it leads to another host.
LINK = re.compile(r"!?\[([^\]]*)\]\(([^)\s]*)(?:\s+\"[^\"]*\")?\)")


def runs(folder):
    """The result files of ``folder``, oldest first (none if there is no folder),
    as the benchmarks' own refresh command finds them (benchmarks/harness/latest.py,
    which knows how a run's file is named)."""
    return _benchmarks_latest().runs(folder)


@functools.cache
def _benchmarks_latest():
    # Loaded from its path: neither lessons/ nor benchmarks/ is a package of the other.
    spec = importlib.util.spec_from_file_location(
        "benchmarks_latest", ROOT / "benchmarks" / "harness" / "latest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def title(text):
    """The title of a result file: its first ``# `` line."""
    return next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), "")


def as_section(text):
    """A result file's Markdown as a section of the page: headings one level
    down (never more than one below the heading before them, which MyST would
    refuse, nor below level 6), links to files as their text, ``$`` escaped; code left as
    written."""
    lines, in_fence, last = [], False, 1  # the page's own title is level 1
    for line in text.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence:
            heading = HEADING.match(line)
            if heading:
                last = min(len(heading.group(1)) + 1, last + 1, 6)
                line = "#" * last + line[heading.end():]
            line = outside_code(line, prose)
        lines.append(line)
    return "\n".join(lines).strip() + "\n"


def outside_code(line, change):
    """``line`` with ``change`` applied to the text between its code spans."""
    pieces, start = [], 0
    for span in CODE_SPAN.finditer(line):
        pieces += [change(line[start:span.start()]), span.group(0)]
        start = span.end()
    return "".join(pieces + [change(line[start:])])


def prose(text):
    """Text outside code: a link to a file becomes its text, a ``$`` a dollar."""
    text = LINK.sub(lambda m: m.group(0) if re.match(r"https?:", m.group(2)) else m.group(1),
                    text)
    return text.replace("$", r"\$")


def suite_section(results, name, script):
    """The section of one script of the suite: its latest run, or that none is recorded."""
    found = runs(pathlib.Path(results) / name)
    if not found:
        return (f"## `{script}`\n\nNo run is recorded: `{FOLDER}/{name}/` holds no "
                "results file.\n")
    latest = found[-1]
    where = f"From `{script}`, its only run: `{FOLDER}/{name}/{latest.name}`."
    if len(found) > 1:
        where = (f"From `{script}`, the latest of {len(found)} runs: "
                 f"`{FOLDER}/{name}/{latest.name}` (the older ones are in the same folder).")
    body = as_section(latest.read_text(encoding="utf-8"))
    if not body.startswith("## "):  # a file without its title: the page still names it
        body = f"## `{script}`\n\n{body}"
    heading, _, rest = body.partition("\n")
    return f"{heading}\n\n{where}\n{rest}"


def others_section(results):
    """The folders of the investigations (every folder that is not the suite's):
    a table of each one's latest run and title."""
    results = pathlib.Path(results)
    folders = sorted(p for p in results.iterdir() if p.is_dir() and p.name not in SUITE) \
        if results.is_dir() else []
    rows = [(folder.name, runs(folder)) for folder in folders]
    rows = [(name, found[-1]) for name, found in rows if found]
    if not rows:
        return ""
    table = "\n".join(f"| `{name}` | `{latest.name}` | {title(latest.read_text('utf-8'))} |"
                      for name, latest in rows)
    return ("## Investigations\n\nMeasurements made once to decide a question, each in "
            f"its folder of `{FOLDER}/`, with its latest run:\n\n"
            f"| folder | latest run | title |\n| --- | --- | --- |\n{table}\n")


def latest_results(results):
    """The Markdown of the page's generated part, from the folder ``results``
    (``benchmarks/results``): a section per script of the suite, then the
    investigations."""
    sections = [suite_section(results, name, script) for name, script in SUITE.items()]
    return "\n".join(sections + [others_section(results)]).rstrip("\n") + "\n"


def page(template, results):
    """The guide's benchmarks page: ``template`` (lessons/guide/benchmarks.md)
    with ``latest_results`` in place of its ``MARKER`` line."""
    if MARKER not in template:
        raise SystemExit(f"build.py: lessons/guide/benchmarks.md lacks the line {MARKER!r}, "
                         "where the latest results go")
    return template.replace(MARKER, latest_results(results))

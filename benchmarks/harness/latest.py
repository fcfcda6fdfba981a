"""The latest table of each suite script in benchmarks/README.md, kept equal
to the first table of the script's newest results file.

    python benchmarks/harness/latest.py           # rewrite the README's tables from the files
    python benchmarks/harness/latest.py --check   # exit 1 where a table differs from its file

In the README each script's latest table sits between two comments that
name the script's results folder:

    <!-- latest: task_targets -->
    Newest run: [2026-11-27-140509-abc1234.md](results/task_targets/2026-11-27-140509-abc1234.md)

    | task | ... |
    <!-- end latest -->

and everything between them is written from the newest file of
``results/task_targets/`` (its name sorts last): a link to it, then its first
Markdown table.
"""

import argparse
import pathlib
import re
import sys

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1]
README = BENCHMARKS / "README.md"
RESULTS = BENCHMARKS / "results"
RUN_NAME = re.compile(r"\d{4}-\d\d-\d\d-\d{6}-(?:[0-9a-f]{7}|unknown)\.md")
BLOCK = re.compile(r"(<!-- latest: (?P<stem>[\w-]+) -->\n)(?P<body>.*?)(<!-- end latest -->)",
                   re.S)


def runs(folder):
    """The results files of a folder, oldest first (their names sort by time)."""
    return sorted(path for path in pathlib.Path(folder).glob("*.md")
                  if RUN_NAME.fullmatch(path.name))


def newest_run(folder):
    """The latest results file of a folder; ValueError where it has none."""
    found = runs(folder)
    if not found:
        raise ValueError(f"folder: expected results files named like "
                         f"2026-11-27-140509-abc1234.md in {folder}, found none")
    return found[-1]


def first_table(text):
    """The first Markdown table of ``text`` (its lines, joined), or None."""
    lines, table = text.splitlines(), []
    for line in lines:
        if line.startswith("|"):
            table.append(line)
        elif table:
            break
    return "\n".join(table) or None


def block_body(stem, results=RESULTS):
    """What the README shows for ``stem``: a link to its newest results file
    and that file's first table."""
    path = newest_run(pathlib.Path(results) / stem)
    table = first_table(path.read_text(encoding="utf-8"))
    link = f"Newest run: [{path.name}](results/{stem}/{path.name})\n"
    return link + ("\n" + table + "\n" if table else "")


def refreshed(readme_text, results=RESULTS):
    """``readme_text`` with every latest block written from its files."""
    def body(match):
        return match.group(1) + block_body(match.group("stem"), results) + match.group(4)

    return BLOCK.sub(body, readme_text)


def stale_blocks(readme_text, results=RESULTS):
    """The stems whose block in ``readme_text`` differs from their newest file."""
    return [match.group("stem") for match in BLOCK.finditer(readme_text)
            if match.group("body") != block_body(match.group("stem"), results)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 where a table differs from its file")
    args = parser.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    stale = stale_blocks(text)
    if args.check:
        if stale:
            print(f"stale tables in {README.name}: {', '.join(stale)}; run "
                  f"python benchmarks/harness/latest.py", file=sys.stderr)
        return 1 if stale else 0
    README.write_text(refreshed(text), encoding="utf-8")
    print(f"rewritten: {', '.join(stale) or 'nothing, every table was up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

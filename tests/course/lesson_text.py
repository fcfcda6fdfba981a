"""Reading the lessons as a test reads them: a lesson's source by its number,
its cells, its Markdown prose as one line, what its executed notebook
printed, and a Markdown table's rows (``from tests.course.lesson_text import
prose``)."""

import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
LESSONS = ROOT / "lessons"
CELL_MARKER = re.compile(r"^# %%(.*)$", re.MULTILINE)


def lesson(prefix):
    """The source of the lesson whose file name starts with ``prefix``."""
    (path,) = LESSONS.glob(f"{prefix}_*.py")
    return path


def cells(prefix):
    """A lesson's cells as (kind, text): kind "markdown" or "code"; the text of a
    Markdown cell without its comment marks, lines joined by single spaces
    (so that a phrase split over two lines is still found)."""
    text = lesson(prefix).read_text(encoding="utf-8")
    markers = list(CELL_MARKER.finditer(text))
    found = []
    for marker, following in zip(markers, markers[1:] + [None]):
        body = text[marker.end():following.start() if following else len(text)]
        if "[markdown]" in marker.group(1):
            lines = [re.sub(r"^# ?", "", line) for line in body.strip().splitlines()]
            found.append(("markdown", " ".join(" ".join(lines).split())))
        else:
            found.append(("code", body.strip()))
    return found


def prose(prefix):
    """All of a lesson's Markdown text, as one line."""
    return " ".join(text for kind, text in cells(prefix) if kind == "markdown")


def outputs(prefix):
    """Everything a lesson's executed notebook printed, as one string."""
    notebook = json.loads(lesson(prefix).with_suffix(".ipynb").read_text(encoding="utf-8"))
    return "".join("".join(output.get("text", "")) for cell in notebook["cells"]
                   for output in cell.get("outputs", []) if output["output_type"] == "stream")


def table(text, header):
    """The rows (lists of cells) of the Markdown table whose header starts with
    ``header``; an escaped bar ``\\|`` stays inside its cell."""
    start = text.index(header)
    lines = []
    for line in text[start:].splitlines():
        if not line.lstrip("# ").startswith("|"):
            break
        lines.append(line.lstrip("# "))
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            for line in lines if "---" not in line]

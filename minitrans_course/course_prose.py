"""The course's own prose as one plain text: a text every clone of the
repository has, for training a small GPT on (lesson 16) and for timing one
where no other text can be downloaded (``benchmarks/text_lm.py --text
lessons``, which the device check runs)."""

import pathlib
import re


def lesson_prose(folder):
    """The text of every Markdown cell of the lesson sources in ``folder``
    (``lessons/NN_*.py``, jupytext's percent format), in the files' order,
    without the leading "# " of each line."""
    cells = []
    for source in sorted(pathlib.Path(folder).glob("[0-9][0-9]_*.py")):
        for cell in re.split(r"^# %%", source.read_text(encoding="utf-8"), flags=re.MULTILINE):
            if cell.startswith(" [markdown]"):
                lines = cell.splitlines()[1:]  # the first line is the cell's marker
                cells.append("\n".join(line[2:] for line in lines).strip())
    return "\n\n".join(cells) + "\n"

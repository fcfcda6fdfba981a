"""Statements of the lessons' text checked against what they describe.

The statements are checked against what they describe wherever the course can
compute it: the executed notebooks' printouts (lesson 2's orders of magnitude,
lesson 19's memory), minitrans itself (the warm-ups of TASK_DEFAULTS, the
absence of a separate d_v) and the stored ablation results (lesson 18's
feed-forward rows); the paper's own numbers are spelled out here. The rendering
defects of a lesson (a heading lost in a code cell, a table shown as a
paragraph, a stray "$") are caught by the site build's checks, tested in
test_site_checks.py.
"""

import dataclasses
import json
import math
import re

import minitrans
from minitrans.training import experiment
from tests.course.lesson_text import LESSONS, ROOT, cells, lesson, outputs, prose, table


def test_the_numbered_sections_of_every_lesson_follow_each_other():
    """A section whose heading sits in a code cell (a missing "# %% [markdown]")
    breaks the count: the numbered sections of every lesson run 1, 2, 3, ..."""
    for path in sorted(LESSONS.glob("[0-9][0-9]_*.py")):
        numbers = [int(n) for kind, text in cells(path.name[:2]) if kind == "markdown"
                   for n in re.findall(r"(?:^| )## (\d+)\. ", text)]
        assert numbers == list(range(1, len(numbers) + 1)), (path.name, numbers)


def test_lesson_2_says_how_many_orders_of_magnitude_its_printout_shows():
    """The Jacobian norm without the scale, d_k = 4 against 1024: 4.7 orders, not five."""
    rows = re.findall(r"^\s*(\d+) \|\s+[\d.]+\s+[\d.]+ \|\s+([\d.e+-]+)\s+[\d.e+-]+$",
                      outputs("02"), re.MULTILINE)
    norms = {int(d_k): float(norm) for d_k, norm in rows}
    orders = math.log10(norms[4] / norms[1024])
    text = prose("02")
    assert f"{orders:.1f} orders of magnitude" in text
    assert "five orders of magnitude" not in text


def test_lesson_7_says_where_each_numbering_of_the_heads_starts():
    """head_1 of the formula (counted from 1) is not the code's head 1 (counted from 0)."""
    text = prose("07")
    assert "the formula counts heads from 1" in text and "NumPy counts from 0" in text
    kinds = cells("07")
    (index,) = [n for n, (kind, body) in enumerate(kinds)
                if kind == "code" and body.startswith("i = 1\n")]
    before = kinds[index - 1][1]
    assert "\\mathrm{head}_2" in before and "W_2^Q" in before and "W_1^Q" not in before


def test_lesson_13_gives_each_tasks_default_warmup():
    """Lesson 13 gives each task's default warm-up as TASK_DEFAULTS has it."""
    text = prose("13")
    assert "(`--warmup`)" in text, "lesson 13 does not say what --warmup defaults to"
    sentence = text[text.index("(`--warmup`)"):]
    sentence = sentence[:sentence.index(". ")]
    stated, number = {}, None
    for value, task in re.findall(r"\b(\d+)\b|`([a-z]+)`|corpus of one's own", sentence):
        number = int(value) if value else number
        if not value:
            stated[task or "corpus"] = number
    expected = {task: settings["train"]["warmup"]
                for task, settings in experiment.TASK_DEFAULTS.items()}
    assert stated == expected


def test_lesson_14_writes_the_learning_rate_as_display_maths_of_its_own():
    """$$...$$ inside a list item's paragraph would show a literal $ either side."""
    text = lesson("14").read_text(encoding="utf-8")
    item = text[text.index("# 5. an Adam step"):text.index("# Here is the first batch")]
    lines = item.splitlines()
    formula = next(n for n, line in enumerate(lines) if "$$" in line)
    assert lines[formula - 1].strip() == "#", "a blank line must separate $$ from the text"


def test_lesson_18_gives_table_2s_training_cost_once_per_model():
    """The paper prints one training cost across both language pairs' columns."""
    source = lesson("18").read_text(encoding="utf-8")
    rows = table(source, "# | model | BLEU EN-DE")
    for row in rows[1:]:
        assert len(row) == len(rows[0]) == 4, row
        assert sum("10^{" in cell for cell in row) == 1, row
    assert "one cost per model, not one per pair" in prose("18")


def test_lesson_18_says_where_the_paper_gives_41_8_and_where_41_0():
    """Table 2 and the abstract: 41.8; the text of §6.1: still 41.0."""
    text = prose("18")
    assert re.search(r"Table 2 and the abstract give 41\.8 BLEU, while the text of §6\.1 "
                     r"still says 41\.0", text)
    assert "41.0 in the NeurIPS 2017 text and 41.8" not in text


def test_lesson_18_keeps_d_v_at_64_in_the_papers_b_rows():
    """In the paper's (B) only d_k narrows; d_v stays 64 (58M and 60M parameters)."""
    source = lesson("18").read_text(encoding="utf-8")
    rows = {row[0] or f"row {n}": row for n, row in
            enumerate(table(source, "# | | N | d_model | d_ff | h | d_k | d_v"))}
    header = rows["row 0"]
    d_k, d_v = header.index("d_k"), header.index("d_v")
    b_rows = [row for row in table(source, "# | | N | d_model") if row[d_k] in ("16", "32")
              and row[header.index("params ×10⁶")] in ("58", "60")]
    assert len(b_rows) == 2 and all(row[d_v] == "" for row in b_rows)
    text = prose("18")
    assert "In (A) and (B) $d_v = d_k$" not in text
    assert "In (B) only $d_k$ narrows: $d_v$ stays the base's 64" in text


def test_lesson_18_says_its_b_rows_are_another_ablation():
    """The toy rows narrow W_V and W_O too, because minitrans has one head width."""
    fields = {field.name for field in dataclasses.fields(minitrans.ModelConfig)}
    assert "d_v" not in fields, "ModelConfig has d_v now: lesson 18 can run the paper's (B)"
    text = prose("18")
    assert "As in the paper, the narrower" not in text
    assert "this is a different ablation from the paper's" in text
    assert "`ModelConfig` has no separate $d_v$" in text


def test_lesson_18_reads_the_feed_forward_rows_as_its_table_shows_them():
    """C5's mean is worse than the base's on every measure: the text must not
    call the feed-forward widths indistinguishable from the base."""
    stored = json.loads((ROOT / "benchmarks" / "results" / "ablations.json").read_text())
    rows = {row["id"]: row["mean"] for row in stored["rows"]}
    base, narrow = rows["base"], rows["C5"]
    assert narrow["ppl"] > base["ppl"] and narrow["exact_match"] < base["exact_match"]
    text = prose("18")
    bullet = text[text.index('**(C) "bigger is better"'):text.index("**(D) dropout")]
    assert "feed-forward widths cannot be told from the base" not in bullet
    assert "(C5, $d_{ff} = 128$) is worse on every measure" in bullet
    assert f"perplexity {narrow['ppl']:.3f} against {base['ppl']:.3f}" in bullet
    assert f"{narrow['exact_match']:.1%} against {base['exact_match']:.1%}" in bullet


def test_lesson_19_gives_the_memory_its_own_printout_shows():
    """The batch of 512 needs 677 GB by the lesson's estimate, not terabytes."""
    (needed,) = re.findall(r"training, batch 512 x 1024:\s+([\d.]+ [GT]B)", outputs("19"))
    summary = prose("19")[prose("19").index("## Summary"):]
    assert "terabytes" not in summary
    assert f"({needed} by the estimate above)" in summary

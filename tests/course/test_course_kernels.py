"""The course runs on minitrans's reference kernels, the versions that read as
the equations, so that what a lesson shows is what runs: every lesson chooses
its kernel set in its first code cell, and a lesson that runs anything on the
fast set says so in the text just before. Lesson 1 shows the switch."""

import re

import pytest

from tests.course.lesson_text import LESSONS, cells, outputs

SOURCES = sorted(LESSONS.glob("[0-9][0-9]_*.py"))
# minitrans.use(kernels="fast"), minitrans.using(..., kernels="fast"), ...
CHOICE = re.compile(r"minitrans\.(use|using)\([^)]*kernels=\"(fast|reference)\"")


def kernel_problems(lesson_cells):
    """What breaks the rule in a lesson given as (kind, text) cells: its first
    code cell chooses no kernel set, or a code cell chooses the fast set
    without the Markdown cell before it saying "fast kernels"."""
    code = [n for n, (kind, _) in enumerate(lesson_cells) if kind == "code"]
    if not code:
        return ["no code cell"]
    problems = []
    if not CHOICE.search(lesson_cells[code[0]][1]):
        problems.append("its first code cell does not choose a kernel set")
    for n in code:
        fast = [m for m in CHOICE.finditer(lesson_cells[n][1]) if m.group(2) == "fast"]
        before = [text for kind, text in lesson_cells[:n] if kind == "markdown"]
        if fast and not (before and "fast kernels" in before[-1]):
            problems.append(f"cell {n} runs the fast kernels without saying so just before")
    return problems


@pytest.mark.parametrize("source", SOURCES, ids=[s.stem for s in SOURCES])
def test_every_lesson_chooses_its_kernels_and_says_when_they_are_fast(source):
    assert kernel_problems(cells(source.name[:2])) == []


def test_most_lessons_run_on_the_reference_kernels():
    """The fast set is the exception: at most the few lessons that train for a
    while, or time a training step, choose it."""
    fast = [source.stem for source in SOURCES[2:]  # lesson 1 shows both sets
            if any(kind == "code" and 'kernels="fast"' in text
                   for kind, text in cells(source.name[:2]))]
    assert len(fast) <= 5, fast
    firsts = [next(text for kind, text in cells(s.name[:2]) if kind == "code") for s in SOURCES]
    on_reference = [text for text in firsts if 'kernels="reference"' in text]
    assert len(on_reference) >= len(SOURCES) - 1


def test_lesson_1_shows_the_switch():
    lesson_cells = cells("01")
    text = " ".join(text for _, text in lesson_cells)
    assert 'minitrans.use(kernels="reference")' in text
    assert 'minitrans.using(kernels="fast")' in text and "MINITRANS_KERNELS" in text
    printed = outputs("01")
    assert "active kernel set: reference" in printed and "fast" in printed


def test_the_rule_catches_a_silent_choice():
    silent = [("markdown", "A lesson."), ("code", "import minitrans")]
    assert kernel_problems(silent) == ["its first code cell does not choose a kernel set"]
    unexplained = [("code", 'minitrans.use(kernels="reference")'),
                   ("markdown", "Now we train."),
                   ("code", 'with minitrans.using(kernels="fast"):\n    train()')]
    assert kernel_problems(unexplained) == [
        "cell 2 runs the fast kernels without saying so just before"]
    explained = unexplained[:1] + [("markdown", "This trains on the fast kernels."),
                                   unexplained[2]]
    assert kernel_problems(explained) == []

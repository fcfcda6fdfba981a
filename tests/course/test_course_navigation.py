"""Navigation of the course: every lesson ends with a summary and a next step,
the next steps chain the lessons in the order of lessons/README.md, and the
README lists every lesson once, on the main path or in the appendix.

Only the plain-text lesson sources and the README are read; nothing is run."""

import collections
import pathlib
import re

import pytest
from tests.conftest import load_module

LESSONS = pathlib.Path(__file__).resolve().parents[2] / "lessons"


build = load_module(LESSONS / "build.py", "lessons_build")
SOURCES = build.lesson_sources()
README = (LESSONS / "README.md").read_text(encoding="utf-8")
PARTS = build.course_parts(README)
ORDER = [stem for _, stems in PARTS for stem in stems]  # the course order, appendix last


def last_cell(source):
    """The final cell of a jupytext percent-format lesson: (its marker line, its
    text with the comment prefix "# " taken off every line)."""
    text = source.read_text(encoding="utf-8")
    markers = list(re.finditer(r"^# %%.*$", text, flags=re.MULTILINE))
    assert markers, f"{source.name} has no cells"
    body = text[markers[-1].end() :].strip("\n")
    lines = [line[2:] if line.startswith("# ") else line.lstrip("#") for line in body.splitlines()]
    return markers[-1].group(0), "\n".join(lines)


def sections(source):
    """The final cell's "## Summary" and "## Next" sections, as text."""
    marker, cell = last_cell(source)
    assert marker == "# %% [markdown]", f"{source.name} does not end with a Markdown cell"
    match = re.fullmatch(r"## Summary\n(.*)\n## Next\n(.*)", cell, flags=re.DOTALL)
    assert match, f"{source.name}: the last cell must be '## Summary' and then '## Next'"
    return match.group(1), match.group(2)


@pytest.mark.parametrize("source", SOURCES, ids=[s.stem for s in SOURCES])
def test_every_lesson_ends_with_a_summary_and_a_next_step(source):
    summary, following = sections(source)
    bullets = re.findall(r"^\* ", summary, flags=re.MULTILINE)
    assert 3 <= len(bullets) <= 6, f"{source.name}: {len(bullets)} bullets in its summary, not 3-6"
    assert following.strip(), f"{source.name}: its Next section is empty"


def test_the_readme_lists_every_lesson_exactly_once():
    links = collections.Counter(build.LESSON_LINK.findall(README))
    assert sorted(links) == [s.stem for s in SOURCES], "lessons/README.md must link every lesson"
    assert all(count == 1 for count in links.values()), f"linked more than once: {links}"
    assert len(ORDER) == len(SOURCES), "every linked lesson belongs to a part (a '## ' table)"


def test_the_readme_has_a_main_path_and_an_appendix():
    headings = [heading for heading, _ in PARTS]
    assert len(PARTS) == 2 and headings[1].startswith("Appendix"), headings
    assert PARTS[1][1] == ["20_checking_against_pytorch", "21_data_parallelism"]


def test_the_next_steps_chain_every_lesson_in_the_readmes_order():
    """From lesson 1, following each lesson's single Next link visits every lesson
    once, in the README's order (the main path, then the appendix); the last
    lesson links none."""
    by_stem = {s.stem: s for s in SOURCES}
    for here, there in zip(ORDER, ORDER[1:] + [None]):
        _, following = sections(by_stem[here])
        links = build.LESSON_LINK.findall(following)
        assert links == ([there] if there else []), f"{here}: Next links {links}, not {there}"
        if there:
            assert (LESSONS / f"{there}.ipynb").exists(), f"{here} links a missing notebook"


def test_the_end_of_the_main_path_leads_to_the_appendix():
    last_of_main_path = PARTS[0][1][-1]
    _, following = sections(LESSONS / f"{last_of_main_path}.py")
    assert "appendix" in following.lower(), f"{last_of_main_path}'s Next must name the appendix"


def test_only_the_last_lesson_calls_itself_the_last():
    """No lesson but the last calls itself "the last lesson"."""
    for stem in ORDER[:-1]:
        text = (LESSONS / f"{stem}.py").read_text(encoding="utf-8").lower()
        assert "last lesson" not in text, f"{stem} calls itself the last lesson"


def test_the_site_gives_each_part_its_own_table_of_contents():
    index = build.site_index(README, SOURCES)
    for heading, stems in PARTS:
        block = index.split(f":caption: {heading}\n", 1)[1].split("```", 1)[0]
        assert block.split() == stems, heading


def test_the_site_refuses_a_lesson_the_readme_does_not_list(tmp_path):
    stray = tmp_path / "19_stray.ipynb"
    with pytest.raises(SystemExit, match="19_stray"):
        build.site_index(README, SOURCES + [stray])

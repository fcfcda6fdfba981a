"""The course's exercises, counted: at least 30 checkers in all, every lesson
has at least one, and every checker is used by a lesson and has a solution."""

import pathlib
import re


from minitrans_course.exercises import CHECKERS
from tests.conftest import load_module

LESSONS = pathlib.Path(__file__).resolve().parents[2] / "lessons"
build = load_module(LESSONS / "build.py", "lessons_build_for_exercises")
SOURCES = build.lesson_sources()
CALL = re.compile(r"\b(check_\w+)\(my_\w+")  # a skeleton handed to a checker
NAMES = {checker.__name__: name for name, checker in CHECKERS.items()}


def exercises_of(source):
    """The CHECKERS names of the exercises a lesson sets (its skeleton calls)."""
    return {NAMES[call] for call in CALL.findall(source.read_text()) if call in NAMES}


def test_there_are_at_least_30_exercises():
    assert len(CHECKERS) >= 30, sorted(CHECKERS)


def test_every_lesson_sets_an_exercise():
    without = [source.stem for source in SOURCES if not exercises_of(source)]
    assert not without, f"lessons without an exercise: {without}"


def test_every_checker_is_set_by_a_lesson():
    used = set().union(*(exercises_of(source) for source in SOURCES))
    assert sorted(set(CHECKERS) - used) == []


def test_the_count_finds_a_lesson_without_an_exercise(tmp_path):
    lesson = tmp_path / "99_planted.py"
    lesson.write_text("# %%\nfrom minitrans_course.exercises import check_softmax\n"
                      "check_layer(layer, x)\n")
    assert exercises_of(lesson) == set()
    lesson.write_text("# %%\ncheck_softmax(my_softmax);\n")
    assert exercises_of(lesson) == {"softmax"}

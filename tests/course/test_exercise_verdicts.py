"""What a checker's verdict tells a learner whose answer is wrong: which of
the returned results is wrong, the seed that draws the failing case again, a
missing ``return`` told apart from a list, a near miss called a matter of
precision with where precision is usually lost; and that a hint, which may
give the solution away, is folded in the stored notebooks (the website shows
them) until the learner opens it."""

import functools
import html
import json
import math
import pathlib
import re

import numpy as np
import pytest

from minitrans_course import exercise_references as ref
from minitrans_course import exercise_verdict
from minitrans_course.exercise_checker import FLOAT64_TOLERANCE, ExerciseResult
from minitrans_course.exercises import (
    CHECKERS,
    check_attention_backward,
    check_positional_encoding,
    check_softmax,
)
from minitrans_course.exercises_basics import check_linear_backward
from tests.conftest import load_module

LESSONS = pathlib.Path(__file__).resolve().parents[2] / "lessons"
SOLUTIONS = LESSONS / "solutions"


def _linear_backward():
    module = load_module(SOLUTIONS / "01_setup_and_backends.py", "solutions_01_verdicts")
    return module.linear_backward


def _dK_doubled(Q, K, V, P, dout):
    dQ, dK, dV = ref.attention_backward(Q, K, V, P, dout)
    return dQ, 2 * dK, dV


def test_the_verdict_names_the_wrong_result_of_a_backward():
    result = check_attention_backward(_dK_doubled, quiet=True, seed=0)
    assert not result.passed
    assert "dK is wrong: relative error" in result.message
    assert "(dQ and dV: right)" in result.message


def test_every_checker_of_several_results_names_them():
    """A checker whose function returns a tuple names each result; a wrong one
    is named, not "result 2 of 3"."""
    result = check_linear_backward(lambda x, W, dy: (*_linear_backward()(x, W, dy)[:2], None),
                                   quiet=True, seed=0)
    assert "db is wrong: it is None" in result.message and "(dx and dW: right)" in result.message


def test_a_failing_verdict_prints_its_seed(capsys):
    result = check_softmax(lambda z: z, seed=1234)
    out = capsys.readouterr().out
    assert not result.passed and result.seed == 1234
    assert "seed 1234 (seed=1234 draws the same cases again)" in out
    again = check_softmax(lambda z: z, quiet=True, seed=result.seed)
    assert again.case == result.case and again.rel_error == result.rel_error


def test_a_missing_return_is_told_apart_from_a_list():
    def forgot_return(z):
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        e / e.sum(axis=-1, keepdims=True)

    result = check_softmax(forgot_return, quiet=True, seed=0)
    assert "your function returned None: did you forget `return`?" in result.message
    ragged = check_softmax(lambda z: [[1.0], [2.0, 3.0]], quiet=True, seed=0)
    assert "your function returned a list that is no array: return a NumPy array" in (
        ragged.message)
    assert "returned None" not in ragged.message


def test_a_list_of_results_counts_as_the_tuple():
    """[dx, dW, db] for (dx, dW, db) is the same answer; a list of numbers for
    an array is accepted as np.asarray reads it."""
    as_list = check_linear_backward(lambda *a: list(_linear_backward()(*a)), quiet=True, seed=0)
    assert as_list.passed, as_list.message
    wrong_shape = check_softmax(lambda z: [1.0, 2.0], quiet=True, seed=0)
    assert "(your function returned a list: return a NumPy array)" in wrong_shape.message


def test_a_near_miss_is_called_a_matter_of_precision():
    def off(Q, K, V, P, dout):
        dQ, dK, dV = ref.attention_backward(Q, K, V, P, dout)
        return dQ, dK * (1 + 3 * FLOAT64_TOLERANCE), dV

    result = check_attention_backward(off, quiet=True, seed=0)
    assert "a matter of precision, not of the formula" in result.message
    assert "float32" in result.message
    far = check_attention_backward(_dK_doubled, quiet=True, seed=0)
    assert "precision" not in far.message  # ten times the tolerance and more: the maths


def _table_with_float32_frequencies(max_len, d_model):
    """The sinusoidal table, its frequencies computed in float32."""
    j = np.arange(d_model)
    frequency = np.float32(10000.0) ** (-(j - j % 2).astype(np.float32) / np.float32(d_model))
    angle = np.arange(max_len)[:, None] * frequency
    return np.where(j % 2 == 0, np.sin(angle), np.cos(angle))


def test_float32_frequencies_are_named_where_the_table_loses_precision():
    """On seeds where the float32 frequencies miss by less than ten times the
    tolerance, the verdict says where such answers lose their digits."""
    near = [check_positional_encoding(_table_with_float32_frequencies, quiet=True, seed=seed)
            for seed in range(40)]
    near = [r for r in near if not r.passed and r.rel_error < 10 * FLOAT64_TOLERANCE]
    assert near, "no seed gives a near miss"
    for result in near:
        assert "a matter of precision" in result.message
        assert "the frequencies" in result.message and "float32" in result.message


# ---- the hints, folded

def _wrong_everywhere(checker_name):
    """A failing verdict of every checker (the answer None), quietly."""
    return CHECKERS[checker_name](lambda *args: None, quiet=True, seed=0)


@functools.lru_cache(maxsize=None)
def hints():
    """{checker name: its hint}, from a failing verdict of each."""
    return {name: _wrong_everywhere(name).hint for name in CHECKERS}


def test_every_checker_gives_a_hint():
    assert all(len(hint) > 20 for hint in hints().values()), hints()


def test_the_html_verdict_folds_its_hint():
    result = _wrong_everywhere("attention_backward")
    html = exercise_verdict.as_html(result)
    before, folded = html.split("<details>", 1)
    assert "dV = P^T dout" not in before and "Hint: " not in before
    assert folded.startswith(f"<summary>{exercise_verdict.HINT_SUMMARY}</summary>")
    assert "dV = P^T dout" in folded and folded.rstrip().endswith("</details>")
    assert "not yet: case" in before and f"seed {result.seed}" in before


def test_in_a_notebook_the_verdict_is_displayed_with_its_hint_folded(monkeypatch):
    shown = []
    monkeypatch.setattr(exercise_verdict, "_notebook_display",
                        lambda: lambda bundle, raw: shown.append(bundle))
    result = _wrong_everywhere("softmax")
    exercise_verdict.show(result)
    (bundle,) = shown
    assert bundle["text/html"] == exercise_verdict.as_html(result)
    assert result.hint in bundle["text/plain"]  # what shows no HTML keeps it in full


def visible_hints(notebook, hints):
    """The hints among ``hints`` that a notebook (its JSON) shows unfolded: in a
    printed output, or in an HTML output outside a <details> block."""
    seen = []
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            if output["output_type"] == "stream":
                texts = ["".join(output["text"])]
            else:
                markup = "".join(output.get("data", {}).get("text/html", ""))
                plain = "".join(output.get("data", {}).get("text/plain", ""))
                texts = [re.sub(r"<details>.*?</details>", "", markup, flags=re.DOTALL)]
                texts += [] if markup else [plain]
            seen += [hint for hint in hints for text in texts
                     if hint in text or html.escape(hint) in text]
    return seen


NOTEBOOKS = sorted(LESSONS.glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_stored_notebook_shows_a_hint_unfolded(path):
    notebook = json.loads(path.read_text(encoding="utf-8"))
    assert visible_hints(notebook, hints().values()) == []


def test_every_lesson_shows_its_exercises_hint_folded():
    """Each stored notebook holds at least one folded hint: its exercise's."""
    for path in NOTEBOOKS:
        text = path.read_text(encoding="utf-8")
        assert f"<summary>{exercise_verdict.HINT_SUMMARY}</summary>" in text, path.name


def test_a_printed_hint_is_caught():
    hint = hints()["softmax"]
    printed = {"cells": [{"outputs": [{"output_type": "stream", "text": [f"Hint: {hint}"]}]}]}
    assert visible_hints(printed, [hint]) == [hint]
    result = ExerciseResult("softmax", False, math.inf, f"not yet. Hint: {hint}", "c", 0, hint)
    folded = {"cells": [{"outputs": [{"output_type": "display_data", "data": {
        "text/html": exercise_verdict.as_html(result), "text/plain": result.message}}]}]}
    assert visible_hints(folded, [hint]) == []
    unfolded = {"cells": [{"outputs": [{"output_type": "display_data", "data": {
        "text/html": f"<pre>{html.escape(hint)}</pre>"}}]}]}
    assert visible_hints(unfolded, [hint]) == [hint]


def test_the_lessons_markdown_folds_its_hints_too():
    """A hint written in a lesson's text sits in a <details> block."""
    for source in sorted(LESSONS.glob("[0-9][0-9]_*.py")):
        text = re.sub(r"<details>.*?</details>", "", source.read_text(encoding="utf-8"),
                      flags=re.DOTALL)
        assert not re.search(r"^# Hints?: ", text, flags=re.MULTILINE), source.name
        assert not re.search(r"\. Hints?: ", text), source.name

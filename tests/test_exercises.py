"""The exercise checkers pass the solutions and fail wrong answers."""

import pathlib

import numpy as np
import pytest
from helpers import load_module

from minitrans.tools.exercises import CHECKERS

SOLUTIONS = pathlib.Path(__file__).resolve().parents[1] / "lessons" / "solutions"


def _solution_functions():
    """{checker name: solution function} from every lessons/solutions/*.py."""
    found = {}
    for path in sorted(SOLUTIONS.glob("*.py")):
        module = load_module(path, f"solutions_{path.stem}")
        found.update({name: getattr(module, name) for name in CHECKERS if hasattr(module, name)})
    return found


FUNCTIONS = _solution_functions()


def test_every_checker_has_a_solution():
    assert sorted(FUNCTIONS) == sorted(CHECKERS)


@pytest.mark.parametrize("name", sorted(CHECKERS))
def test_the_solution_passes(name, capsys):
    result = CHECKERS[name](FUNCTIONS[name])
    assert result.passed and result.rel_error < 1e-7, result.message
    assert capsys.readouterr().out.startswith(f"{result.name}: correct")


def _scaled(function, factor):
    """A wrong answer: the right one, every output array off by a factor."""
    def wrong(*args):
        out = function(*args)
        return (
            tuple(np.asarray(o) * factor for o in out)
            if isinstance(out, tuple)
            else np.asarray(out) * factor
        )
    return wrong


@pytest.mark.parametrize("name", sorted(CHECKERS))
def test_wrong_answers_fail_with_a_hint(name, capsys):
    for wrong in (
        _scaled(FUNCTIONS[name], 1.01),
        _scaled(FUNCTIONS[name], 0.0),
        _scaled(FUNCTIONS[name], np.nan),
    ):
        result = CHECKERS[name](wrong)
        assert not result.passed
        assert "Hint" in result.message
    assert "not yet" in capsys.readouterr().out


def test_a_wrong_shape_is_reported(capsys):
    result = CHECKERS["softmax"](lambda z: z[:, :-1])
    assert not result.passed and "expected shape" in result.message

"""The ``minitrans`` command: the gradient-check report and its errors."""

import subprocess
import sys
import warnings

import pytest

from minitrans.tools import cli
from minitrans.tools.cli import main


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "minitrans", *args], capture_output=True, text=True
    )


def test_gradcheck_prints_a_table_and_exits_zero():
    result = run("gradcheck")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.startswith("layer"))
    assert header.split() == ["layer", "tensor", "shape", "rel.", "error", "result"]
    assert "FAIL" not in result.stdout
    assert sum(line.rstrip().endswith("pass") for line in lines) >= 80
    assert lines[-1].startswith("all ") and lines[-1].endswith("passed")


def test_gradcheck_on_the_strict_backend(capsys):
    assert main(["gradcheck", "--backend", "strict"]) == 0
    assert "backend strict" in capsys.readouterr().out


def test_gradcheck_exits_non_zero_when_a_check_fails(monkeypatch, capsys):
    from minitrans.tools import gradcheck_report
    from minitrans.tools.gradcheck import TensorCheck

    monkeypatch.setattr(
        gradcheck_report, "run_report", lambda name, seed: [TensorCheck("Broken", "x", (2,), 0.5)]
    )
    assert main(["gradcheck"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "1 of 1 tensors FAILED" in out


@pytest.mark.parametrize(
    "args, expected",
    [
        (["gradcheck", "--backend", "tpu"], "invalid choice: 'tpu'"),
        (["gradcheck", "--seed", "x"], "invalid int value: 'x'"),
        (["train"], "required: task"),
        (["train", "sort"], "invalid choice: 'sort'"),
        (["train", "copy", "--steps", "0"], "expected a positive integer, got 0"),
        (["train", "copy", "--dropout", "1.5"], "expected a number in [0, 1), got 1.5"),
        (["translate", "hello"], "required: --checkpoint"),
        ([], "required: command"),
    ],
)
def test_bad_arguments_give_one_line_and_a_non_zero_exit(args, expected):
    result = run(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert expected in result.stderr and "Traceback" not in result.stderr


def test_unavailable_backend_is_one_line_without_traceback(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "cupy", None)
    assert main(["gradcheck", "--backend", "cupy"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "minitrans[gpu]" in err


def test_the_command_hides_only_openblas_groundless_matmul_warning(monkeypatch):
    """The one warning OpenBLAS can raise for finite numbers (README) is not
    shown; an overflow, or any other warning, is. The filter ends with the
    command."""
    def command(args):
        warnings.warn("invalid value encountered in matmul", RuntimeWarning)
        warnings.warn("overflow encountered in matmul", RuntimeWarning)
        return 0

    monkeypatch.setitem(cli.COMMANDS, "gradcheck", command)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        filters_before = list(warnings.filters)
        assert main(["gradcheck"]) == 0
        assert warnings.filters == filters_before
    assert [str(warning.message) for warning in shown] == ["overflow encountered in matmul"]

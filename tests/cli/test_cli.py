"""The ``minitrans`` command: the gradient-check report and its errors."""

import argparse
import subprocess
import sys
import warnings

import pytest

from minitrans import gradcheck
from minitrans.cli import gradcheck as gradcheck_command
from minitrans.cli import main as cli
from minitrans.cli.main import main
from minitrans.gradcheck import TensorCheck


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
    progress = [line for line in result.stderr.splitlines()  # a line per layer check, as it ends
                if line.startswith("layer check ")]
    checks = int(lines[-1].split(" layer checks")[0].split()[-1])
    assert len(progress) == checks and progress[0].startswith("layer check 1: Linear: ")


def test_gradcheck_on_the_strict_backend(monkeypatch, capsys):
    """--backend reaches the report (which tests/library/test_gradcheck.py
    runs whole on every backend; here only the command's part is timed)."""
    asked = []
    monkeypatch.setattr(gradcheck, "run_report", lambda name, seed, **_: asked.append(name) or [
        TensorCheck("Linear", "x", (2,), 1e-12)])
    assert main(["gradcheck", "--backend", "strict"]) == 0
    assert asked == ["strict"] and "backend strict" in capsys.readouterr().out


def test_gradcheck_exits_non_zero_when_a_check_fails(monkeypatch, capsys):
    monkeypatch.setattr(
        gradcheck, "run_report", lambda name, seed, **_: [TensorCheck("Broken", "x", (2,), 0.5)]
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
    assert len(err.strip().splitlines()) == 1 and "minitrans[gpu-cuda12]" in err


def test_the_command_hides_only_openblas_groundless_matmul_warning(monkeypatch):
    """The one warning OpenBLAS can raise for finite numbers (README) is not
    shown; an overflow, or any other warning, is. The filter ends with the
    command."""
    def command(args):
        warnings.warn("invalid value encountered in matmul", RuntimeWarning)
        warnings.warn("overflow encountered in matmul", RuntimeWarning)
        return 0

    monkeypatch.setattr(gradcheck_command, "run", command)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        filters_before = list(warnings.filters)
        assert main(["gradcheck"]) == 0
        assert warnings.filters == filters_before
    assert [str(warning.message) for warning in shown] == ["overflow encountered in matmul"]


# ------------------------------------------------------------ --help, --version


def every_parser():
    """(name, parser) of the top parser and every subcommand's."""
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [("minitrans", parser), *commands.choices.items()]


@pytest.mark.parametrize("name, parser", every_parser(), ids=[name for name, _ in every_parser()])
def test_every_flag_says_what_it_means_and_its_default(name, parser):
    """The old parsers left many flags without help (train's --steps,
    --d-model..., translate's --checkpoint, --device) and none of train's
    per-task defaults was shown."""
    from minitrans.training.experiment import TASK_DEFAULTS

    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
            continue
        flag = "/".join(action.option_strings) or action.dest
        assert action.help, f"{name} {flag}: no help"
        if action.option_strings and action.dest not in ("help", "version"):
            wanted = "required" if action.required else "default"
            assert wanted in action.help, f"{name} {flag}: {action.help!r} does not say {wanted}"
        if action.default not in (None, False, argparse.SUPPRESS):
            assert f"default {action.default}" in action.help, f"{name} {flag}: {action.help!r}"
        per_task = {task: {**sections["model"], **sections["train"]}.get(action.dest)
                    for task, sections in TASK_DEFAULTS.items()}  # train: a default per task
        if name != "train" or None in per_task.values():
            continue
        if len(set(per_task.values())) == 1:  # the same for every task: said once
            assert f"(default: {per_task['copy']})" in action.help, f"{flag}: {action.help!r}"
        for task, value in per_task.items():
            label = "--data" if task == "corpus" else task  # a user's corpus
            assert f"{label} {value}" in action.help or len(set(per_task.values())) == 1, flag


def test_help_shows_per_task_defaults_and_no_backticks():
    """The old description was the module docstring's first line, with its
    reStructuredText ``minitrans``."""
    result = run("train", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())  # the formatter wraps lines
    steps = "training steps (default: copy 2000, reverse 3000, translate 3000, --data 20000, "
    assert steps in text
    top = run("--help")
    assert "``" not in top.stdout and "generate" in top.stdout and "attention" in top.stdout


def test_version():
    """There was no --version."""
    import minitrans

    result = run("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"minitrans {minitrans.__version__}"


# ------------------------------------------------------------ progress


def test_without_a_terminal_no_bar_but_a_training_line_per_evaluation(tmp_path):
    """Standard error to a file (not a terminal): the old command drew tqdm's
    bar there anyway, a carriage-return line per update."""
    with open(tmp_path / "stderr.txt", "w") as stderr:
        result = subprocess.run(
            [sys.executable, "-m", "minitrans", "train", "copy", "--steps", "4", "--eval-every",
             "2", "--out", str(tmp_path / "run"), "--d-model", "16", "--heads", "2", "--layers",
             "1", "--d-ff", "32"], stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=300)
    assert result.returncode == 0
    assert b"\r" not in (tmp_path / "stderr.txt").read_bytes()  # text mode would hide it
    lines = result.stdout.splitlines()
    for step in (2, 4):
        training = next(i for i, line in enumerate(lines) if line.startswith(f"step {step}: train"))
        assert lines[training].endswith("tok/s") and ", lr " in lines[training]
        assert lines[training + 1].startswith(f"step {step}: held-out loss")


def test_a_training_line_sums_up_its_interval():
    from minitrans.training.run_files.progress import TrainingLine

    interval = TrainingLine()
    interval.add(2.0, 100, 0.5)
    interval.add(1.0, 300, 0.5)
    assert interval.line(2, 1e-3) == "step 2: training loss 1.5000, lr 1.00e-03, 400 tok/s"
    interval.add(0.5, 10, 1.0)
    assert interval.line(3, 1e-3).startswith("step 3: training loss 0.5000")

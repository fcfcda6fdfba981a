"""The scratch investigations of benchmarks/dev/, smoke-tested only: each
still runs on today's code and prints its table. What they measured is in
benchmarks/results/ and is not checked here."""

import os
import pathlib
import subprocess
import sys

DEV = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "dev"
REPO = DEV.parents[1]


def load(monkeypatch, name):
    """A dev script imported as it runs: its own folder first on sys.path."""
    monkeypatch.syspath_prepend(str(DEV))
    return __import__(name)


def test_the_step_breakdown_splits_the_tiny_step(monkeypatch, capsys):
    import minitrans

    step_breakdown = load(monkeypatch, "step_breakdown")
    with minitrans.using("numpy", dtype="float32"):  # the script sets them; restored after
        step_breakdown.main(["--configs", "tiny", "--steps", "2", "--rounds", "2"])
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| tiny | ") and "ms (" in line)
    assert len(row.strip("|").split("|")) == 10 and "Streaming bandwidth" in out


def test_ab_steps_times_one_checkout_against_itself():
    run = subprocess.run([sys.executable, str(DEV / "ab_steps.py"), str(REPO), str(REPO),
                          "--configs", "tiny", "--rounds", "1"], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode == 0, run.stderr[-2000:]
    cells = [cell.strip() for cell in run.stdout.strip().splitlines()[-1].strip("|").split("|")]
    assert cells[0] == "tiny" and cells[1].endswith(" ms") and float(cells[3]) > 0


def test_the_finetune_step_times_a_small_model_of_gpt2s_kind(monkeypatch, capsys):
    finetune_step = load(monkeypatch, "finetune_step")
    shape = {**finetune_step.GPT2_SMALL, "vocab_size": 300, "d_model": 32, "h": 4, "N": 2,
             "d_ff": 64, "max_len": 16}
    finetune_step.main(["--steps", "2", "--block-size", "8"], shape=shape)
    out = capsys.readouterr().out
    assert "step 2: " in out and "median step (after the first): " in out

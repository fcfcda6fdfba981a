"""The example scripts run as their docstrings say (short smoke runs)."""

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def run(args, cwd, timeout=300):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    result = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.parametrize("script, out_dir", [("train_copy.py", "example-copy"),
                                             ("train_translation.py", "example-translation")])
def test_training_example_runs_and_writes_its_figures(tmp_path, script, out_dir):
    output = run([str(EXAMPLES / script), "--steps", "20"], cwd=tmp_path)
    assert "exact match" in output
    written = {path.name for path in (tmp_path / "runs" / out_dir).iterdir()}
    assert {"checkpoint.npz", "loss.png", "attention.png"} <= written


@pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                    reason="PyTorch is not installed: pip install \".[torch]\"")
@pytest.mark.parametrize("processes", [1, 2])
def test_continuing_in_pytorch_with_distributed_data_parallel(tmp_path, processes):
    """A minitrans checkpoint goes to PyTorch, trains there (two processes:
    DistributedDataParallel over gloo) and comes back as a checkpoint that
    the command line reads."""
    run(
        ["-m", "minitrans.cli.main", "train", "copy", "--steps", "20", "--out", "first"],
        cwd=tmp_path,
    )
    script = [str(EXAMPLES / "continue_in_pytorch.py"), "first/checkpoint.npz", "--steps", "5",
              "--out", "second.npz"]
    if processes > 1:
        script = [
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={processes}",
            *script,
        ]
    output = run(script, cwd=tmp_path)
    assert f"on {processes} process(es)" in output
    assert "back in minitrans after 25 steps" in output
    translated = run(
        ["-m", "minitrans.cli.main", "translate", "--checkpoint", "second.npz", "1 2 3"],
        cwd=tmp_path,
    )
    assert translated.strip()

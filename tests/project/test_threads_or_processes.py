"""benchmarks/threads_or_processes.py: its shards are DataParallel's, its
report divides what it measured, and a smoke run of the tiny config runs
both sides end to end. Its speed figures come from running it, never from
here."""

import pathlib
import subprocess
import sys

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from threads_or_processes import parse_args, report, shard_size  # noqa: E402

from minitrans.model.replicas import shard_bounds  # noqa: E402


@pytest.mark.parametrize("batch, workers", [(64, 2), (80, 3), (5, 4), (16, 1)])
def test_the_shards_are_those_of_data_parallel(batch, workers):
    sizes = [shard_size(batch, workers, shard) for shard in range(workers)]
    assert sizes == [stop - start for start, stop in shard_bounds(batch, workers)]


def test_the_report_divides_threads_by_processes():
    text = report({"copy": {"threads": 0.566, "processes": 0.5, "alone": 0.4}}, workers=2)
    assert "| copy | 566 ms | 500 ms | 1.13 | 400 ms | 1.25 |" in text
    assert "2 worker threads, one process | 2 processes side by side" in text.splitlines()[0]


@pytest.mark.parametrize("argv, message", [
    (["--configs", "huge"], "--configs: unknown ['huge']"),
    (["--workers", "0"], "--workers: expected a number >= 1, got 0"),
    (["--pause", "-1"], "--pause: expected a number >= 0, got -1.0"),
])
def test_bad_options_are_named(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_a_quick_run_times_both_sides():
    run = subprocess.run([sys.executable, str(BENCHMARKS / "threads_or_processes.py"), "--quick",
                          "--pause", "0"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    row = next(line for line in run.stdout.splitlines() if line.startswith("| tiny |"))
    threads, processes, ratio, alone, slowdown = (
        cell.strip() for cell in row.strip("|").split("|")[1:])
    assert threads.endswith(" ms") and processes.endswith(" ms") and alone.endswith(" ms")
    assert float(ratio) == pytest.approx(float(threads[:-3]) / float(processes[:-3]), abs=0.1)
    assert float(slowdown) == pytest.approx(float(processes[:-3]) / float(alone[:-3]), abs=0.1)

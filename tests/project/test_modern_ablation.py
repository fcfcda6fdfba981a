"""benchmarks/modern_ablation.py, whose stored results lesson 22 reads: every
row's d_ff brings its parameter count to the 2017 block's within what one
unit of d_ff moves it, the JSON holds every run, its means and spreads and
the loss curves, the results file its table, flags are refused in one line,
and the stored results are those of the rows the script defines."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
STORED = BENCHMARKS / "results" / "modern_ablation.json"


@pytest.fixture()
def modern_ablation(monkeypatch):
    # the script sets OMP_NUM_THREADS when imported: restored after the test
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import modern_ablation

    return modern_ablation


def test_every_row_has_the_2017_blocks_parameter_budget(modern_ablation):
    from minitrans.data.tasks import load_task

    task = load_task("lm", seed=0)
    budget = modern_ablation.row_config(task, {}).parameter_count()
    for row_id, _, changes in modern_ablation.ROWS:
        config = modern_ablation.row_config(task, changes)
        assert all(getattr(config, key) == value for key, value in changes.items()), row_id
        # one unit of d_ff is worth N (3 d_model + 2 or 2 d_model + 1) parameters
        step = config.N * ((3 if config.activation == "swiglu" else 2) * config.d_model + 2)
        assert abs(config.parameter_count() - budget) <= step // 2 + 1, row_id
    today = modern_ablation.row_config(task, modern_ablation.TODAY)
    assert today.kv_heads == 2 and today.norm == "rms" and today.positions == "rope"
    assert today.activation == "swiglu" and today.d_ff < modern_ablation.BASE["d_ff"]


def test_a_short_run_writes_its_runs_means_and_curves(modern_ablation, tmp_path, capsys,
                                                      monkeypatch):
    monkeypatch.setattr(modern_ablation, "CURVE_EVERY", 2)
    out = tmp_path / "m.json"
    args = ["--rows", "today,2017", "--steps", "3", "--seeds", "2", "--eval-pairs", "20",
            "--out", str(out), "--results", str(tmp_path / "results")]
    assert modern_ablation.main(args) == 0
    stored = json.loads(out.read_text(encoding="utf-8"))
    assert [row["id"] for row in stored["rows"]] == ["2017", "today"]  # ROWS's order
    assert stored["setup"]["training"]["steps"] == 3 and stored["seconds"] > 0
    for row in stored["rows"]:
        assert [run["seed"] for run in row["runs"]] == [0, 1]
        for key in ("loss", "exact_match", "seconds"):
            values = [run[key] for run in row["runs"]]
            assert row["mean"][key] == pytest.approx(sum(values) / 2)
            assert row["spread"][key] == pytest.approx((max(values) - min(values)) / 2)
        assert [step for step, _ in row["curve"]] == [2, 3]
        assert row["curve"][-1][1] == pytest.approx(row["mean"]["loss"])
    (written,) = (tmp_path / "results").glob("*.md")
    table = written.read_text(encoding="utf-8")
    assert table.startswith("# The 2017 block against today's") and stored["machine"] in table
    assert "| today |" in capsys.readouterr().out and "| today |" in table
    with pytest.raises(SystemExit):  # an existing file is not overwritten without --force
        modern_ablation.main(args)


@pytest.mark.parametrize("flags, message", [
    (["--rows", "1999"], "--rows: expected ids from"),
    (["--seeds", "0"], "--seeds: invalid int >= 1 value: '0'"),
])
def test_bad_flags_are_refused_in_one_line(flags, message):
    run = subprocess.run([sys.executable, str(BENCHMARKS / "modern_ablation.py"), *flags],
                         capture_output=True, text=True, timeout=120)
    last = run.stderr.strip().splitlines()[-1]
    assert run.returncode == 2 and message in last and "Traceback" not in run.stderr


def test_the_stored_results_are_the_scripts_rows(modern_ablation):
    stored = json.loads(STORED.read_text(encoding="utf-8"))
    assert [row["id"] for row in stored["rows"]] == [row[0] for row in modern_ablation.ROWS]
    assert stored["setup"]["seeds"] == 3 and stored["setup"]["task"] == "lm"
    assert len({row["parameters"] for row in stored["rows"]}) > 1  # matched, not equal
    assert all(len(row["runs"]) == 3 for row in stored["rows"])

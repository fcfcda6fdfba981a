"""The GPU check (``benchmarks/device/check.py``), proven on a CPU: it
refuses at once, in one line, where no GPU can work; its loss comparison
fails on a wrong answer; the per-test time limit of ``tests/conftest.py``
fails a test that runs past it; ``-m cupy`` picks the CuPy leg and nothing
else; a section past its limit is stopped; a report is filed under the name
of a results file; the targets table says met, not met or not measured from
the numbers the sections read; and the rehearsal runs every section end to
end into one report that begins as every results file does.

The rehearsal's section 7 is vs_pytorch.py's smoke run, with its tuned and
untuned workers, and its section 9 text_lm.py's run at tiny sizes on the
strict backend: the suite's end-to-end tests of those scripts too.
"""

import datetime
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from minitrans.core import backend

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCHMARKS = os.path.join(REPO, "benchmarks")
DEVICE = os.path.join(BENCHMARKS, "device")
sys.path[:0] = [DEVICE, BENCHMARKS]  # as the check runs: its folder, then the harness

import backend_agreement  # noqa: E402
import check  # noqa: E402
import model_runs  # noqa: E402
import parsing  # noqa: E402
import sections  # noqa: E402
import targets  # noqa: E402
import text_section  # noqa: E402
from commands import run_command  # noqa: E402

from harness import results  # noqa: E402
from harness.report import report  # noqa: E402

SCRIPT = os.path.join(DEVICE, "check.py")
ON_A_GPU = "cupy" in backend.available_backends()

# A CuPy that is installed but finds no device, as CuPy says it on a machine
# without one.
NO_DEVICE_CUPY = {
    "cupy/__init__.py": "from cupy import cuda\n",
    "cupy/cuda/__init__.py": "from cupy.cuda import runtime\n",
    "cupy/cuda/runtime.py": (
        "class CUDARuntimeError(RuntimeError):\n    pass\n\n\n"
        "def getDeviceCount():\n"
        "    raise CUDARuntimeError('cudaErrorNoDevice: no CUDA-capable device is detected')\n"
    ),
}


def run_check(out_dir, *flags, pythonpath=None, timeout=60):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [pythonpath, REPO])))
    start = time.perf_counter()
    run = subprocess.run([sys.executable, SCRIPT, str(out_dir), *flags], capture_output=True,
                         text=True, timeout=timeout, env=env)
    return run, time.perf_counter() - start


def assert_refused_in_one_line(run, seconds, out_dir, *words):
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and seconds < 20, (run.returncode, seconds, run.stderr)
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert lines[0].startswith("device_check: no usable GPU: ")
    for word in words:
        assert word in lines[0], lines[0]
    written = (out_dir / "device-check.md").read_text()
    assert "no usable GPU" in written and lines[0].split(": ", 2)[2] in written


# ------------------------------------------------------------ no GPU


@pytest.mark.skipif(ON_A_GPU, reason="a GPU is here: the check would run")
def test_without_cupy_the_check_refuses_at_once_in_one_line(tmp_path):
    run, seconds = run_check(tmp_path / "out")
    assert_refused_in_one_line(run, seconds, tmp_path / "out", "CuPy", "not installed")


def test_with_cupy_but_no_device_the_check_refuses_at_once_in_one_line(tmp_path):
    for name, text in NO_DEVICE_CUPY.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    run, seconds = run_check(tmp_path / "out", pythonpath=str(tmp_path))
    assert_refused_in_one_line(run, seconds, tmp_path / "out", "cudaErrorNoDevice")


@pytest.mark.parametrize("make", ["file", "inside-a-file"])
def test_an_out_dir_that_cannot_be_a_folder_is_one_line(tmp_path, make):
    """A file given as OUT_DIR ended in makedirs' traceback."""
    (tmp_path / "file").write_text("not a folder\n")
    out_dir = tmp_path / "file" if make == "file" else tmp_path / "file" / "out"
    run, _ = run_check(out_dir, "--rehearse")
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert lines[0].startswith(f"device_check: {out_dir}: "), lines[0]
    assert (tmp_path / "file").read_text() == "not a folder\n"


# ------------------------------------------------------------ losses


def test_the_loss_comparison_fails_on_a_wrong_answer():
    losses = backend_agreement.training_losses("numpy", steps=5)
    assert backend_agreement.compare_series(losses, losses)["passed"]
    close = [loss * (1 + 5e-4) for loss in losses]
    assert backend_agreement.compare_series(losses, close)["passed"]
    wrong = list(losses)
    wrong[3] *= 1.01  # one step off by 1%: beyond the float32 tolerance of 1e-3
    found = backend_agreement.compare_series(losses, wrong)
    assert not found["passed"] and found["worst_step"] == 4
    assert found["worst"] == pytest.approx(0.01, rel=1e-6)
    assert not backend_agreement.compare_series(losses, losses[:-1])["passed"]
    assert not backend_agreement.compare_series(losses, [float("nan")] * 5)["passed"]


# ------------------------------------------------------------ conftest


def test_the_time_limit_fails_a_test_that_runs_past_it(tmp_path):
    shutil.copy(os.path.join(REPO, "tests", "conftest.py"), tmp_path)
    (tmp_path / "test_sleepy.py").write_text(
        "import time\n\n\ndef test_sleeps_long():\n    time.sleep(60)\n\n\n"
        "def test_sleeps_a_second():\n    time.sleep(1)\n\n\ndef test_quick():\n    pass\n")
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-c", os.devnull,
               "--rootdir", str(tmp_path), str(tmp_path / "test_sleepy.py")]
    env = dict(os.environ, PYTHONPATH=REPO, MINITRANS_TEST_TIMEOUT="0.5")
    start = time.perf_counter()
    limited = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert time.perf_counter() - start < 30  # the minute's sleep was cut short
    assert limited.returncode == 1 and "2 failed, 1 passed" in limited.stdout, limited.stdout
    message = "ran longer than the time limit of 0.5 s per test (MINITRANS_TEST_TIMEOUT)"
    assert limited.stdout.count(message) >= 2, limited.stdout
    del env["MINITRANS_TEST_TIMEOUT"]  # unset: no limit, the second's sleep passes
    unlimited = subprocess.run(command + ["-k", "not long"], capture_output=True, text=True,
                               timeout=60, env=env)
    assert unlimited.returncode == 0 and "2 passed" in unlimited.stdout, unlimited.stdout


def test_marker_cupy_selects_the_cupy_leg_and_nothing_else():
    files = [f"tests/library/test_{name}.py" for name in ("linear", "backend", "decoding")]

    def collected(*flags):
        run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                              "-p", "no:cacheprovider", *flags, *files], cwd=REPO,
                             capture_output=True, text=True, timeout=120)
        return [line for line in run.stdout.splitlines() if "::" in line]

    every = collected()
    legs = [node for node in every if "[cupy" in node or "-cupy" in node]
    selected = collected("-m", "cupy")
    explicit = ("tests/library/test_backend.py::"
                "test_same_seed_gives_the_same_weights_on_every_backend")
    assert legs and sorted(selected) == sorted(legs + [explicit])


# ------------------------------------------------------------ the script's parts


def test_a_section_past_its_limit_is_stopped():
    outcome = run_command([sys.executable, "-c", "import time; print('started', flush=True); "
                           "time.sleep(60)"], limit=1)
    assert outcome.timed_out and outcome.returncode is None and outcome.seconds < 10
    assert outcome.stdout.strip() == "started"


def test_the_readers_take_output_cut_anywhere():
    cut = ("tests/test_a.py::test_one[cupy] PASSED\n"
           "tests/test_a.py::test_two[cupy] FAILED\n"
           "tests/test_a.py::test_three[cupy] SKIPPED (no GPU)\n"
           "tests/test_b.py::test_hangs[cupy] ")
    counts, seconds, complete = parsing.pytest_counts(cut)
    assert (counts["passed"], counts["failed"], counts["skipped"], complete) == (1, 1, 1, False)
    assert parsing.pytest_failures(cut) == [("tests/test_a.py::test_two[cupy]", "")]
    assert parsing.pytest_last_started(cut) == "tests/test_b.py::test_hangs[cupy]"
    whole = cut + "\nFAILED tests/test_a.py::test_two[cupy] - AssertionError: 1 != 2\n" \
        "=== 1 failed, 1 passed, 1 skipped, 9 deselected in 3.50s ==="
    counts, seconds, complete = parsing.pytest_counts(whole)
    assert (counts["deselected"], seconds, complete) == (9, 3.5, True)
    assert parsing.pytest_failures(whole) == [
        ("tests/test_a.py::test_two[cupy]", "AssertionError: 1 != 2")]
    table = "layer  tensor  shape  rel. error  result\nLinear (no bias)  W  (4, 5)  2.7e-12  pass"
    assert parsing.gradcheck_rows(table) == [("Linear (no bias)", "W", "(4, 5)",
                                                     2.7e-12, True)]
    progress = ("layer check 1: Linear: 3 tensors pass, worst 5.8e-12, 0.4 s\n"
                "layer check 2: Add & Norm (pre-norm): 1 tensor FAIL, worst 2.0e-03, 9.5 s\n"
                "layer check 3: Transf")
    checks = parsing.gradcheck_progress(progress)
    assert checks == [(1, "Linear", 3, True, 5.8e-12, 0.4),
                      (2, "Add & Norm (pre-norm)", 1, False, 2.0e-3, 9.5)]
    assert sections.gradcheck_progress_numbers(checks) == [
        "2 layer checks ended (4 tensors) in 10 s, the last `Add & Norm (pre-norm)`: "
        "1 failed (Add & Norm (pre-norm)); worst relative error 2.0e-03"]


def test_a_report_is_filed_under_the_name_of_a_results_file(tmp_path, monkeypatch):
    report_path = tmp_path / "device-check.md"
    report_path.write_text("# minitrans device check: NVIDIA H200\n", encoding="utf-8")
    monkeypatch.setattr(results, "RESULTS", tmp_path / "results")
    monkeypatch.setenv("MINITRANS_COMMIT", "8bd1e9d")
    began = datetime.datetime(2026, 11, 27, 15, 46, 9, tzinfo=datetime.timezone.utc)
    filed = check.file_report(str(report_path), began)
    assert filed == tmp_path / "results" / "device_check" / "2026-11-27-154609-8bd1e9d.md"
    assert filed.read_text(encoding="utf-8") == report_path.read_text(encoding="utf-8")


def test_vs_pytorch_reports_a_gpu_run_in_the_gpu_terms():
    memory = {"minitrans": {"peak_rss": 1, "device_bytes": 300 * 2**20},
              "torch": {"peak_rss": 1, "device_bytes": 200 * 2**20}}
    results = {"peak_flops": 50e12, "machine": {
        "date": "2026-11-26", "gpu": "NVIDIA H100 80GB HBM3 (79 GiB); CUDA 13.0", "cpu": "x",
        "cores": 16, "threads": 2, "python": "3.12.3", "numpy": "2.5.2", "device": "gpu"},
        "configs": {"tiny": {"times": {"minitrans": [0.02], "torch": [0.01]}, "memory": memory,
                             "profile": {"matmul_flops": None, "matmul_seconds": None}}}}
    text = report(results)
    assert text.startswith("2026-11-26, NVIDIA H100 80GB HBM3") and "50.0 TFLOP/s" in text
    assert "peak GPU memory held minitrans / PyTorch" in text
    assert "| tiny | 20 ms | 10 ms | 2.00 | n/a |" in text and "300 / 200 MB (1.50)" in text


# ------------------------------------------------------------ the targets

# What the sections read on a machine where every target is met.
MET_EVERYWHERE = {
    "steps": {"tiny": (0.006, 0.010), "small": (0.0069, 0.010), "base": (0.020, 0.020),
              "copy": (0.010, 0.015), "llama": (0.019, 0.020)},
    "memory": {"tiny": (28 * 2**20, 110 * 2**20), "copy": (370 * 2**20, 394 * 2**20)},
    "train": {"gpu": 12.0, "cpu": 15.0, "cpu_reached": True},
    "decoding": {"cached": 0.15, "recomputed": 0.60, "torch": 0.17},
    "launches": {"step": 300, "token": 40, "step_budget": 366, "token_budget": 46},
    "fused": {"passed": ["adam_update", "layer_norm"], "failed": []},
    "text": {"steps": (0.050, 0.060), "held_out": (1.80, 1.83), "gap_allowed": 0.05},
}


def verdicts(measured):
    return {row[0]: row[2] for row in targets.rows(measured)}


def test_the_targets_table_says_met_for_numbers_that_meet_every_target():
    text = targets.table(MET_EVERYWHERE)
    assert text.startswith("Targets: 14 met, 0 not met, 0 not measured, of 14.")
    assert set(verdicts(MET_EVERYWHERE).values()) == {"met"}
    assert "| vs_pytorch tiny: step time / PyTorch CUDA eager's <= 0.7 | 0.60 (6.0 / 10.0 ms)" \
           " | met |" in text
    assert "| greedy decoding: minitrans recomputing / with the cache >= 3 | 4.0x" in text
    assert "worst 0.94 (copy: 370 / 394 MB) of 2 configs | met |" in text
    assert ("| nanoGPT's GPU recipe: minitrans's step <= the twin's | 0.83 (50.0 / 60.0 ms) "
            "| met |") in text
    assert ("| nanoGPT's GPU recipe: held-out losses within 0.05 nats of the twin's | 0.0300 "
            "(1.8000 / 1.8300) | met |") in text


@pytest.mark.parametrize("key, planted, target", [
    ("steps", {"tiny": (0.0071, 0.010)}, "vs_pytorch tiny"),  # 0.71 > 0.7
    ("steps", {"base": (0.0201, 0.020)}, "vs_pytorch base"),  # 1.005 > 1.0
    ("memory", {"base": (829 * 2**20, 828 * 2**20)}, "peak GPU memory"),
    ("train", {"gpu": 15.0, "cpu": 15.0, "cpu_reached": True}, "`train copy`"),
    ("decoding", {"cached": 0.18, "recomputed": 0.60, "torch": 0.17},
     "greedy decoding with the cache / PyTorch"),
    ("decoding", {"cached": 0.15, "recomputed": 0.44, "torch": 0.17},
     "greedy decoding: minitrans recomputing"),
    ("launches", {"step": 367, "token": 40, "step_budget": 366, "token_budget": 46},
     "launches of a tiny training step"),
    ("launches", {"step": 300, "token": 47, "step_budget": 366, "token_budget": 46},
     "launches of a decoded token"),
    ("fused", {"passed": ["layer_norm"], "failed": ["adam_update"]}, "fused = reference"),
    ("text", {"steps": (0.0601, 0.060)}, "nanoGPT's GPU recipe: minitrans's step"),
    ("text", {"held_out": (1.80, 1.8501)}, "nanoGPT's GPU recipe: held-out losses"),
    ("text", {"held_out": (float("nan"), 1.83)}, "nanoGPT's GPU recipe: held-out losses"),
])
def test_one_number_past_its_target_is_that_target_not_met_alone(key, planted, target):
    measured = {**MET_EVERYWHERE, key: {**MET_EVERYWHERE[key], **planted}}
    found = verdicts(measured)
    missed = [name for name, word in found.items() if word != "met"]
    assert len(missed) == 1 and missed[0].startswith(target), found
    assert found[missed[0]] == "**not met**"
    assert "Targets: 13 met, 1 not met, 0 not measured" in targets.table(measured)


def test_a_target_without_its_number_is_not_measured_never_met():
    measured = {key: value for key, value in MET_EVERYWHERE.items()
                if key not in ("decoding", "launches")}
    measured["steps"] = {k: v for k, v in MET_EVERYWHERE["steps"].items() if k != "llama"}
    measured["skipped"] = {"llama": "transformers is not installed"}
    found = targets.rows(measured)
    unmeasured = [row for row in found if row[2] == "not measured"]
    assert len(unmeasured) == 5 and unmeasured[0][1] == "(transformers is not installed)"
    assert targets.table({}).startswith("Targets: 0 met, 0 not met, 14 not measured")
    stopped = {**MET_EVERYWHERE, "train": {"gpu": 12.0, "cpu": 30.0, "cpu_reached": False}}
    assert verdicts(stopped)[targets.train_row(stopped)[0]] == "met"
    assert "the CPU not at 100% after 30.0 s" in targets.train_row(stopped)[1]


def test_the_sections_read_their_numbers_for_the_targets():
    output = ("tests/library/test_kernels.py::test_device_equals_reference[cupy-adam_update-"
              "float64] PASSED\n"
              "tests/library/test_kernels.py::test_device_equals_reference[cupy-adam_update-"
              "float32] FAILED\n"
              "tests/library/test_kernels.py::test_device_equals_reference[cupy-layer_norm-"
              "float64] PASSED\n"
              "tests/library/test_kernels.py::test_fast_equals_reference[cupy-sigmoid-"
              "float64] PASSED\n")
    fused = sections.fused_pairs(output)
    assert fused == {"passed": ["layer_norm"], "failed": ["adam_update"]}
    assert sections.fused_line(fused) == ("fused = reference on the device: 1 pairs passed, "
                                          "1 failed (adam_update)")
    raw = {"configs": {"tiny": {"times": {"minitrans": [0.03, 0.01, 0.02], "torch": [0.01]},
                                "memory": {"minitrans": {"device_bytes": 3},
                                           "torch": {"device_bytes": 4}}},
                       "small": {"times": {"minitrans": [0.03], "torch": [0.01]},
                                 "memory": {"minitrans": {}, "torch": {}}}},
           "skipped": {"llama": "no transformers"},
           "decoding": {"cached": [0.5, 0.2], "recomputed": [0.9, 0.8], "torch": [0.3, 0.4]}}
    numbers = model_runs.training_numbers(raw)
    assert numbers == {"steps": {"tiny": (0.02, 0.01), "small": (0.03, 0.01)},
                       "memory": {"tiny": (3, 4)}, "skipped": {"llama": "no transformers"}}
    assert model_runs.decoding_times(raw) == {"cached": 0.2, "recomputed": 0.8, "torch": 0.3}
    assert model_runs.decoding_times({"configs": {}}) is None


# ------------------------------------------------------------ nanoGPT's GPU recipe

# text_lm.py's RESULT numbers of a run, as section 9 reads them
TEXT_FOUND = {"steps": 200, "warm": 5, "dropout": 0.2, "eval_windows": 100, "gap_allowed": 0.05,
              "setup": "the Markdown prose of the lessons: ...",
              "minitrans": {"step_ms": 50.0, "tokens_per_s": 327680.0, "wall_s": 10.4,
                            "loss": 1.80, "train_loss": 1.70},
              "twin": {"step_ms": 60.0, "tokens_per_s": 273066.7, "wall_s": 12.2,
                       "loss": 1.83, "train_loss": 1.71}}


def test_the_text_section_reads_its_numbers_and_fails_on_a_loss_that_is_not_finite():
    assert text_section.measured_numbers(TEXT_FOUND) == {
        "steps": (0.05, 0.06), "held_out": (1.80, 1.83), "gap_allowed": 0.05}
    result = text_section.text_result(TEXT_FOUND)
    assert result.status == "passed" and result.numbers[0].startswith(
        "median step after 5 warm-up steps: minitrans 50.0 ms, PyTorch 60.0 ms "
        "(minitrans / PyTorch 0.83)")
    assert "gap 0.0300, allowed 0.05" in result.numbers[1]
    assert "masks of their own" in result.details
    for side, key in (("minitrans", "train_loss"), ("twin", "loss")):
        planted = {**TEXT_FOUND, side: {**TEXT_FOUND[side], key: float("nan")}}
        failed = text_section.text_result(planted)
        assert failed.status == "FAILED" and "not finite" in failed.why


def test_a_failing_text_section_is_failed_and_the_check_goes_on(monkeypatch):
    """A text_lm.py that exits at once with an error (its --steps 0,
    planted): the section is FAILED, saying why, its targets not measured,
    and the section after it, the test suite's (one quick test), still runs
    and passes."""
    pytest.importorskip("torch", reason="PyTorch is not installed: the section is skipped")
    monkeypatch.setitem(text_section.FLAGS, True, text_section.FLAGS[True] + ["--steps", "0"])
    monkeypatch.setattr(sections, "REHEARSAL_TESTS", [
        "tests/library/test_linear.py::test_no_bias_layer_has_only_W"])
    measured, reports = {}, []
    outcomes, interrupted = check.run_sections(sections.Mode(rehearsal=True), 120,
                                               ["text", "pytest"], reports.append, measured)
    assert not interrupted and len(reports) == 2
    assert outcomes["text"].status == "FAILED", outcomes["text"]
    assert "text_lm.py exited with status 2" in outcomes["text"].why
    assert "--steps: expected at least 1, got 0" in outcomes["text"].why
    assert outcomes["pytest"].status == "passed", outcomes["pytest"]
    assert "text" not in measured
    assert verdicts(measured)["nanoGPT's GPU recipe: minitrans's step <= the twin's"] == \
        "not measured"


# ------------------------------------------------------------ end to end


def test_the_rehearsal_runs_every_section_into_one_report(tmp_path):
    run, seconds = run_check(tmp_path, "--rehearse", timeout=240)
    written = (tmp_path / "device-check.md").read_text()
    assert run.returncode in (0, 1) and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert run.stdout.strip() == f"report: {tmp_path / 'device-check.md'}"
    assert written.startswith("# minitrans device check: rehearsal on the CPU\n\n- Date: ")
    for field in ("- Machine: host ", "- Commit: ",
                  "- Command: `python benchmarks/device/check.py "):
        assert f"\n{field}" in written.split("\n| # |")[0]
    for number, key in enumerate(["Environment report", "CuPy leg of the test suite",
                                  "Gradient check", "20 training steps", "copy task",
                                  "Greedy decoding", "against PyTorch", "Kernel launches",
                                  "nanoGPT's GPU recipe"], 1):
        assert f"\n## {number}. " in written and key in written.split(f"\n## {number}. ")[1]
    head = written.split("\n| # |")[0]
    assert "\nTargets: " in head and "| target | measured | verdict |" in head
    parts = written.split("\n## ")[1:]
    assert len(parts) == 9 and all("Status: " in part for part in parts)
    assert all("Status: passed" in part for part in parts[1:6] + parts[7:8]), written[:3000]
    assert "every tensor" in parts[2] and "| 20 |" in parts[3]
    assert "fused = reference on the device: " in parts[1] and " 0 pairs" not in parts[1]
    assert "--device cpu on this machine: 100% in " in parts[4]
    assert "a tiny training step: " in parts[7] and "| launches of a decoded token <= " in head
    assert "| `train copy` to 100%: " in head and "| fused = reference on the device" in head
    if importlib.util.find_spec("torch") is None:  # pip install ".[dev]": no reference to run
        assert "Status: skipped" in parts[6] and "PyTorch is not installed" in parts[6]
        assert "Status: skipped" in parts[8] and "PyTorch is not installed" in parts[8]
    else:  # vs_pytorch.py's report: both pairs of workers, PyTorch's two Adams, the split
        assert "Status: passed" in parts[6] and "| tiny |" in parts[6], written[:3000]
        assert "2 worker processes" in parts[6] and "| tiny | glibc default |" in parts[6]
        assert "PyTorch's Adam: torch: fused; torch default: PyTorch's default" in parts[6]
        assert "| tiny | " in parts[6].split("matrix products alone")[1]
        # nanoGPT's recipe at tiny sizes on the lessons' prose, its numbers in the targets
        assert "Status: passed" in parts[8], parts[8][:3000]
        assert "median step after 1 warm-up steps: minitrans " in parts[8]
        assert "held-out loss over 8 windows: minitrans " in parts[8]
        assert "Markdown prose of the lessons" in parts[8] and "6 steps of 4 windows" in parts[8]
        speed, losses = (re.search(rf"\n\| nanoGPT's GPU recipe: {what}[^|]* \| ([^|]*) "
                                   r"\| ([^|]*) \|\n", head)
                         for what in ("minitrans's step", "held-out losses"))
        assert re.fullmatch(r"\d+\.\d\d \([\d.]+ / [\d.]+ ms\)", speed[1]), speed[0]
        assert re.fullmatch(r"\d\.\d{4} \([\d.]+ / [\d.]+\)", losses[1]), losses[0]
        assert "not measured" not in speed[2] + losses[2]

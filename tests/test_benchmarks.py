"""The benchmark's own instruments: the matrix-product timer counts every
product a step computes (``@`` and ``matmul(..., out=)``) without changing a
number, with several worker threads too, the products-alone table reports
the right ratios, a smoke run
of ``benchmarks/vs_pytorch.py --quick`` ends with its report (skipped when
PyTorch is absent), and one of ``benchmarks/kernels.py --quick`` prints a
row for every kernel pair.

The benchmark's speed claims are measured by running it, never here.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
sys.path.insert(0, BENCHMARKS)

from benchmark_report import products_table  # noqa: E402
from matmul_timer import TimedArray, layout, make_operand, time_products  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_totals():
    TimedArray.reset()
    yield
    TimedArray.reset()


def test_timed_products_are_counted_and_unchanged():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    timed_x, timed_w = x.view(TimedArray), w.view(TimedArray)

    product = timed_x @ timed_w
    out = np.empty((3, 4), np.float32).view(TimedArray)
    returned = np.matmul(timed_x.T, product, out=out)  # as attention's backward writes dQ, dK, dV

    assert type(product) is TimedArray and type(returned) is TimedArray
    np.testing.assert_array_equal(np.asarray(product), x @ w)
    np.testing.assert_array_equal(np.asarray(out), x.T @ (x @ w))
    assert TimedArray.flops == 2 * 5 * 3 * 4 + 2 * 3 * 5 * 4
    assert TimedArray.seconds > 0
    assert TimedArray.products == {((5, 3), (3, 4), "N", "N"): 1, ((3, 5), (5, 4), "T", "N"): 1}


def test_other_operations_keep_the_class_and_are_not_counted():
    x = np.arange(6, dtype=np.float32).reshape(2, 3).view(TimedArray)
    y = x * 2.0
    y += 1.0
    assert type(y) is TimedArray and type(x.sum(axis=0)) is TimedArray
    np.testing.assert_array_equal(np.asarray(y), np.arange(6).reshape(2, 3) * 2 + 1)
    assert TimedArray.flops == 0 and not TimedArray.products


def test_layout_names_column_major_matrices():
    a = np.zeros((4, 6), np.float32)
    assert layout(a) == "N" and layout(a.T) == "T"
    assert layout(np.zeros((2, 3, 4), np.float32).swapaxes(-1, -2)) == "T"
    assert layout(np.zeros(5, np.float32)) == "N"
    assert layout(a[:, :3]) == "N"  # a block of columns: still row by row
    rng = np.random.default_rng(0)
    for code in ("N", "T"):
        operand = make_operand((2, 3, 4), code, rng)
        assert (
            operand.shape == (2, 3, 4) and layout(operand) == code and operand.dtype == np.float32
        )


def test_time_products_gives_one_time_per_product():
    products = [
        [(8, 4), (4, 2), "N", "T", 3],
        [(2, 8, 4), (2, 4, 8), "T", "N", 1],
        [(8, 4), (4,), "N", "N", 2],
    ]
    times = time_products(products, np.matmul, lambda a: a, repeats=2)
    assert len(times) == len(products) and all(t > 0 for t in times)


def _results(step_ours, step_theirs, alone):
    return {
        "configs": {
            "tiny": {
                "times": {"minitrans": [step_ours] * 3, "torch": [step_theirs] * 3},
                "products_alone": alone,
            }
        }
    }


def test_products_table_splits_the_step():
    table = products_table(_results(0.3, 0.2, {"minitrans": 0.2, "torch": 0.1}))
    row = table.splitlines()[-1]
    assert row.startswith("| tiny | 200 / 100 ms (2.00) | 100 / 100 ms (1.00) |")


def test_products_table_is_absent_without_measurements():
    assert products_table(_results(0.3, 0.2, None)) is None


def test_vs_pytorch_quick_run_reports():
    pytest.importorskip("torch", reason="PyTorch is not installed: pip install \".[torch]\"")
    script = os.path.join(BENCHMARKS, "vs_pytorch.py")
    run = subprocess.run(
        [sys.executable, script, "--quick", "--pause", "0"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "| tiny |" in run.stdout and "2 worker threads" in run.stdout
    assert (
        "matrix products alone" not in run.stdout
    )  # only with one worker: see MinitransRunner.profile


def test_the_profile_of_a_step_with_workers():
    """Two workers compute the same products as one, on half batches: the
    same FLOPs are counted from both threads. Their seconds are halved into
    a share of each thread's step; the list of products is kept only with
    one worker, whose products run one at a time like the products alone."""
    from benchmark_worker import MinitransRunner
    from vs_pytorch import CONFIGS

    import minitrans

    profiles = {}
    with minitrans.using("numpy", dtype="float32"):
        for workers in (1, 2):
            runner = MinitransRunner(CONFIGS["tiny"], "cpu", threads=2, workers=workers)
            runner.step()
            profiles[workers] = runner.profile(steps=1)
    assert profiles[2]["matmul_flops"] == profiles[1]["matmul_flops"] > 0
    for workers, profile in profiles.items():
        assert profile["workers"] == workers
        assert 0 < profile["matmul_seconds"] < profile["step_seconds"]
        assert (profile["products"] is None) == (workers > 1)


def test_vs_pytorch_refuses_workers_on_a_gpu():
    run = subprocess.run(
        [
            sys.executable,
            os.path.join(BENCHMARKS, "vs_pytorch.py"),
            "--device",
            "gpu",
            "--workers",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert "--workers: expected 1 with --device gpu, got 2" in run.stderr
    assert "Traceback" not in run.stderr


def test_vs_pytorch_refuses_a_negative_pause():
    run = subprocess.run(
        [sys.executable, os.path.join(BENCHMARKS, "vs_pytorch.py"), "--pause", "-1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert "--pause: expected a number >= 0, got -1.0" in run.stderr
    assert "Traceback" not in run.stderr


def test_kernels_quick_run_prints_a_row_for_every_pair():
    """``benchmarks/kernels.py --quick`` runs every kernel pair once on the
    tiny config and prints its table (no timing claims here)."""
    from minitrans.core import kernels

    run = subprocess.run(
        [sys.executable, os.path.join(BENCHMARKS, "kernels.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    first_line = run.stdout.splitlines()[0]
    assert "NumPy" in first_line and "BLAS" in first_line
    rows = [line for line in run.stdout.splitlines() if line.startswith("| ")][1:]
    assert {row.split(" | ")[0][2:] for row in rows} == set(kernels.PAIRS)
    assert all(" tiny " in row for row in rows)

"""The benchmark's own instruments: the matrix-product timer counts every
product a step computes (``@`` and ``matmul(..., out=)``) without changing a
number, with several worker threads too, the products-alone table reports
the right ratios, and a smoke run
of ``benchmarks/vs_pytorch.py --quick`` ends with its report (skipped when
PyTorch is absent).

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


def test_results_of_numpy_functions_stay_timed_so_their_products_count():
    """np.concatenate of TimedArrays would be a plain ndarray, and a product
    of two plain arrays is invisible to the timer: the fused Q/K/V
    projection's input gradient, dy @ [W_Q | W_K | W_V]^T, went uncounted."""
    w = np.ones((3, 2), np.float32).view(TimedArray)
    side_by_side = np.concatenate([w, w], axis=1)  # (3, 4)
    stacked, chosen = np.stack([w, w]), np.where(w > 0, w, 0)
    assert all(type(a) is TimedArray for a in (side_by_side, stacked, chosen))
    assert all(type(a) is TimedArray for a in np.split(side_by_side, 2, axis=1))
    dy = np.ones((5, 4), np.float32)  # plain, as from np.empty
    dx = dy @ side_by_side.T  # (5, 3)
    np.testing.assert_array_equal(np.asarray(dx), np.full((5, 3), 4.0))
    assert TimedArray.flops == 2 * 5 * 4 * 3


def test_products_with_a_vector_are_counted_apart():
    x = np.ones((4, 3), np.float32).view(TimedArray)
    ones = np.ones(3, np.float32)
    x @ ones  # a row sum written as a product (minitrans.ops.sums)
    np.ones(4, np.float32) @ x  # a column sum
    assert TimedArray.flops == 0 and TimedArray.vector_flops == 2 * 4 * 3 * 2
    assert TimedArray.products == {((4, 3), (3,), "N", "N"): 1, ((4,), (4, 3), "N", "N"): 1}


def step_flops(sizes):
    """The floating-point operations of the matrix products of one training
    step of an encoder-decoder, from its config: 2 m n k for an (m, k) by
    (k, n) product. With n = batch * length positions (source and target of
    one length T here), d = d_model, one layer's forward computes

      self-attention:  Q, K, V, O projections   4 * 2 n d d
                       scores Q K^T and P V     2 * 2 (batch h) T T d_k = 2 * 2 n T d
      cross-attention (decoder): Q, O of the target, K, V of the memory: 4 * 2 n d d,
                       and its scores and P V   2 * 2 n T d
      feed-forward:    x W_1 and h W_2          2 * 2 n d d_ff

    an encoder layer: self-attention and feed-forward; a decoder layer all
    three; then the output projection, 2 n d V. The backward computes two
    products for each product of the forward (dA = dC B^T and dB = A^T dC
    for C = A B), so the step is 3 times the forward. Layer norms, softmax
    and the loss compute their sums as products with a vector; those are
    counted apart (TimedArray.vector_flops), not here."""
    d, h, d_ff = sizes["d_model"], sizes["h"], sizes["d_ff"]
    length = sizes["length"]
    n = sizes["batch"] * length
    projections = 4 * 2 * n * d * d
    scores_and_values = 2 * 2 * n * length * d  # d = h * d_k
    feed_forward = 2 * 2 * n * d * d_ff
    encoder_layer = projections + scores_and_values + feed_forward
    decoder_layer = 2 * (projections + scores_and_values) + feed_forward
    output = 2 * n * d * sizes["vocab_size"]
    forward = sizes["N"] * (encoder_layer + decoder_layer) + output
    return 3 * forward


def test_the_timer_counts_every_product_of_a_training_step():
    """One step of the benchmark's minitrans worker, every array a
    TimedArray: the count equals the formula. The vocabulary is above 64,
    where the embedding's backward is a scatter-add: at most 64 it is a
    one-hot product (minitrans.layers.embedding), minitrans's own choice,
    not part of the model's work. With the timer's ``__array_function__``
    taken out, the count fell short by the input-gradient products of the
    fused Q/K/V and K/V projections (dy @ W^T with both operands plain)."""
    from benchmark_worker import MinitransRunner

    import minitrans

    sizes = dict(d_model=32, h=4, N=2, d_ff=64, vocab_size=300, length=6, batch=4)
    with minitrans.using("numpy", dtype="float32"):
        runner = MinitransRunner(sizes, "cpu", threads=1, workers=1)
        profile = runner.profile(steps=1)
    assert profile["matmul_flops"] == step_flops(sizes)
    assert profile["vector_flops"] > 0


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

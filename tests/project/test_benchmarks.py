"""The suite's instruments (benchmarks/harness/) and scripts: the
matrix-product timer counts every product a step computes (``@`` and
``matmul(..., out=)``, on arrays that NumPy's functions made too) without
changing a number, with several worker threads too, and its count of a step
matches a formula from the config; the workers' allocators are the ones
asked for (or refused), their answers carry page faults and system time;
vs_pytorch.py's report says what the measurements say; the llama config's
workers build the same model on both sides (the same number of parameters,
the same loss of the same batch), and the config is skipped, with the
reason, where transformers is not installed; ``kernels.py --quick`` prints
a row for every kernel pair and the code's choices; ablations.py stores
every run and writes its table. Each script's smoke run writes its results
file only where ``--results`` names a folder (here a temporary one).

vs_pytorch.py's smoke run end to end, with its workers, is the device
check's rehearsal (tests/project/test_device_check.py). The benchmarks'
speed claims are measured by running them, never here.
"""

import collections
import os
import pathlib
import subprocess
import sys
import threading

import numpy as np
import pytest

BENCHMARKS = str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks")
sys.path.insert(0, BENCHMARKS)

from harness import allocators  # noqa: E402
from harness.configs import CONFIGS, LLAMA_CONFIGS, QUICK_SIZES, config_sizes  # noqa: E402
from harness.machine import cpu_model, describe_blas, kernel_variables, torch_blas  # noqa: E402
from harness.matmul_timer import TimedArray, layout, make_operand, time_products  # noqa: E402
from harness.report import allocator_table, header, products_table, report  # noqa: E402
from harness.worker import make_runner, train  # noqa: E402
from harness.workload import one_line  # noqa: E402


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
    d, d_ff = sizes["d_model"], sizes["d_ff"]
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
    import minitrans
    from harness.minitrans_runner import MinitransRunner

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


def test_products_on_threads_run_at_once_on_operands_of_their_own():
    """Each of the two threads multiplies its own operands, both started
    together, and no thread is left running after the timings."""
    seen = collections.defaultdict(set)
    lock = threading.Lock()

    def matmul(a, b):
        with lock:
            seen[threading.get_ident()].add(id(a))
        return a @ b

    before = threading.active_count()
    products = [[(8, 4), (4, 2), "N", "T", 3], [(2, 8, 4), (2, 4, 8), "T", "N", 1]]
    times = time_products(products, matmul, lambda a: a, repeats=2, threads=2)
    assert len(times) == 2 and all(t > 0 for t in times)
    assert len(seen) == 2  # two threads multiplied
    first, second = seen.values()
    assert len(first) == len(second) == 2 and not first & second  # one operand per product each
    assert threading.active_count() == before


def test_an_error_on_a_timing_thread_is_raised_not_waited_for():
    """A product that fails on one of the threads raises in the caller, and
    no thread is left waiting for it."""
    before = threading.active_count()

    def matmul(a, b):
        if threading.current_thread() is not threading.main_thread() and a.shape[0] == 8:
            raise ValueError("shapes: expected something else")
        return a @ b

    with pytest.raises(ValueError, match="shapes: expected"):
        time_products([[(8, 4), (4, 2), "N", "N", 1]], matmul, lambda a: a, threads=2)
    assert threading.active_count() == before


def test_each_timing_thread_sets_itself_up_first():
    """OpenMP's thread count (PyTorch's) is each thread's own setting: each
    timing thread calls the setup before its first product."""
    ready, multiplied_before_setup = set(), []

    def matmul(a, b):
        if threading.get_ident() not in ready:
            multiplied_before_setup.append(threading.get_ident())
        return a @ b

    products = [[(8, 4), (4, 2), "N", "N", 1]]
    time_products(products, matmul, lambda a: a, repeats=1, threads=2,
                  thread_setup=lambda: ready.add(threading.get_ident()))
    assert len(ready) == 2 and not multiplied_before_setup


def test_torch_runner_times_products_on_threads_and_keeps_its_threads():
    pytest.importorskip("torch", reason="PyTorch is not installed: pip install \".[torch]\"")
    import torch

    from harness.torch_runner import TorchRunner

    threads_before = torch.get_num_threads()
    try:
        runner = TorchRunner(CONFIGS["tiny"], "cpu", threads=2)
        products = [[(8, 4), (4, 2), "N", "T", 3]]
        times = runner.time_products(products, threads=2, blas_threads=1)
        assert len(times) == 1 and times[0] > 0
        assert torch.get_num_threads() == 2  # the step's own setting, back
    finally:
        torch.set_num_threads(threads_before)


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
    table = products_table(_results(0.3, 0.25, {"minitrans": 0.2, "torch": 0.1}))
    row = table.splitlines()[-1]
    # minitrans's rest (100 ms) and PyTorch's products (100 ms) against PyTorch's 250 ms step
    assert row == "| tiny | 200 / 100 ms (2.00) | 100 / 150 ms (0.67) | 0.80 |"


def test_products_table_is_absent_without_measurements():
    assert products_table(_results(0.3, 0.2, None)) is None


def test_the_profile_of_a_step_with_workers():
    """Two workers compute the same products as one, on half batches: the
    same FLOPs are counted from both threads. Their seconds are halved into
    a share of each thread's step, and the list of products is one
    worker's: each of its counts is the same as with one worker's."""
    import minitrans
    from harness.minitrans_runner import MinitransRunner

    profiles = {}
    with minitrans.using("numpy", dtype="float32"):
        for workers in (1, 2):
            runner = MinitransRunner(CONFIGS["tiny"], "cpu", threads=2, workers=workers)
            runner.step()
            profiles[workers] = runner.profile(steps=1)
    assert profiles[2]["matmul_flops"] == profiles[1]["matmul_flops"] > 0
    for workers, profile in profiles.items():
        assert profile["workers"] == workers
        assert profile["blas_threads"] == 2 // workers  # the two threads shared out
        assert 0 < profile["matmul_seconds"] < profile["step_seconds"]
    shapes = {workers: {tuple(map(tuple, p[:2])): p[-1] for p in profile["products"]}
              for workers, profile in profiles.items()}
    # the same products, half the rows of the batch on each of the two workers
    assert sorted(shapes[1].values()) == sorted(shapes[2].values())
    assert sum(a[0] for a, _ in shapes[2]) < sum(a[0] for a, _ in shapes[1])


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


# ------------------------------------------------------------ allocators


def test_allocator_environments():
    assert allocators.allocator_env("tuned") == {"GLIBC_TUNABLES": allocators.TUNED_MALLOC}
    assert allocators.allocator_env("default") == {}
    inherited = {"PATH": "/bin", "GLIBC_TUNABLES": "glibc.malloc.arena_max=1",
                 "LD_PRELOAD": "libother.so", "MALLOC_CONF": "narenas:1"}
    assert allocators.worker_env("default", inherited) == {"PATH": "/bin"}
    assert allocators.worker_env("tuned", inherited) == {
        "PATH": "/bin", "GLIBC_TUNABLES": allocators.TUNED_MALLOC}


def test_a_preloaded_allocator_is_found_or_refused(tmp_path):
    (tmp_path / "libjemalloc.so.2").write_bytes(b"")
    found = allocators.allocator_env("jemalloc", dirs=[str(tmp_path)])
    assert found == {"LD_PRELOAD": str(tmp_path / "libjemalloc.so.2"),
                     "MALLOC_CONF": "dirty_decay_ms:-1,muzzy_decay_ms:-1"}
    with pytest.raises(ValueError, match="allocator: tcmalloc is not installed .*libtcmalloc"):
        allocators.allocator_env("tcmalloc", dirs=[str(tmp_path)])
    with pytest.raises(ValueError, match="expected one of tuned, jemalloc, tcmalloc, default, "
                                         "got 'hoard'"):
        allocators.allocator_env("hoard")


def test_the_allocator_a_worker_runs_is_seen_from_inside(tmp_path, monkeypatch):
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f10 r-xp 0 08:01 1 /usr/lib/libjemalloc.so.2\n7f20-7f30 rw-p 0 0 0\n")
    monkeypatch.delenv("MALLOC_CONF", raising=False)
    assert allocators.allocator_in_use(str(maps)) == "jemalloc (libjemalloc.so.2)"
    monkeypatch.setenv("MALLOC_CONF", "dirty_decay_ms:-1")
    assert allocators.allocator_in_use(str(maps)) == (
        "jemalloc (libjemalloc.so.2, MALLOC_CONF=dirty_decay_ms:-1)")
    maps.write_text("7f00-7f10 r-xp 0 08:01 1 /usr/lib/libc.so.6\n")
    monkeypatch.setenv("GLIBC_TUNABLES", allocators.TUNED_MALLOC)
    assert allocators.allocator_in_use(str(maps)).startswith("glibc malloc, tuned")
    monkeypatch.delenv("GLIBC_TUNABLES")
    assert allocators.allocator_in_use(str(maps)) == "glibc malloc, default"


def test_vs_pytorch_refuses_an_allocator_that_is_not_installed():
    missing = [name for name in allocators.PRELOADED if allocators.find_library(name) is None]
    if not missing:
        pytest.skip("jemalloc and tcmalloc are both installed here")
    run = subprocess.run(
        [sys.executable, os.path.join(BENCHMARKS, "vs_pytorch.py"), "--allocator", missing[0]],
        capture_output=True, text=True, timeout=60,
    )
    assert run.returncode == 2
    assert f"--allocator: {missing[0]} is not installed" in run.stderr
    assert "Traceback" not in run.stderr


# ------------------------------------------------------------ a worker's answers


class _PageToucher:
    """A stand-in runner whose step writes to every page of fresh memory."""

    def step(self):
        import mmap

        pages = 256
        block = mmap.mmap(-1, pages * mmap.PAGESIZE)
        for page in range(pages):
            block[page * mmap.PAGESIZE] = 1
        block.close()


def test_a_training_answer_carries_page_faults_and_system_time():
    answer = train(_PageToucher(), steps=3)
    assert len(answer["times"]) == 3 and answer["median"] > 0
    assert answer["faults"] >= 3 * 256  # one per fresh page at least
    assert answer["system_seconds"] >= 0 and isinstance(answer["system_seconds"], float)


def test_an_error_fits_on_one_line():
    assert one_line(RuntimeError("no compiler\nmore detail")) == "RuntimeError: no compiler"
    assert one_line(ValueError()) == "ValueError"
    assert len(one_line(OSError("x" * 500))) == 160


# ------------------------------------------------------------ the report


def _machine(**changes):
    machine = {"date": "2026-11-24", "cpu": "Some CPU 9000", "arch": "x86_64", "cores": 2,
               "python": "3.11.7", "numpy": "2.4.6",
               "numpy_blas": "openblas 0.3.31, SkylakeX kernels", "torch": "2.13.0+cpu",
               "torch_blas": "mkl 2024.2, CPU capability AVX512",
               "kernel_variables": ["OPENBLAS_CORETYPE=Haswell"], "threads": 2,
               "device": "cpu", "workers": 2, "blas_threads": 1, "allocator": "tuned"}
    return {**machine, **changes}


def _full_results(compile_result):
    """A run of the tiny config with every worker: steps of 100 ms
    (minitrans) against 125 ms (PyTorch), 110 / 200 ms with glibc's default
    malloc, 80 ms compiled; 10 timed steps each."""
    steps = {"minitrans": 0.100, "torch": 0.125, "minitrans default": 0.110,
             "torch default": 0.200, "torch.compile": 0.080}
    rusage = {"minitrans": (300, 0.01), "torch": (500, 0.02), "minitrans default": (400, 0.03),
              "torch default": (90_000, 2.5), "torch.compile": (700, 0.04)}
    if "error" in compile_result:
        del steps["torch.compile"], rusage["torch.compile"]
    return {
        "peak_flops": 100e9,
        "machine": _machine(),
        "configs": {"tiny": {
            "allocators": {"minitrans": "glibc malloc, tuned", "torch": "glibc malloc, tuned"},
            "adam": {"minitrans": "minitrans's", "torch": "fused",
                     "torch default": "PyTorch's default (for-loop)"},
            "times": {label: [step] * 10 for label, step in steps.items()},
            "rusage": {label: {"faults": faults, "system_seconds": system, "steps": 10}
                       for label, (faults, system) in rusage.items()},
            "compile": compile_result,
            "profile": {"matmul_flops": 2e9, "matmul_seconds": 0.05},
            "products_alone": None,
            "memory": {"minitrans": {"peak_rss": 200 * 2**20},
                       "torch": {"peak_rss": 400 * 2**20}},
        }},
    }


def test_the_report_shows_the_untuned_ratio_and_torch_compile():
    table = report(_full_results({"seconds": 31.4})).split("\n\n")[1].splitlines()
    assert ("| ratio (target) | rounds' ratios, middle half | ratio, untuned (glibc default "
            "malloc, PyTorch's default Adam) | torch.compile step") in table[0]
    assert table[2].startswith("| tiny | 100 ms | 125 ms | 0.80 (<= 1.5) | n/a | 0.55 | "
                               "80 ms (1.25; compiled in 31 s) |")


def test_the_rounds_ratios_pair_each_turn_with_the_next():
    """Each round's ratio is minitrans's turn over PyTorch's turn of the same
    round (two steps a turn here); the cell is their middle half."""
    from harness.report import round_ratios, spread_cell

    results = _full_results({"seconds": 31.4})
    result = results["configs"]["tiny"]
    result["steps_per_turn"] = 2
    ours = [1.0, 1.0, 4.0, 4.0, 3.0, 3.0, 8.0, 8.0, 5.0, 5.0]
    theirs = [1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0, 1.0, 1.0]  # PyTorch's turns move too
    result["times"].update(minitrans=ours, torch=theirs)
    assert round_ratios(result) == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert spread_cell(result) == "1.50 to 4.50"  # the quartiles of 1, 2, 3, 4, 5
    row = report(results).split("\n\n")[1].splitlines()[2]
    assert "| 1.50 to 4.50 |" in row
    result["times"].update(minitrans=ours[:6], torch=theirs[:6])
    assert spread_cell(result) == "n/a (3 rounds)"  # too few for quartiles


def test_a_failed_compilation_is_a_cell_that_says_why():
    results = _full_results({"error": "InvalidCxxCompiler: no working C++ compiler | g++"})
    row = report(results).split("\n\n")[1].splitlines()[2]
    assert "| 0.55 | failed: InvalidCxxCompiler: no working C++ compiler / g++ |" in row


def test_the_allocator_table_gives_faults_and_system_time_per_step():
    rows = allocator_table(_full_results({"seconds": 30.0})).splitlines()
    assert "page faults per step minitrans / PyTorch" in rows[0]
    assert rows[2] == "| tiny | glibc tuned | 100 / 125 ms (0.80) | 30 / 50 | 1 / 2 ms |"
    assert rows[3] == "| tiny | glibc default | 110 / 200 ms (0.55) | 40 / 9,000 | 3 / 250 ms |"
    assert rows[4] == "| tiny | torch.compile | - / 80 ms | - / 70 | - / 4 ms |"


def test_the_first_line_names_the_cpu_and_the_blas_kernels():
    first = header(_full_results({"seconds": 30.0})).splitlines()[0]
    assert first.startswith("2026-11-24, Some CPU 9000 (x86_64) with 2 cores; ")
    for field in ("NumPy 2.4.6 BLAS: openblas 0.3.31, SkylakeX kernels",
                  "PyTorch 2.13.0+cpu BLAS: mkl 2024.2, CPU capability AVX512",
                  "OPENBLAS_CORETYPE=Haswell", "allocators: minitrans: glibc malloc, tuned",
                  "PyTorch's Adam: torch: fused; torch default: PyTorch's default (for-loop)."):
        assert field in first
    results = _full_results({"seconds": 30.0})
    results["machine"]["kernel_variables"] = []
    assert "OPENBLAS_CORETYPE unset" in header(results)


def test_the_machine_facts_are_read_from_their_sources(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Some CPU 9000 @ 2.0GHz\nflags\t: avx2\n")
    assert cpu_model(str(cpuinfo)) == "Some CPU 9000 @ 2.0GHz"
    assert cpu_model(str(tmp_path / "absent"))  # platform's answer instead
    entry = {"internal_api": "openblas", "version": "0.3.31", "architecture": "Haswell"}
    assert describe_blas(entry) == "openblas 0.3.31, Haswell kernels"
    shown = ("  - Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 2024\n"
             "  - CPU capability usage: AVX2\n  - Build settings: BLAS_INFO=mkl, BUILD_TYPE=R")
    assert torch_blas(shown) == "mkl 2024.2, CPU capability AVX2"
    assert torch_blas("BLAS_INFO=open") == "open"
    environ = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "", "PATH": "/bin"}
    assert kernel_variables(environ) == ["OPENBLAS_CORETYPE=Haswell"]


def test_a_worker_that_cannot_compile_leaves_the_run_going():
    from vs_pytorch import warm_up

    class FakeWorker:
        closed = False

        def __init__(self, answer):
            self.answer = answer

        def ask(self, request, errors=False):
            assert errors and request == {"do": "train", "steps": 3}
            return self.answer

        def close(self):
            self.closed = True

    failing = FakeWorker({"error": "InvalidCxxCompiler: no compiler"})
    workers = {"torch": FakeWorker({"times": [0.2, 0.1, 0.1]}), "torch.compile": failing}
    result = {}
    warm_up(workers, result)
    assert list(workers) == ["torch"] and failing.closed
    assert result == {"compile": {"error": "InvalidCxxCompiler: no compiler"}}
    workers["torch.compile"] = FakeWorker({"times": [31.0, 0.1, 0.1]})
    warm_up(workers, result)
    assert result == {"compile": {"seconds": 31.0}}
    workers["torch"] = FakeWorker({"error": "MemoryError"})
    with pytest.raises(RuntimeError, match=r"worker \(torch\) failed: MemoryError"):
        warm_up(workers, result)


def test_kernels_quick_run_prints_a_row_for_every_pair(tmp_path):
    """``benchmarks/kernels.py --quick`` runs every kernel pair once, on the
    tiny config or, the modern decoder's, on a small llama, and every choice
    of the code's comments; its results file goes where ``--results`` says
    (no timing claims here)."""
    from minitrans.core import kernels

    from harness.code_choices import CHOICES

    run = subprocess.run(
        [sys.executable, os.path.join(BENCHMARKS, "kernels.py"), "--quick",
         "--results", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    pairs, choices = run.stdout.split("\n\n")
    rows = [line for line in pairs.splitlines() if line.startswith("| ")][1:]
    # a pair whose fast version is its reference has only a device version, timed on a GPU
    timed = {name for name, pair in kernels.PAIRS.items() if pair.fast is not pair.reference}
    assert {row.split(" | ")[0][2:] for row in rows} == timed
    modern = {"sigmoid", "rotate_pairs", "grouped_attention"}
    assert all((" llama " if row.split(" | ")[0][2:] in modern else " tiny ") in row
               for row in rows)
    assert len([line for line in choices.splitlines() if line.startswith("| `")]) == len(CHOICES)
    (written,) = tmp_path.glob("*.md")
    text = written.read_text(encoding="utf-8")
    assert text.startswith("# Fast kernels against their references\n") and rows[0] in text
    overall, _, summary = text.split("\n\n")[2:5]  # the first table, then a row per pair
    assert overall.splitlines()[2].startswith(f"| 1 | {len(rows)} | ")
    assert summary.startswith("| kernel | configs | ratio (1t)")
    assert len(summary.splitlines()) == 2 + len(timed)


# ------------------------------------------------------------ ablations.py


def test_ablations_writes_the_table_and_its_numbers(tmp_path, capsys, monkeypatch):
    """Two rows, two seeds, three steps: the JSON holds every run's measures,
    their means and spreads, and the results file's table shows a row per
    result, the changed setting only."""
    import json

    # the script sets OMP_NUM_THREADS when imported: restored after the test,
    # so that the other tests' subprocesses inherit the environment as it was
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
    import ablations

    out = tmp_path / "abl.json"
    args = ["--rows", "D3", "--steps", "3", "--seeds", "2", "--eval-pairs", "10",
            "--results", str(tmp_path / "results")]
    assert ablations.main([*args, "--out", str(out)]) == 0
    stored = json.loads(out.read_text(encoding="utf-8"))
    assert [row["id"] for row in stored["rows"]] == ["base", "D3"]  # base is always trained
    assert stored["setup"]["training"]["steps"] == 3 and stored["setup"]["seeds"] == 2
    base, smoothing = stored["rows"]
    assert smoothing["changes"] == {"label_smoothing": 0.0}
    assert base["parameters"] == smoothing["parameters"] > 0
    for row in stored["rows"]:
        assert [run["seed"] for run in row["runs"]] == [0, 1]
        for key in ("ppl", "bleu", "exact_match", "token_accuracy", "seconds"):
            values = [run[key] for run in row["runs"]]
            assert row["mean"][key] == pytest.approx(sum(values) / 2)
            assert row["spread"][key] == pytest.approx((max(values) - min(values)) / 2)
        assert row["mean"]["ppl"] == pytest.approx(np.exp(row["mean"]["loss"]), rel=0.5)
        assert all(run["ppl"] >= 1 and 0 <= run["exact_match"] <= 1 for run in row["runs"])
    (written,) = (tmp_path / "results").glob("*.md")
    table = written.read_text(encoding="utf-8")
    assert table.startswith("# Table 3 in miniature") and stored["machine"] in table
    lines = [line for line in table.splitlines() if line.startswith("| (D) D3")]
    settings = [cell.strip() for cell in lines[0].split("|")[2:11]]  # N .. norm
    assert len(lines) == 1 and settings == ["", "", "", "", "", "", "0.0", "", ""]
    assert lines[0] in capsys.readouterr().out

    with pytest.raises(SystemExit) as refused:  # an existing file is not overwritten
        ablations.main([*args, "--out", str(out)])
    assert refused.value.code == 2
    assert "exists; expected a new file (or --force)" in capsys.readouterr().err


@pytest.mark.parametrize("flags, message", [
    (["--rows", "Z9"], "--rows: expected row ids or groups"),
    (["--steps", "0"], "--steps: invalid int >= 1 value: '0'"),
    (["--seeds", "two"], "--seeds: invalid int >= 1 value: 'two'"),
])
def test_ablations_refuses_bad_flags_in_one_line(flags, message):
    run = subprocess.run([sys.executable, os.path.join(BENCHMARKS, "ablations.py"), *flags],
                         capture_output=True, text=True, timeout=60)
    last = run.stderr.strip().splitlines()[-1]  # argparse's usage, then one line of error
    assert run.returncode == 2 and last.startswith("ablations.py: error: ") and message in last
    assert "Traceback" not in run.stderr


def test_ablations_rows_are_picked_by_id_or_group(monkeypatch):
    """--rows takes row ids and group letters in any case; base comes first
    and only once; the rows keep the table's order."""
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
    import ablations

    picked = [row[0] for row in ablations.select_rows("e1, a,BASE")]
    assert picked == ["base", "A1", "A2", "A3", "A4", "E1"]
    with pytest.raises(ValueError, match="rows: expected row ids or groups"):
        ablations.select_rows(" , ")


# ------------------------------------------------------------ the llama config

LLAMA_TINY = dict(model="llama", d_model=32, h=4, kv_heads=2, N=2, d_ff=88, vocab_size=300,
                  length=8, batch=4, norm_eps=1e-6, rope_base=500000.0)  # not the defaults


def test_the_llama_workers_build_the_same_model():
    """minitrans's DecoderOnlyLM and transformers' LlamaForCausalLM of the
    same sizes: as many parameters on both sides (and as ModelConfig counts
    from the sizes), and, with minitrans's weights copied over, the same
    loss of the same batch; two steps of each run (Adam too: the second
    loss agrees as well). The sizes' rope base and eps are not the
    libraries' defaults: either one dropped on one side moves the first
    loss by 3e-4 or more (relative), beyond the 1e-5 allowed here."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    pytest.importorskip("transformers", reason="transformers is not installed")
    import minitrans
    from harness.llama_runner import MinitransLlamaRunner, TorchLlamaRunner, parameter_counts

    threads = torch.get_num_threads()
    try:
        with minitrans.using("numpy", dtype="float32"):
            ours = make_runner("minitrans", LLAMA_TINY, "cpu", threads=2, workers=2)
            theirs = make_runner("torch", LLAMA_TINY, "cpu", threads=1)
            assert isinstance(ours, MinitransLlamaRunner)
            assert isinstance(theirs, TorchLlamaRunner)
            assert theirs.adam == "fused" and theirs.optimizer.defaults["fused"]
            ours_count, theirs_count = parameter_counts(ours, theirs)
            assert ours_count == theirs_count == ours.model.config.parameter_count() > 0
            config = theirs.model.config
            assert (config._attn_implementation, config.num_key_value_heads,
                    config.intermediate_size, config.tie_word_embeddings) == ("eager", 2, 88, False)
            for _ in range(2):
                loss, torch_loss = ours.step(), theirs.step()
                assert np.isfinite(loss) and loss == pytest.approx(torch_loss, rel=1e-5)
    finally:
        torch.set_num_threads(threads)


def test_pytorch_trains_with_its_fused_adam_unless_told_otherwise():
    """The reference's best documented setting: PyTorch's documentation
    ranks its fused Adam fastest. The untuned worker takes its default, and
    a PyTorch without a fused kernel for the device falls back to that
    default, saying why."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    from harness.torch_runner import torch_adam

    parameters = [torch.nn.Parameter(torch.zeros(3))]
    fused, words = torch_adam(torch, parameters, fused=True)
    assert fused.defaults["fused"] and words == "fused"
    default, words = torch_adam(torch, parameters, fused=False)
    assert not default.defaults["fused"] and words == "PyTorch's default (for-loop)"

    class NoFusedKernel:  # a PyTorch whose Adam refuses fused=True
        class optim:
            @staticmethod
            def Adam(parameters, fused=None, **settings):
                if fused:
                    raise RuntimeError("`fused=True` requires all the params to be CUDA")
                return ("Adam", settings)

    optimizer, words = torch_adam(NoFusedKernel, parameters, fused=True)
    assert optimizer[0] == "Adam" and words.startswith("PyTorch's default (fused: RuntimeError")


def test_the_llama_config_is_skipped_without_transformers(tmp_path):
    """Where transformers is not installed, --configs llama measures
    nothing and the report's row says why; the run still ends with its
    report (the other configs would run: only llama needs transformers),
    and its results file holds the report under the header."""
    pytest.importorskip("torch", reason="PyTorch is not installed")
    script = os.path.join(BENCHMARKS, "vs_pytorch.py")
    hide = (
        "import importlib.util, runpy, sys\n"
        f"sys.path.insert(0, {BENCHMARKS!r})  # as when the script is run: its folder first\n"
        "real = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda name, *a: None if name == 'transformers' "
        "else real(name, *a)\n"
        f"sys.argv = [{script!r}, '--configs', 'llama', '--no-decoding', '--results', "
        f"{str(tmp_path)!r}]\n"
        f"runpy.run_path({script!r}, run_name='__main__')\n"
    )
    run = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "skipping llama: transformers is not installed" in run.stderr
    row = next(line for line in run.stdout.splitlines() if line.startswith("| llama |"))
    assert row.startswith("| llama | skipped: transformers is not installed")
    header = next(line for line in run.stdout.splitlines() if line.startswith("| config |"))
    assert row.count("|") == header.count("|")
    (written,) = tmp_path.glob("*.md")
    text = written.read_text(encoding="utf-8")
    assert text.startswith("# minitrans against PyTorch\n\n- Date: ") and row in text
    assert "- Command: `python benchmarks/vs_pytorch.py --configs llama --no-decoding" in text


def test_the_report_names_a_skipped_config_and_quick_sizes():
    from harness.report import config_cell

    results = _full_results({"seconds": 30.0})
    results["skipped"] = {"llama": "transformers is not installed: pip install transformers"}
    table = report(results).split("\n\n")[1].splitlines()
    assert table[-1] == ("| llama | skipped: transformers is not installed: pip install "
                         "transformers" + " | -" * (table[0].count("|") - 3) + " |")
    assert config_sizes("llama") == LLAMA_CONFIGS["llama"]
    quick = config_sizes("llama", quick=True)
    assert quick == {**LLAMA_CONFIGS["llama"], **QUICK_SIZES["llama"]} and quick["kv_heads"] == 2
    assert config_cell("llama", {"sizes": LLAMA_CONFIGS["llama"]}) == "llama"
    assert config_cell("llama", {"sizes": quick}).startswith("llama (quick sizes: d_model 64, ")


# ------------------------------------------------------------ text_lm.py


def test_text_lm_parses_its_options_and_its_tiny_smoke_run_reports_both_sides(tmp_path):
    """text_lm.py's options: the recipe sets the steps, --device gpu trains
    on CuPy and a CPU on numpy or strict (else refused in a line); its smoke
    run, three steps of the tiny recipe on a generated text, prints the
    table of both sides, says the targets wait for the full run, and ends
    with a RESULT line of both sides' numbers; no file is written."""
    import json

    import text_lm

    args = text_lm.parse_args(["--data", "input.txt"])
    assert (args.recipe, args.device, args.backend, args.steps) == ("cpu", "cpu", "numpy", 2000)
    args = text_lm.parse_args(["--text", "lessons", "--recipe", "gpu", "--device", "gpu"])
    assert (args.backend, args.steps, args.result_line) == ("cupy", 5000, False)
    for flags in (["--device", "gpu", "--backend", "strict"], ["--backend", "cupy"],
                  ["--steps", "0"], ["--text", "lessons"]):
        with pytest.raises(SystemExit):
            text_lm.parse_args(["--data", "input.txt", *flags])
    pytest.importorskip("torch", reason="PyTorch is not installed: the twin cannot train")
    words = np.random.default_rng(0).choice(["the", "cat", "sat", "on", "a", "mat"], 5000)
    (tmp_path / "words.txt").write_text(" ".join(words), encoding="utf-8")
    run = subprocess.run([sys.executable, os.path.join(BENCHMARKS, "text_lm.py"), "--data",
                          str(tmp_path / "words.txt"), "--recipe", "tiny", "--steps", "3",
                          "--result-line"], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "| minitrans (NumPy, float32) | " in run.stdout
    assert "| PyTorch twin, tuned (eager, fused AdamW, " in run.stdout
    assert "A smoke run: the targets are judged after 200 steps only." in run.stdout
    assert "results:" not in run.stderr and not list(tmp_path.glob("**/*.md"))
    found = json.loads(run.stdout.strip().splitlines()[-1].removeprefix("RESULT "))
    assert (found["recipe"], found["steps"], found["eval_windows"]) == ("tiny", 3, 8)
    ours, twin = found["minitrans"], found["twin"]
    # three steps from the same weights: close, though dropout's masks differ
    assert abs(ours["loss"] - twin["loss"]) < found["gap_allowed"] == 0.05
    assert abs(ours["train_loss"] - twin["train_loss"]) < 0.05 and ours["step_ms"] > 0

"""benchmarks/products_by_shape.py: the rounds ask each library for both
modes in turn and keep each product's best time, and a worker that fails to
start leaves none running; the report's totals weigh each product by how
often a step computes it, and its rows put the products that cost NumPy
most first. Its speed figures come from running it, never from here."""

import pathlib
import sys

import pytest

BENCHMARKS = str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks")
sys.path.insert(0, BENCHMARKS)

import products_by_shape  # noqa: E402
from products_by_shape import measure, parse_args, per_step, report  # noqa: E402

PRODUCTS = [[[4, 8], [8, 16], "N", "N", 3], [[8, 4], [4, 16], "T", "N", 1]]


class FakeWorker:
    """Answers a profile with PRODUCTS (two workers of one BLAS thread) and
    each timing with the next of ``timings``, recording every request."""

    def __init__(self, kind, timings, log):
        self.kind, self.timings, self.log, self.closed = kind, iter(timings), log, False

    def ask(self, request):
        self.log.append((self.kind, request["do"]))
        return {"products": PRODUCTS, "workers": 2, "blas_threads": 1}

    def turn(self, request):
        self.log.append((self.kind, request["threads"], request["blas_threads"]))
        return {"seconds": next(self.timings)}

    def close(self):
        self.closed = True


def test_measure_takes_turns_and_keeps_each_products_best():
    log, workers = [], {}
    timings = {"minitrans": [[3.0, 1.0], [5.0, 2.0], [2.0, 4.0], [6.0, 1.0]],
               "torch": [[1.0, 1.0], [4.0, 3.0], [2.0, 0.5], [3.0, 3.0]]}

    def make_worker(kind, name, args):
        workers[kind] = FakeWorker(kind, timings[kind], log)
        return workers[kind]

    args = parse_args(["--configs", "tiny", "--rounds", "2"])
    result = measure("tiny", args, make_worker)
    assert log == [("minitrans", "profile"),
                   ("minitrans", 1, 1), ("torch", 1, 1), ("minitrans", 2, 1), ("torch", 2, 1),
                   ("minitrans", 1, 1), ("torch", 1, 1), ("minitrans", 2, 1), ("torch", 2, 1)]
    best = result["seconds"]
    assert best["numpy", "alone"] == [2.0, 1.0] and best["numpy", "at once"] == [5.0, 1.0]
    assert best["torch", "alone"] == [1.0, 0.5] and best["torch", "at once"] == [3.0, 3.0]
    assert all(worker.closed for worker in workers.values())
    # a step computes the first product 3 times: 3 * 2.0 + 1 * 1.0
    assert per_step(result, "numpy", "alone") == pytest.approx(7.0)


def test_a_worker_that_fails_to_start_leaves_none_running():
    started = []

    def make_worker(kind, name, args):
        if kind == "torch":
            raise RuntimeError("a benchmark worker (torch) died (exit status 1)")
        started.append(FakeWorker(kind, [], []))
        return started[-1]

    with pytest.raises(RuntimeError, match="died"):
        measure("tiny", parse_args([]), make_worker)
    assert [worker.closed for worker in started] == [True]


def test_the_report_weighs_products_by_count_and_lists_numpys_costliest_first():
    seconds = {("numpy", "alone"): [0.002, 0.001], ("torch", "alone"): [0.001, 0.001],
               ("numpy", "at once"): [0.003, 0.005], ("torch", "at once"): [0.002, 0.001]}
    result = {"products": PRODUCTS, "workers": 2, "blas_threads": 1, "seconds": seconds}
    machine = {"date": "2026-11-27", "cpu": "Some CPU", "cores": 2, "numpy": "2.4",
               "numpy_blas": "openblas", "torch": "2.13", "torch_blas": "mkl",
               "kernel_variables": [], "python": "3.11"}
    text = report(machine, {"tiny": result}, top=5)
    assert text.startswith("2026-11-27, Some CPU with 2 cores; NumPy 2.4 BLAS: openblas")
    assert "2 worker threads of 1 BLAS thread(s)" in text.splitlines()[0]
    # alone 3 * 2 + 1 = 7 ms against 3 * 1 + 1 = 4; at once 3 * 3 + 5 = 14 against 7
    assert "| tiny | 4 | 7.0 / 4.0 ms (1.75) | 14.0 / 7.0 ms (2.00) (2 threads) | 2.00, 1.75 |" \
        in text
    rows = [line for line in text.splitlines() if line.startswith("| (")]
    # at once, the second product costs NumPy 4 ms more a step, the first 3 x 1 ms
    assert rows[0].startswith("| (8, 4) x (4, 16), T N | 1 | 1 / 1 ms (1.00) | 5 / 1 ms (5.00)")
    assert rows[0].endswith("+4.00 ms |")
    assert rows[1].startswith("| (4, 8) x (8, 16), N N | 3 | 2 / 1 ms (2.00) | 3 / 2 ms (1.50)")
    assert len(report(machine, {"tiny": result}, top=1).splitlines()) == len(text.splitlines()) - 1


@pytest.mark.parametrize("argv, message", [
    (["--configs", "huge"], "--configs: unknown ['huge']"),
    (["--rounds", "0"], "--rounds: expected a number >= 1, got 0"),
    (["--top", "-1"], "--top: expected a number >= 1, got -1"),
])
def test_bad_options_are_named(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_the_defaults_and_the_quick_run():
    assert parse_args([]).names == products_by_shape.DEFAULT_CONFIGS
    quick = parse_args(["--quick", "--rounds", "4"])
    assert quick.names == ["tiny"] and quick.rounds == 1


def test_a_config_that_cannot_run_is_named_and_left_out(monkeypatch, capsys):
    """The scripts built on vs_pytorch.py go on without a config whose
    reference library is missing, and say which and why."""
    import vs_pytorch

    monkeypatch.setattr(vs_pytorch, "unavailable",
                        lambda name: "transformers is not installed" if name == "llama" else None)
    assert vs_pytorch.available_configs(["tiny", "llama", "copy"]) == ["tiny", "copy"]
    assert capsys.readouterr().err == "skipping llama: transformers is not installed\n"


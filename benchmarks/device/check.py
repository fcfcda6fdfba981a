"""One prepared check of minitrans on a CUDA GPU, written to one report.

    PYTHONPATH=. python3 benchmarks/device/check.py OUT_DIR           # on the GPU machine
    MINITRANS_COMMIT=abc1234 PYTHONPATH=. python3 benchmarks/device/check.py OUT_DIR  # a copy
    python benchmarks/device/check.py OUT_DIR --rehearse              # on a CPU, stand-ins
    python benchmarks/device/check.py OUT_DIR --sections pytest,vs_pytorch --budget 240
    python benchmarks/device/check.py OUT_DIR --file                  # also filed in results/

A GPU is lent for minutes, once, to a plain checkout: this script runs the
whole check in one command within ``--budget`` seconds (default 450) and
writes ``OUT_DIR/device-check.md``, rewritten after every section, so that
a check stopped from outside still leaves what it did. The sections, each
a child process with its share of the budget (time a section leaves unused
goes to the next; the test suite runs last) and stopped at its limit:

    1 doctor      python -m minitrans doctor --device gpu
    2 pytest      the CuPy leg of the test suite (pytest -m cupy), each test limited;
                  the fused kernels' tests against their references counted
    3 gradcheck   python -m minitrans gradcheck --backend cupy (float64)
    4 losses      20 training steps on NumPy and on CuPy, the losses compared
    5 train       python -m minitrans train copy --device gpu, to 100% exact match,
                  then --device cpu on the same machine, the two wall times compared
    6 decoding    greedy decoding with the key/value cache against recomputation,
                  then the three timed: with the cache, recomputing, PyTorch recomputing
    7 vs_pytorch  benchmarks/vs_pytorch.py --device gpu: CuPy against PyTorch CUDA
    8 launches    the launches of a tiny training step and of a decoded token,
                  counted on the host (strict backend), against their budgets
    9 text        benchmarks/text_lm.py --recipe gpu --device gpu: nanoGPT's GPU
                  recipe on the lessons' prose, minitrans on CuPy against its twin

The report begins as every results file does (date, machine, commit,
command), then the targets (``targets``), each with the number measured and
met, not met or not measured; ``--file`` also copies it, once the check ends, into
benchmarks/results/device_check/ under the name of a results file. The
commit is the checkout's, from git; where the GPU machine gets a copy of the
tree whose .git is missing or not its own, MINITRANS_COMMIT names it.

Without a usable GPU (CuPy missing, or no device) it says why in one line on
stderr and exits with status 2 at once. ``--rehearse`` runs every section
on a CPU instead, the strict backend standing in for CuPy, in about a
minute: the script's own logic, proven before a GPU is lent.
Exit status: 0 when every section asked for passed, 1 otherwise, 130 when stopped,
2 when it cannot start (no usable GPU, or an OUT_DIR that cannot be a folder).
"""

import argparse
import collections
import datetime
import os
import platform
import shutil
import signal
import sys
import tempfile
import time

BENCHMARKS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, BENCHMARKS)  # the suite's harness, beside this script's folder

import model_runs  # noqa: E402
import sections  # noqa: E402
import targets  # noqa: E402
import text_section  # noqa: E402
from commands import REPO  # noqa: E402
from report import render  # noqa: E402
from sections import Mode, Result  # noqa: E402

from harness import results  # noqa: E402

REPORT_NAME = "device-check.md"
DEFAULT_BUDGET = 450  # seconds: the whole check ends within 8 minutes
MIN_SECTION_SECONDS = 5  # a section with less than this left is skipped

Section = collections.namedtuple("Section", "key title share run")
# The shares follow what each section took on an H200 (the first report in
# benchmarks/results/device_check/): the gradient check, two forwards per
# element with the GPU waited for after each, takes longest. nanoGPT's GPU
# recipe has 0.13 (about a minute of the default budget: 200 steps a side,
# start-up and the held-out loss); the others' shares are scaled by 0.845 to
# leave it room, so that they add up to 1.
SECTIONS = (  # in the order of the report
    Section("doctor", "Environment report: `minitrans doctor`", 0.034, sections.doctor),
    Section("pytest", "The CuPy leg of the test suite", 0.203, sections.pytest_leg),
    Section("gradcheck", "Gradient check on the device, float64", 0.253,
            sections.gradcheck),
    Section("losses", "20 training steps: NumPy against the device", 0.042, model_runs.losses),
    Section("train", "Training the copy task on the device, and on the CPU", 0.084,
            model_runs.train),
    Section("decoding", "Greedy decoding on the device: key/value cache against recomputation",
            0.068, model_runs.decoding),
    Section("vs_pytorch", "minitrans against PyTorch on the device", 0.169,
            model_runs.vs_pytorch),
    Section("launches", "Kernel launches, counted on the host", 0.017, sections.launches),
    Section("text", "nanoGPT's GPU recipe: minitrans against its PyTorch twin", 0.13,
            text_section.text),
)
# The test suite runs last: the section whose length is hardest to foresee
# gets, besides its share, all the time that the others left.
RUN_ORDER = ("doctor", "launches", "gradcheck", "losses", "train", "decoding", "vs_pytorch",
             "text", "pytest")
SECTION_NUMBER = {section.key: number for number, section in enumerate(SECTIONS, 1)}


def gpu_problem():
    """None when CuPy sees a GPU; else why not, in one line, as the backend
    says it (``BackendUnavailableError``)."""
    from minitrans.core import backend

    try:
        backend.use("cupy")
    except backend.BackendUnavailableError as error:
        return " ".join(str(error).split())
    return None


def gpu_name_and_facts():
    """(the GPU's name, a line about it and CUDA), from CuPy."""
    try:
        import cupy

        from minitrans.cli.gpu_environment import cuda_text

        runtime = cupy.cuda.runtime
        properties = runtime.getDeviceProperties(0)
        name = properties["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        memory = properties["totalGlobalMem"] / 2**30
        return name, (f"GPU: {name}, {memory:.0f} GiB; CUDA driver "
                      f"{cuda_text(runtime.driverGetVersion())}, runtime "
                      f"{cuda_text(runtime.runtimeGetVersion())}; CuPy {cupy.__version__}.")
    except Exception as error:  # noqa: BLE001  (the check goes on without the name)
        return None, f"GPU: its name could not be read ({type(error).__name__}: {error})."


def common_facts(mode, budget, start, gpu_line=None, used=None):
    """Lines under the title: the header of every results file (when, on
    what, which code, the command), what ran, the budget."""
    import numpy

    from minitrans.cli.environment import installed_version

    host = (f"host {platform.machine()} with {os.cpu_count()} cores; Python "
            f"{platform.python_version()}, NumPy {numpy.__version__}, PyTorch "
            f"{installed_version('torch')}")
    header = results.header("-", start, f"{gpu_line.rstrip('.')}; {host}" if gpu_line else host,
                            results.git_commit(), results.command_line())
    what = ("a rehearsal on the CPU: the strict backend stands in for CuPy, --device cpu "
            "for --device gpu, a small part of the test suite, the gradient check on numpy, "
            "vs_pytorch's --quick, no decoding by PyTorch, nanoGPT's recipe at tiny sizes"
            if mode.rehearsal else "on the GPU")
    spent = f", {used:.0f} s used" if used is not None else ""
    order = ", ".join(str(SECTION_NUMBER[key]) for key in RUN_ORDER)
    return [header.split("\n", 2)[2].rstrip("\n"),
            f"Run {what}. The sections ran in the order {order}. Budget {budget:.0f} s{spent}."]


class Budget:
    """Each section's time limit: its share of the total (the shares of the
    sections asked for, made to add up to 1), plus what the sections before
    it left unused, and never more than what is left."""

    def __init__(self, total, shares):
        whole = sum(shares.values())
        self.total, self.shares = total, {key: share / whole for key, share in shares.items()}
        self.start, self.carried, self.allowance = time.perf_counter(), 0.0, 0.0

    def limit(self, key):
        self.allowance = self.shares[key] * self.total + self.carried
        return min(self.allowance, self.total - self.used())

    def spend(self, seconds):
        self.carried = max(0.0, self.allowance - seconds)

    def used(self):
        return time.perf_counter() - self.start


def run_sections(mode, budget, chosen, report, measured):
    """Run the ``chosen`` sections in RUN_ORDER within ``budget`` seconds;
    ``report(outcomes)`` after each; what they measure towards the targets
    goes into ``measured``. Returns ({key: Result}, interrupted): Ctrl-C (or
    SIGTERM) stops the section under way and the check."""
    outcomes = {key: Result("skipped", "not among --sections")
                for key in RUN_ORDER if key not in chosen}
    budget = Budget(budget, {s.key: s.share for s in SECTIONS if s.key in chosen})
    by_key = {section.key: section for section in SECTIONS}
    with tempfile.TemporaryDirectory(prefix="device-check-") as workdir:
        context = {"workdir": workdir, "measured": measured}
        for key in (key for key in RUN_ORDER if key in chosen):
            limit = budget.limit(key)
            if limit < MIN_SECTION_SECONDS:
                outcomes[key] = Result("skipped", f"the budget of {budget.total:.0f} s is spent")
                continue
            print(f"device check: {key} (section {SECTION_NUMBER[key]}, limit {limit:.0f} s)",
                  file=sys.stderr, flush=True)
            try:
                outcomes[key] = run_one(by_key[key], mode, limit, context)
                report(outcomes)
            except KeyboardInterrupt:
                outcomes[key] = Result("FAILED", "the check was interrupted here", limit=limit)
                return outcomes, True
            budget.spend(outcomes[key].seconds)
    return outcomes, False


def run_one(section, mode, limit, context):
    """One section's Result; an error of the check's own code is a failure
    of that section, not of the whole check."""
    try:
        result = section.run(mode, limit, context)
    except Exception as error:  # noqa: BLE001
        result = Result("FAILED", f"the check's own code failed: {type(error).__name__}: {error}")
    result.limit = limit
    return result


def stop_on_sigterm():
    """SIGTERM (a timeout from outside) stops the check as Ctrl-C does: the
    running section is killed and the report says what ran."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def refuse(out_dir, reason):
    """No usable GPU: a short report, one line on stderr, status 2."""
    path = write(out_dir, "\n".join([
        "# minitrans device check: no usable GPU", "",
        f"Nothing was run: `backend.use(\"cupy\")` says: {reason}", "",
        "On a machine without a GPU, `--rehearse` runs every section with stand-ins.", ""]))
    print(f"report: {path}")
    print(f"device_check: no usable GPU: {reason}", file=sys.stderr)
    return 2


def write(out_dir, text):
    path = os.path.join(out_dir, REPORT_NAME)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def file_report(path, start):
    """Copy the report into benchmarks/results/device_check/, named as a
    results file of the run's start and commit; return the new path."""
    folder = results.RESULTS / "device_check"
    folder.mkdir(parents=True, exist_ok=True)
    filed = folder / results.file_name(start, results.git_commit())
    shutil.copyfile(path, filed)
    return filed


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", help=f"the folder of the report, {REPORT_NAME}")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET,
                        help=f"seconds for all the sections (default {DEFAULT_BUDGET})")
    parser.add_argument("--rehearse", action="store_true",
                        help="run every section on this CPU with stand-ins for the GPU")
    parser.add_argument("--sections", default=",".join(s.key for s in SECTIONS),
                        help="comma-separated, some of: " + ", ".join(s.key for s in SECTIONS))
    parser.add_argument("--file", action="store_true",
                        help="also copy the report into benchmarks/results/device_check/ when "
                             "the check ends")
    args = parser.parse_args(argv)
    args.sections = [key.strip() for key in args.sections.split(",") if key.strip()]
    unknown = sorted(set(args.sections) - {s.key for s in SECTIONS})
    if unknown or not args.sections:
        parser.error(f"--sections: expected some of {', '.join(s.key for s in SECTIONS)}, "
                     f"got {', '.join(unknown) or 'none'}")
    if not args.budget >= 10 * MIN_SECTION_SECONDS:
        parser.error(f"--budget: expected at least {10 * MIN_SECTION_SECONDS} s, got {args.budget}")
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        os.makedirs(args.out_dir, exist_ok=True)
    except OSError as error:  # a file of that name, one on its way, no permission
        print(f"device_check: {args.out_dir}: cannot be the report's folder "
              f"({error.strerror})", file=sys.stderr)
        return 2
    mode = Mode(rehearsal=args.rehearse)
    problem = None if mode.rehearsal else gpu_problem()
    if problem:
        return refuse(args.out_dir, problem)
    name, gpu_line = (None, None) if mode.rehearsal else gpu_name_and_facts()
    title = ("minitrans device check: rehearsal on the CPU" if mode.rehearsal
             else f"minitrans device check: {name or 'GPU'}")
    start, began = time.perf_counter(), datetime.datetime.now(datetime.timezone.utc)

    measured = {}

    def report(outcomes, used=None):
        facts = common_facts(mode, args.budget, began, gpu_line, used)
        goals = targets.table(measured, mode.rehearsal)
        return write(args.out_dir, render(title, facts, SECTIONS, outcomes, goals))

    stop_on_sigterm()
    outcomes, interrupted = run_sections(mode, args.budget, args.sections, report, measured)
    path = report(outcomes, time.perf_counter() - start)
    print(f"report: {path}")
    if args.file:
        print(f"filed: {os.path.relpath(file_report(path, began))}")
    not_passed = [key for key in args.sections
                  if key not in outcomes or outcomes[key].status != "passed"]
    print("device check: " + (f"not passed: {', '.join(not_passed)}" if not_passed
                              else "every section passed"), file=sys.stderr)
    return 130 if interrupted else (1 if not_passed else 0)


if __name__ == "__main__":
    sys.path.insert(1, REPO)  # minitrans from this checkout, installed or not
    sys.exit(main())

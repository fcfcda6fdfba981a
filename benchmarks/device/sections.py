"""The device check's checks of the code: the doctor's report (section 1),
the CuPy leg of the test suite (2), the gradient check (3) and the kernel
launches counted on the host (8). Each runs one command with a time limit
and turns its outcome into a ``Result`` for the report (sections 4 to 7,
the model at work, are in ``model_runs``, and 9, nanoGPT's GPU recipe, in
``text_section``). What a section measures towards a target also goes into
``context["measured"]`` (``targets``).

On a GPU they use the cupy backend and ``--device gpu``; in a rehearsal
(``Mode.rehearsal``) the stand-ins run instead: the strict backend, whose
arrays refuse host arrays as CuPy's do, ``--device cpu``, a small part of
the test suite, the gradient check on numpy and vs_pytorch's ``--quick``.
"""

import dataclasses
import os
import re
import signal

import parsing as parse
from commands import REPO, child_env, python_command, run_command, tail

# The CuPy leg runs the whole gradient-check report in one test, as section
# 3 does: it is left out of section 2 so that the report runs once.
GRADCHECK_TEST = ("tests/library/test_gradcheck.py::"
                  "test_the_report_passes_every_layer_on_every_backend")
# the rest of the suite: its own CI run
REHEARSAL_TESTS = ["tests/library/test_linear.py",
                   "tests/library/test_kernels.py::test_device_equals_reference"]
# A pytest -v line of a fused kernel's test against its reference, on any backend:
# "tests/library/test_kernels.py::test_device_equals_reference[cupy-layer_norm-float32] PASSED"
FUSED_TEST = re.compile(r"^tests/library/test_kernels\.py::test_device_equals_reference"
                        r"\[\w+-(\w+)-float(?:32|64)\] (PASSED|FAILED|ERROR)\b")
FAILURES_SHOWN = 30


@dataclasses.dataclass(frozen=True)
class Mode:
    """A check on a GPU, or its rehearsal with stand-ins on a CPU."""

    rehearsal: bool = False

    @property
    def backend(self):
        return "strict" if self.rehearsal else "cupy"

    @property
    def gradcheck_backend(self):
        """Section 3's backend. The rehearsal's runs on numpy: it checks the
        section's plumbing, and the strict report is the suite's own test
        (GRADCHECK_TEST), so running it here too would only double its time."""
        return "numpy" if self.rehearsal else "cupy"

    @property
    def device(self):
        return "cpu" if self.rehearsal else "gpu"

    @property
    def test_timeout(self):
        """Seconds for each test of the pytest leg (MINITRANS_TEST_TIMEOUT)."""
        return 30 if self.rehearsal else 60


@dataclasses.dataclass
class Result:
    """One section's outcome: status "passed", "FAILED" or "skipped"; why (one
    line, where not passed); key numbers (Markdown, a line each); details
    (Markdown: a table); output (shown in a collapsible block)."""

    status: str
    why: str = ""
    numbers: list = dataclasses.field(default_factory=list)
    details: str = ""
    output: str = ""
    output_label: str = "output (last lines)"
    command: str = ""
    seconds: float = 0.0
    limit: float = 0.0


def finish(outcome, result):
    """``result`` with the command, its time and, unless the section set it,
    the tail of its output; a command stopped at its limit has FAILED."""
    result.command = " ".join(_shown_path(part) for part in outcome.command[1:])
    result.seconds = outcome.seconds
    result.output = result.output or tail(outcome.output)
    if outcome.timed_out:
        result.status = "FAILED"
        result.why = "stopped at its time limit" + (f"; {result.why}" if result.why else "")
    return result


def _shown_path(part):
    """A path inside the repository relative to it, as a reader would type it."""
    inside = os.path.isabs(part) and part.startswith(REPO + os.sep)
    return os.path.relpath(part, REPO) if inside else part


def failed_command(outcome, what):
    """The Result of a command that exited non-zero: its last line says why
    (``finish`` says why for one stopped at its limit)."""
    if outcome.timed_out:
        return Result("FAILED")
    line = parse.last_line(outcome.stderr) or parse.last_line(outcome.stdout)
    return Result("FAILED", f"{what} exited with status {outcome.returncode}: {line}")


# ------------------------------------------------------------ 1. doctor


def doctor(mode, limit, context):
    device = [] if mode.rehearsal else ["--device", "gpu"]
    outcome = run_command(python_command("-m", "minitrans", "doctor", *device), limit)
    whole = outcome.output
    if outcome.returncode == 0:
        oks = len(re.findall(r":\s+ok\b", outcome.stdout))  # "numpy product:  ok, ..."
        result = Result("passed", numbers=[f"exit status 0; {oks} of its checks say ok"])
    elif "invalid choice: 'doctor'" in outcome.stderr:
        result = Result("FAILED", "this checkout has no `minitrans doctor` command yet")
    else:
        reason = parse.last_line(outcome.stderr)
        result = Result("FAILED", f"exit status {outcome.returncode}: {reason}")
    result.output, result.output_label = whole, "its whole output"
    return finish(outcome, result)


# ------------------------------------------------------------ 2. pytest


def pytest_leg(mode, limit, context):
    marker = mode.backend
    command = python_command("-m", "pytest", "-m", marker, "-v", "-rfEs", "--tb=short",
                             "-o", "console_output_style=classic", "-p", "no:cacheprovider",
                             "--deselect", f"{GRADCHECK_TEST}[{marker}]",
                             *(REHEARSAL_TESTS if mode.rehearsal else []))
    # COLUMNS: the width pytest cuts the summary's error lines to
    env = child_env({"MINITRANS_TEST_TIMEOUT": str(mode.test_timeout), "COLUMNS": "160"})
    outcome = run_command(command, limit, env, stop=signal.SIGINT)
    result = pytest_result(outcome, mode)
    fused = fused_pairs(outcome.output)
    context.setdefault("measured", {})["fused"] = fused
    result.numbers.append(fused_line(fused))
    return finish(outcome, result)


def fused_pairs(output):
    """{"passed": the fused kernels whose every leg of
    test_device_equals_reference passed, "failed": the others}, sorted."""
    outcomes = {}
    for found in map(FUSED_TEST.match, output.splitlines()):
        if found:
            outcomes.setdefault(found[1], []).append(found[2] == "PASSED")
    return {"passed": sorted(name for name, oks in outcomes.items() if all(oks)),
            "failed": sorted(name for name, oks in outcomes.items() if not all(oks))}


def fused_line(fused):
    """"fused = reference on the device: N pairs passed", and any failed."""
    line = f"fused = reference on the device: {len(fused['passed'])} pairs passed"
    if fused["failed"]:
        line += f", {len(fused['failed'])} failed ({', '.join(fused['failed'])})"
    if not fused["passed"] and not fused["failed"]:
        line += " (test_device_equals_reference did not run)"
    return line


def pytest_result(outcome, mode):
    """Passed when pytest exited 0 having passed some tests; the counts, the
    failures with the first line of their errors, and the skips' reasons."""
    counts, seconds, complete = parse.pytest_counts(outcome.output)
    passed = outcome.returncode == 0 and counts["passed"] > 0
    result = Result("passed" if passed else "FAILED", "" if passed else pytest_why(outcome, counts))
    shown = ", ".join(f"{counts[k]} {k}" for k in parse.PYTEST_OUTCOMES if counts[k])
    result.numbers = [
        f"-m {mode.backend}: {shown or 'nothing'}"
        + (f" in {seconds:.0f} s" if complete else " (counted from its lines: no summary)"),
        f"each test limited to {mode.test_timeout} s (MINITRANS_TEST_TIMEOUT); "
        f"`{GRADCHECK_TEST.split('::')[1]}` left to section 3",
    ]
    running = parse.pytest_last_started(outcome.output) if outcome.timed_out else None
    if running:
        result.numbers.append(f"running when it was stopped: `{running}`")
    result.details = "\n\n".join(filter(None, [failure_list(parse.pytest_failures(outcome.output)),
                                                skip_list(parse.pytest_skips(outcome.output))]))
    return result


def pytest_why(outcome, counts):
    """Why the leg did not pass, in a few words."""
    bad = [f"{counts[k]} {k}" for k in ("failed", "error") if counts[k]]
    if bad:
        return ", ".join(bad)
    if outcome.timed_out:
        return ""  # finish says so
    if counts["passed"]:
        return f"pytest exited with status {outcome.returncode}"
    return "no test ran: " + parse.last_line(outcome.output)


def skip_list(skips):
    return "Skipped, by reason:\n\n" + "\n".join(f"- {line}" for line in skips) if skips else ""


def failure_list(failures):
    """The failed tests and the first line of each error, as Markdown."""
    if not failures:
        return ""
    lines = [f"Failures ({len(failures)}):", ""]
    lines += [f"- `{node}`: {error or '(see the output)'}" for node, error in
              failures[:FAILURES_SHOWN]]
    if len(failures) > FAILURES_SHOWN:
        lines.append(f"- ... and {len(failures) - FAILURES_SHOWN} more")
    return "\n".join(lines)


# ------------------------------------------------------------ 3. gradcheck


def gradcheck(mode, limit, context):
    command = python_command("-m", "minitrans", "gradcheck", "--backend", mode.gradcheck_backend)
    outcome = run_command(command, limit)
    rows = parse.gradcheck_rows(outcome.stdout)
    failed = [row for row in rows if not row[4]]
    if outcome.returncode != 0 or not rows:
        result = failed_command(outcome, "gradcheck") if not failed else Result(
            "FAILED", f"{len(failed)} of {len(rows)} tensors failed")
    else:
        result = Result("passed")
    if rows:
        worst = max(rows, key=lambda row: row[3])
        result.numbers = [
            f"{len(rows)} tensors (float64, {mode.gradcheck_backend}): "
            f"{len(rows) - len(failed)} pass, "
            f"{len(failed)} fail; tolerance 1e-6",
            f"worst relative error {worst[3]:.2e}: {worst[0]}, `{worst[1]}` {worst[2]}",
        ]
    if not rows:  # stopped before its table: what its progress lines say
        result.numbers = gradcheck_progress_numbers(parse.gradcheck_progress(outcome.stderr))
    result.details = "\n".join(f"- FAIL: {row[0]}, `{row[1]}` {row[2]}: {row[3]:.2e}"
                               for row in failed[:FAILURES_SHOWN])
    result.output, result.output_label = outcome.output, "every tensor (the whole table)"
    return finish(outcome, result)


def gradcheck_progress_numbers(checks):
    """Key numbers of a gradient check that ended without its table, from
    parse.gradcheck_progress's rows."""
    if not checks:
        return ["no layer check ended"]
    failed = [check[1] for check in checks if not check[3]]
    last = checks[-1]
    return [f"{len(checks)} layer checks ended ({sum(c[2] for c in checks)} tensors) in "
            f"{last[5]:.0f} s, the last `{last[1]}`: "
            + (f"{len(failed)} failed ({', '.join(failed[:3])})" if failed else "every one passed")
            + f"; worst relative error {max(c[4] for c in checks):.1e}"]


# ------------------------------------------------------------ 8. launches


def launches(mode, limit, context):
    """The launches of a tiny training step and of a decoded token, counted
    on the strict backend (on the host, on a GPU machine too), beside their
    budgets."""
    outcome = run_command(python_command("benchmarks/device/launch_counts.py"), limit)
    found = parse.result_json(outcome.stdout)
    if not found:
        return finish(outcome, failed_command(outcome, "the launch count"))
    context.setdefault("measured", {})["launches"] = found
    result = Result("passed", numbers=[
        f"a tiny training step: {found['step']} launches (budget {found['step_budget']}, "
        f"a quarter of the unfused {found['unfused_step']})",
        f"a decoded token: {found['token']} launches (budget {found['token_budget']}, "
        f"a quarter of the unfused {found['unfused_token']})"])
    result.details = "\n".join(
        ["Most frequent launches of the step:", "", "```text", *found["step_kinds"], "```", "",
         "Of the decoding the token was counted from (9 tokens):", "", "```text",
         *found["decoding_kinds"], "```"])
    return finish(outcome, result)

"""Reading the sections' output for the device check's report: pytest's
verbose lines and summary, the gradient check's table, the trainer's log
and the ``RESULT {json}`` line of ``backend_agreement.py``.

Each reader takes text and never raises on text it does not expect: a
section stopped at its limit leaves its output cut anywhere.
"""

import json
import math
import re

PYTEST_OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed", "deselected")
# "tests/test_x.py::test_y[cupy] PASSED   [ 10%]", a line of pytest -v per test
_VERBOSE_LINE = re.compile(r"^(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")
# "=== 3 failed, 540 passed, 2 skipped, 2068 deselected in 88.20s (0:01:28) ==="
_SUMMARY_LINE = re.compile(r"^=+ (.*\d+ (?:passed|failed|skipped|errors?|deselected).*) in "
                           r"([\d.]+)s\b")
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)")
# "FAILED tests/test_x.py::test_y[cupy] - AssertionError: ..." in -rfE's summary
_FAILURE_LINE = re.compile(r"^(FAILED|ERROR) (\S+)(?: - (.*))?$")


def pytest_counts(output):
    """{outcome: count} from pytest's last summary line, and its seconds;
    where the run was stopped before it, counted from the verbose lines
    (deselected unknown). Returns (counts, seconds or None, complete)."""
    for line in reversed(output.splitlines()):
        found = _SUMMARY_LINE.match(line.strip())
        if found:
            counts = {outcome: 0 for outcome in PYTEST_OUTCOMES}
            for number, outcome in _COUNT.findall(found.group(1)):
                counts["error" if outcome.startswith("error") else outcome] += int(number)
            return counts, float(found.group(2)), True
    counts = {outcome: 0 for outcome in PYTEST_OUTCOMES}
    for line in output.splitlines():
        found = _VERBOSE_LINE.match(line)
        if found:
            word = found.group(2).lower()
            counts[{"xfail": "xfailed", "xpass": "xpassed"}.get(word, word)] += 1
    return counts, None, False


def pytest_failures(output):
    """[(node id, first line of its error)] from the -rfE summary, in order;
    from the verbose lines (without their errors) where there is none."""
    failures = []
    for line in output.splitlines():
        found = _FAILURE_LINE.match(line.strip())
        if found and "::" in found.group(2):
            failures.append((found.group(2), (found.group(3) or "").strip()))
    if failures:
        return failures
    return [(found.group(1), "") for found in map(_VERBOSE_LINE.match, output.splitlines())
            if found and found.group(2) in ("FAILED", "ERROR")]


def pytest_skips(output, shown=10):
    """The first ``shown`` lines of -rs's summary, "[count] file:line: reason"."""
    skips = [line.strip()[len("SKIPPED "):] for line in output.splitlines()
             if re.match(r"^SKIPPED \[\d+\] ", line.strip())]
    return skips[:shown] + ([f"... and {len(skips) - shown} more"] if len(skips) > shown else [])


def pytest_last_started(output):
    """The node id of the last test pytest -v started but never reported
    on (the one running when the run was stopped), or None."""
    last = None
    for line in output.splitlines():
        if _VERBOSE_LINE.match(line):
            last = None
        elif re.match(r"^\S+::\S+ ?$", line):
            last = line.strip()
    return last


def gradcheck_rows(output):
    """[(layer, tensor, shape, relative error, passed)] of the table that
    ``minitrans gradcheck`` prints, columns two spaces or more apart."""
    rows = []
    for line in output.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) != 5 or cells[4] not in ("pass", "FAIL"):
            continue
        rows.append((cells[0], cells[1], cells[2], _number(cells[3]), cells[4] == "pass"))
    return rows


# "layer check 12: Transformer + loss: 18 tensors pass, worst 3.1e-11, 41.0 s" on stderr
_LAYER_CHECK_LINE = re.compile(r"^layer check (\d+): (.*): (\d+) tensors? (pass|FAIL), "
                               r"worst (\S+), ([\d.]+) s$")


def gradcheck_progress(output):
    """[(number, label, tensors, passed, worst error, seconds)] of the lines
    ``minitrans gradcheck`` writes as each layer check ends: what a check
    stopped before its table did."""
    found = (_LAYER_CHECK_LINE.match(line.strip()) for line in output.splitlines())
    return [(int(m[1]), m[2], int(m[3]), m[4] == "pass", _number(m[5]), float(m[6]))
            for m in found if m]


def training_summary(output):
    """From ``minitrans train``'s log: {"exact_match": percent, "pairs",
    "steps"} of its closing line, and the tokens/s of its last training
    line; fields it did not print are absent."""
    summary = {}
    closing = re.findall(r"held-out exact match ([\d.]+)% on (\d+) pairs after (\d+) steps",
                         output)
    if closing:
        percent, pairs, steps = closing[-1]
        summary.update(exact_match=float(percent), pairs=int(pairs), steps=int(steps))
    rates = re.findall(r"([\d,]+) tok/s", output)
    if rates:
        summary["tokens_per_second"] = int(rates[-1].replace(",", ""))
    evaluations = re.findall(r"step (\d+): held-out loss", output)
    summary["evaluations"] = len(evaluations)
    return summary


RESULT_PREFIX = "RESULT "  # backend_agreement.py's last line: RESULT {json}


def result_json(output, prefix=RESULT_PREFIX):
    """The object of the last ``RESULT {json}`` line, or None."""
    for line in reversed(output.splitlines()):
        if line.startswith(prefix):
            try:
                return json.loads(line[len(prefix):])
            except ValueError:
                return None
    return None


def last_line(text):
    """The last non-empty line of ``text`` ("" for none)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _number(text):
    try:
        return float(text)
    except ValueError:
        return math.inf  # "nan" parses; anything else is no number at all

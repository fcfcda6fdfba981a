"""Sections 4 to 7 of the device check: the model trained and run on the
device, each against a reference (NumPy's losses, decoding by
recomputation, PyTorch's step). Sections 1 to 3, the checks of the code,
and the ``Mode`` and ``Result`` they all share are in ``sections``.
"""

import importlib.util
import json
import os

import parsing as parse
from commands import python_command, run_command, tail
from sections import Result, failed_command, finish

from harness.report import median_steps, report

# ------------------------------------------------------------ 4. losses


def losses(mode, limit, context):
    command = python_command("benchmarks/device/backend_agreement.py", "losses",
                             "--backends", f"numpy,{mode.backend}", "--steps", "20")
    outcome = run_command(command, limit)
    found = parse.result_json(outcome.stdout)
    if not found:
        return finish(outcome, failed_command(outcome, "the loss comparison"))
    runs = found["runs"]
    result = Result("passed" if found["passed"] else "FAILED")
    first, second = runs[0]["backends"]
    steps = len(runs[0]["losses"][first])
    worst = ", ".join(f"{run['worst']:.1e} at dropout {run['dropout']}" for run in runs)
    result.numbers = [f"{steps} steps, {first} against {second}: worst relative difference "
                      f"{worst} (tolerance {runs[0]['rtol']:g} per step)"]
    result.numbers += [verdict(run) for run in runs]
    if not found["passed"]:
        result.why = "; ".join(f"dropout {run['dropout']}: {run['worst']:.1e} > {run['rtol']:g}"
                               for run in runs if not run["passed"])
    result.details = loss_table(runs)
    result.output = without_result_line(outcome)
    return finish(outcome, result)


def verdict(run):
    """"dropout 0.1: agree, identical" or where the two differed most."""
    where = f", worst at step {run['worst_step']}" if run["worst"] else ", identical"
    return f"dropout {run['dropout']}: " + ("agree" if run["passed"] else "**differ**") + where


def loss_table(runs):
    """The losses of every run side by side, a row per step."""
    header = ["step"]
    for run in runs:
        first, second = run["backends"]
        header += [f"{first} (p={run['dropout']})", f"{second} (p={run['dropout']})", "rel. diff."]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for step in range(len(runs[0]["losses"][runs[0]["backends"][0]])):
        cells = [str(step + 1)]
        for run in runs:
            a, b = (run["losses"][name][step] for name in run["backends"])
            cells += [f"{a:.6f}", f"{b:.6f}", f"{abs(b - a) / max(abs(a), 1e-30):.1e}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------ 5. train


def train(mode, limit, context):
    folder = os.path.join(context["workdir"], "copy")
    command = python_command("-m", "minitrans", "train", "copy", "--device", mode.device,
                             "--out", folder, "--no-progress")
    outcome = run_command(command, limit)
    summary = parse.training_summary(outcome.output)
    best = os.path.join(folder, "best.npz")
    if os.path.exists(best):
        context["checkpoint"] = best
    if outcome.returncode != 0 or "exact_match" not in summary:
        return finish(outcome, failed_command(outcome, "minitrans train"))
    reached = summary["exact_match"] >= 100.0
    result = Result("passed" if reached else "FAILED",
                    "" if reached else f"exact match {summary['exact_match']}%, not 100%")
    result.numbers = [
        f"held-out exact match {summary['exact_match']:.1f}% on {summary['pairs']} pairs "
        f"after {summary['steps']} steps ({summary['evaluations']} evaluations)",
        f"wall time {outcome.seconds:.1f} s, start-up, evaluations and checkpoints included"
        + (f"; last training line {summary['tokens_per_second']:,} tokens/s"
           if "tokens_per_second" in summary else ""),
    ]
    return finish(outcome, result)


# ------------------------------------------------------------ 6. decoding


def decoding(mode, limit, context):
    checkpoint = context.get("checkpoint")
    command = python_command("benchmarks/device/backend_agreement.py", "decode",
                             "--backend", mode.backend,
                             *(["--checkpoint", checkpoint] if checkpoint else []))
    outcome = run_command(command, limit)
    found = parse.result_json(outcome.stdout)
    if not found:
        return finish(outcome, failed_command(outcome, "the decoding check"))
    result = Result("passed" if found["passed"] else "FAILED")
    if not found["passed"]:
        result.why = ("different tokens" if not found["same_tokens"]
                      else f"logits differ by {found['logit_error']:.1e} of the largest")
    speedup = found["recomputed_seconds"] / max(found["cached_seconds"], 1e-9)
    result.numbers = [
        f"same tokens: {'yes' if found['same_tokens'] else '**no**'}; largest logit difference "
        f"{found['logit_error']:.1e} of the largest logit",
        f"key/value cache {found['cached_seconds']:.2f} s, recomputing the prefix "
        f"{found['recomputed_seconds']:.2f} s ({speedup:.1f}x); "
        f"exact match {found['exact_match']:.1%}",
        f"model: {found['model']}; {found['pairs']} held-out sources, greedy, float32",
    ]
    result.output = without_result_line(outcome)
    return finish(outcome, result)


def without_result_line(outcome):
    """The output but its RESULT line, whose numbers the section shows."""
    lines = [line for line in outcome.output.splitlines()
             if not line.startswith(parse.RESULT_PREFIX)]
    return tail("\n".join(lines)) or "(nothing but its result)"


# ------------------------------------------------------------ 7. vs_pytorch

# Flags that fit the section's share: three rounds, no untuned pair (on a GPU
# there is none anyway), no torch.compile. The rehearsal runs the script's
# smoke run on the tiny config, its untuned pair included: the suite's test
# of the script end to end (tests/project/test_device_check.py). Its results
# file goes to the check's working folder: the check's own report holds the
# table.
VS_PYTORCH_FLAGS = {False: ["--device", "gpu", "--rounds", "3", "--no-untuned"],
                    True: ["--quick", "--configs", "tiny", "--pause", "0"]}


def vs_pytorch(mode, limit, context):
    if importlib.util.find_spec("torch") is None:  # the reference is missing, not broken
        return Result("skipped", "PyTorch is not installed: pip install torch")
    raw = os.path.join(context["workdir"], "vs_pytorch.json")
    command = python_command("benchmarks/vs_pytorch.py", *VS_PYTORCH_FLAGS[mode.rehearsal],
                             "--json", raw, "--results", context["workdir"])
    outcome = run_command(command, limit)
    measured = read_json(raw)
    if outcome.returncode == 0:
        result = Result("passed", details=outcome.stdout.strip())
    else:
        result = failed_command(outcome, "vs_pytorch.py")
        if measured and measured.get("configs"):
            result.details = "Measured before it stopped:\n\n" + partial_report(measured)
    result.numbers = step_ratios(measured)
    result.output = tail(outcome.stderr) or "(nothing on standard error)"
    result.output_label = "standard error (last lines; the report is above)"
    return finish(outcome, result)


def read_json(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def partial_report(measured):
    """vs_pytorch's own report of the configs it finished."""
    try:
        return report(measured)
    except (KeyError, TypeError, ZeroDivisionError) as error:  # a config cut short
        return f"(no report: {type(error).__name__}: {error})"


def step_ratios(measured):
    """A line per config: the median steps of both and their ratio."""
    lines = []
    for name, result in ((measured or {}).get("configs") or {}).items():
        steps = median_steps(result)
        if "minitrans" in steps and "torch" in steps:
            ours, theirs = steps["minitrans"], steps["torch"]
            lines.append(f"{name}: minitrans {ours * 1e3:.1f} ms, PyTorch {theirs * 1e3:.1f} ms "
                         f"per step (minitrans / PyTorch {ours / theirs:.2f})")
    return lines

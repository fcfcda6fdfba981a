"""Sections 4 to 7 of the device check: the model trained and run on the
device, each against a reference (NumPy's losses, decoding by
recomputation, PyTorch's step). Sections 1 to 3 and 8, the checks of the
code, and the ``Mode`` and ``Result`` they all share are in ``sections``.
What a section measures towards a target also goes into
``context["measured"]`` (``targets``).
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


def train_command(device, folder):
    return python_command("-m", "minitrans", "train", "copy", "--device", device,
                          "--out", folder, "--no-progress")


def train(mode, limit, context):
    folder = os.path.join(context["workdir"], "copy")
    outcome = run_command(train_command(mode.device, folder), limit)
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
    result = finish(outcome, result)
    if reached:
        line, seconds = train_on_the_cpu(context, outcome.seconds, limit - outcome.seconds)
        result.numbers.append(line)
        result.seconds += seconds
    return result


def train_on_the_cpu(context, seconds, limit):
    """`train copy --device cpu` on the same machine, for at most ``limit``
    seconds, against the device's ``seconds`` to 100%: (a line of numbers,
    the seconds it ran)."""
    measured = context.setdefault("measured", {})
    if limit < 1:
        return "--device cpu: not run, the section's time was spent", 0.0
    folder = os.path.join(context["workdir"], "copy-cpu")
    outcome = run_command(train_command("cpu", folder), limit)
    summary = parse.training_summary(outcome.output)
    reached = outcome.returncode == 0 and summary.get("exact_match", 0.0) >= 100.0
    measured["train"] = {"gpu": seconds, "cpu": outcome.seconds, "cpu_reached": reached}
    if reached:
        return (f"--device cpu on this machine: 100% in {outcome.seconds:.1f} s; "
                f"device / cpu {seconds / outcome.seconds:.2f} (target < 1)"), outcome.seconds
    why = "stopped at its limit" if outcome.timed_out else parse.last_line(outcome.output)
    return (f"--device cpu on this machine: not at 100% after {outcome.seconds:.1f} s ({why})",
            outcome.seconds)


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
    result = finish(outcome, result)
    if not mode.rehearsal:  # nn.Transformer recomputing on a CPU: a minute, too long
        lines, seconds = decoding_against_pytorch(context, limit - outcome.seconds)
        result.numbers += lines
        result.seconds += seconds
    else:
        result.numbers.append("against PyTorch: not in a rehearsal (PyTorch recomputing "
                              "on a CPU takes a minute)")
    return result


def decoding_against_pytorch(context, limit):
    """vs_pytorch.py's decoding alone (32 sequences x 64 tokens, small
    config): minitrans with the cache and recomputing, PyTorch recomputing.
    (Lines of numbers, the seconds it ran); the times go to
    ``context["measured"]``."""
    if importlib.util.find_spec("torch") is None:
        return ["against PyTorch: not measured, PyTorch is not installed"], 0.0
    if limit < 5:
        return ["against PyTorch: not measured, the section's time was spent"], 0.0
    raw = os.path.join(context["workdir"], "vs_pytorch_decoding.json")
    command = python_command("benchmarks/vs_pytorch.py", "--device", "gpu", "--only-decoding",
                             "--rounds", "3", "--json", raw, "--results", context["workdir"])
    outcome = run_command(command, limit)
    times = decoding_times(read_json(raw))
    if not times:
        why = "stopped at its limit" if outcome.timed_out else parse.last_line(outcome.output)
        return [f"against PyTorch: not measured ({why})"], outcome.seconds
    context.setdefault("measured", {})["decoding"] = times
    return decoding_lines(times), outcome.seconds


def decoding_times(measured):
    """{"cached", "recomputed", "torch"}: the best seconds of each, from
    vs_pytorch.py's raw measurements; None where it has no decoding."""
    decoding = (measured or {}).get("decoding") or {}
    if not all(decoding.get(key) for key in ("cached", "recomputed", "torch")):
        return None
    return {key: min(decoding[key]) for key in ("cached", "recomputed", "torch")}


def decoding_lines(times):
    cached, recomputed, torch = times["cached"], times["recomputed"], times["torch"]
    return [f"small config, 32 sequences x 64 tokens: cache {cached:.3f} s, minitrans "
            f"recomputing {recomputed:.3f} s, PyTorch recomputing {torch:.3f} s (best of runs)",
            f"cache / PyTorch recomputing {cached / torch:.2f} (target <= 1); minitrans "
            f"recomputing / cache {recomputed / cached:.1f}x (target >= 3x)"]


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
# table. Its decoding comparison runs in section 6.
VS_PYTORCH_FLAGS = {False: ["--device", "gpu", "--rounds", "3", "--no-untuned", "--no-decoding"],
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
    context.setdefault("measured", {}).update(training_numbers(measured))
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


def training_numbers(measured):
    """{"steps", "memory", "skipped"} for ``targets``, from vs_pytorch.py's
    raw measurements: the median steps and the device memory of each config."""
    steps, memory = {}, {}
    for name, result in ((measured or {}).get("configs") or {}).items():
        median = median_steps(result)
        if "minitrans" in median and "torch" in median:
            steps[name] = (median["minitrans"], median["torch"])
        held = result.get("memory") or {}
        pair = [(held.get(label) or {}).get("device_bytes") for label in ("minitrans", "torch")]
        if all(pair):
            memory[name] = tuple(pair)
    return {"steps": steps, "memory": memory, "skipped": (measured or {}).get("skipped") or {}}

"""Section 9 of the device check: nanoGPT's GPU recipe, minitrans on CuPy
against its PyTorch twin on CUDA (``benchmarks/text_lm.py``): the same
model from the same weights on the same windows, a fixed number of steps
each, in turns. Reported: the median step (after a few warm-up steps) and
tokens per second of both, their training losses at the end (the mean of
the last steps') and their held-out losses over the first windows of the
held-out text.

The GPU machine has no Tiny Shakespeare and cannot download it: the text is
one the repository holds, the Markdown prose of the lessons (``--text
lessons``, as lesson 16 gathers it). The recipe keeps its dropout of 0.2,
and each side draws masks of its own, so the two are two trainings of one
model that differ as two seeds do: their losses are compared loosely
(``text_lm.DROPOUT_LOSS_GAP``), never step by step. The rehearsal runs the
same command at tiny sizes for a handful of steps, minitrans on the strict
backend and PyTorch on the CPU. What it measures goes to
``context["measured"]["text"]`` (``targets``).
"""

import importlib.util
import math

import parsing as parse
from commands import python_command, run_command
from model_runs import without_result_line
from sections import Result, failed_command, finish

STEPS = 200  # each side's steps on the GPU: about a minute of the budget, both sides
REHEARSAL_STEPS = 6
FLAGS = {False: ["--recipe", "gpu", "--device", "gpu", "--steps", str(STEPS)],
         True: ["--recipe", "tiny", "--device", "cpu", "--backend", "strict",
                "--steps", str(REHEARSAL_STEPS)]}


def text(mode, limit, context):
    if importlib.util.find_spec("torch") is None:  # the twin is missing, not broken
        return Result("skipped", "PyTorch is not installed: pip install torch")
    command = python_command("benchmarks/text_lm.py", "--text", "lessons", "--result-line",
                             *FLAGS[mode.rehearsal])
    outcome = run_command(command, limit)
    found = parse.result_json(outcome.stdout)
    if not found:
        return finish(outcome, failed_command(outcome, "text_lm.py"))
    context.setdefault("measured", {})["text"] = measured_numbers(found)
    result = text_result(found)
    result.output = without_result_line(outcome)
    return finish(outcome, result)


def measured_numbers(found):
    """{"steps": (minitrans's median step, the twin's) in seconds,
    "held_out": (their held-out losses), "gap_allowed"} for ``targets``."""
    ours, theirs = found["minitrans"], found["twin"]
    return {"steps": (ours["step_ms"] / 1e3, theirs["step_ms"] / 1e3),
            "held_out": (ours["loss"], theirs["loss"]), "gap_allowed": found["gap_allowed"]}


def text_result(found):
    """The section's Result from text_lm.py's RESULT numbers: passed when
    both sides trained to finite losses (speed and the losses' gap are
    targets, judged in the targets table)."""
    ours, theirs = found["minitrans"], found["twin"]
    losses = [side[key] for side in (ours, theirs) for key in ("loss", "train_loss")]
    finite = all(math.isfinite(loss) for loss in losses)
    result = Result("passed" if finite else "FAILED",
                    "" if finite else "a loss is not finite (NaN or infinity)")
    result.numbers = [
        f"median step after {found['warm']} warm-up steps: minitrans {ours['step_ms']:.1f} ms, "
        f"PyTorch {theirs['step_ms']:.1f} ms (minitrans / PyTorch "
        f"{ours['step_ms'] / theirs['step_ms']:.2f}); tokens/s {ours['tokens_per_s']:,.0f} "
        f"and {theirs['tokens_per_s']:,.0f}",
        f"held-out loss over {found['eval_windows']} windows: minitrans {ours['loss']:.4f}, "
        f"PyTorch {theirs['loss']:.4f} nats/char (gap {abs(ours['loss'] - theirs['loss']):.4f},"
        f" allowed {found['gap_allowed']})",
        f"training loss at the end (mean of the last steps): minitrans "
        f"{ours['train_loss']:.4f}, PyTorch {theirs['train_loss']:.4f}",
        f"wall time of the {found['steps']} steps: minitrans {ours['wall_s']:.1f} s, "
        f"PyTorch {theirs['wall_s']:.1f} s",
    ]
    result.details = f"Setup: {found['setup']}." + (
        f" With dropout {found['dropout']} the two sides draw masks of their own: two "
        "trainings that differ as two seeds do, their losses compared loosely."
        if found["dropout"] else "")
    return result

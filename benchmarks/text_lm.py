"""nanoGPT's CPU recipe on a text, trained by minitrans and by its PyTorch
twin side by side, in one run.

Run from the repository root, after `pip install ".[train,torch]"`:

    python benchmarks/text_lm.py --data input.txt               # 2,000 steps each
    python benchmarks/text_lm.py --data input.txt --steps 40    # a smoke run: no file written
    python benchmarks/text_lm.py --text lessons --recipe gpu --device gpu --steps 200

The text of nanoGPT's example is Tiny Shakespeare, char-rnn's
https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt
(1.1 MB, 65 distinct characters); its README reports a held-out loss of
1.88 for this recipe on a CPU.

Both sides train the same model from the same initial weights on the same
batches. minitrans trains as `minitrans train text --data FILE` does (its
TextTrainer: NumPy, float32, its default workers). The twin is
``minitrans.interop.torch``'s PyTorch copy of the model, in eager mode,
with AdamW's fused kernel (``fused=True``) and a thread per core: PyTorch's
best documented setting on a CPU short of compiling the model. PyTorch's
untuned figure, its default AdamW, is timed beside it over UNTUNED_STEPS
steps. The two sides take turns of TURN steps, so that whatever else the
machine does falls on both. Where minitrans's workers are processes (on
Linux), the same trainer with its workers on threads is timed over
UNTUNED_STEPS steps too: what the processes save (lesson 21).

Reported: the median time of a step and tokens per second, the wall time
of all the steps, and the held-out loss at the end, in nats per character
over every full window of the held-out tenth, with its bits per character.
The targets: a held-out loss of at most TARGET_LOSS, minitrans's wall time
at most the twin's, and the two held-out losses within LOSS_GAP nats of
each other (float32 rounding apart, both train the same model).

``--recipe gpu`` is nanoGPT's GPU recipe (its shakespeare_char config: 6
layers, 6 heads, width 384, windows of 256, batches of 64, dropout 0.2,
5,000 steps; the learning rates, warm-up, decay and clipping the CPU's);
``--recipe tiny`` the same at sizes small enough for a test. With them the
untuned twin is not timed, the median step leaves out the first few steps
(a GPU's first steps compile kernels), the held-out loss is measured over
its first windows only, and with dropout the two sides draw masks of their
own: two trainings that differ as two seeds do, so the held-out losses are
held to DROPOUT_LOSS_GAP instead. ``--device gpu`` trains minitrans on CuPy
and the twin on CUDA, each step waited for; ``--backend strict`` rehearses
the device's path on a CPU. ``--text lessons`` trains on a text the
repository holds, the Markdown prose of the lessons gathered as lesson 16
gathers it; ``--result-line`` ends the output with ``RESULT {json}``, the
run's numbers, which the device check reads (benchmarks/device/text_section.py).
"""

import argparse
import contextlib
import json
import math
import os
import pathlib
import statistics
import sys
import tempfile
import time

import minitrans
from minitrans.core import backend
from minitrans.data.text_corpus import TextWindows, every_window
from minitrans.training.optimisation.parallel import DataParallel
from minitrans.training.text_recipe import text_loss
from minitrans.training.text_run import new_text_trainer, text_train_config
from minitrans_course.course_prose import lesson_prose

from harness import machine, results

TARGET_LOSS = 1.90  # nanoGPT's 1.88 on a CPU, with room for another seed
LOSS_GAP = 0.02  # nats: the two implementations of one training, in float32
# With dropout each side draws masks of its own: two trainings of one model
# that differ as two seeds do, their held-out losses a few hundredths apart.
DROPOUT_LOSS_GAP = 0.05
TURN = 100  # steps each side takes in a turn
UNTUNED_STEPS = 100
EVAL_BATCH = 32
RESULT_PREFIX = "RESULT "  # --result-line's line: RESULT {json}
TRAIN_TAIL = 10  # the training loss at the end: the mean of the last steps' losses


class Recipe:
    """A recipe's sizes and schedule beyond `train text`'s defaults (which
    are nanoGPT's CPU recipe): ``model`` and ``train`` override them;
    ``steps`` the full run's; the held-out loss over at most
    ``eval_windows`` windows (None: all); the untuned twin timed for
    ``untuned`` steps; the median step taken after ``warm`` steps."""

    def __init__(self, title, model=None, train=None, steps=2000, eval_windows=None,
                 untuned=UNTUNED_STEPS, warm=0):
        self.title, self.model, self.train = title, model or {}, train or {}
        self.steps, self.eval_windows, self.untuned, self.warm = steps, eval_windows, untuned, warm


RECIPES = {
    "cpu": Recipe("nanoGPT's CPU recipe"),
    # nanoGPT's config/train_shakespeare_char.py: lr, its floor and warm-up as the CPU's
    "gpu": Recipe("nanoGPT's GPU recipe", model=dict(N=6, h=6, d_model=384, dropout=0.2),
                  train=dict(block_size=256, batch_size=64), steps=5000, eval_windows=100,
                  untuned=0, warm=5),
    "tiny": Recipe("nanoGPT's recipe at tiny sizes", model=dict(N=2, h=2, d_model=32, dropout=0.2),
                   train=dict(block_size=32, batch_size=4), steps=200, eval_windows=8,
                   untuned=0, warm=1),
}
LESSONS = pathlib.Path(__file__).resolve().parents[1] / "lessons"
BACKEND_NAMES = {"numpy": "NumPy", "strict": "the strict backend", "cupy": "CuPy"}


def minitrans_side(data, steps, out_dir, recipe=RECIPES["cpu"]):
    """The TextTrainer of `minitrans train text --data DATA --steps STEPS`."""
    config = text_train_config(data=data, steps=steps, eval_every=steps, out_dir=out_dir,
                               warmup=min(100, steps),  # a smoke run's few steps: warm-up in them
                               **recipe.train)
    return new_text_trainer(config, recipe.model or None, progress=False,
                            log=lambda message: None)


class TorchSide:
    """The twin of the trainer's model, trained by GPT's recipe in PyTorch
    on the trainer's stream of windows (the same seed, the same batches),
    on ``device`` ("cpu" or "cuda")."""

    def __init__(self, torch, trainer, fused=True, device="cpu"):
        from minitrans.interop.torch import (TokenCrossEntropy, clip_grad_norm, gpt_optimizer,
                                             gpt_schedule, to_torch)

        config = trainer.config
        self.torch, self.clip, self.device = torch, clip_grad_norm, device
        self.model = to_torch(trainer.model, device)  # before any step: the same weights
        options = {"fused": True} if fused else {}
        self.optimizer = gpt_optimizer(self.model, lr=config.peak_lr,
                                       weight_decay=config.weight_decay, **options)
        self.schedule = gpt_schedule(self.optimizer, config.peak_lr, config.min_lr,
                                     config.warmup, config.steps)
        self.loss_fn = TokenCrossEntropy()
        self.clip_norm = config.clip_norm
        task = trainer.task
        self.windows = TextWindows(task.train, task.block_size, config.batch_size,
                                   rng=config.seed)
        self.losses = []

    def tensors(self, batch):
        """The batch's inputs and targets as tensors on the twin's device
        (the windows come on minitrans's backend: through the host)."""
        return (self.torch.from_numpy(backend.to_numpy(a)).to(self.device)
                for a in (batch.tgt_in, batch.tgt_out))

    def step(self):
        x, y = self.tensors(self.windows.batch())
        self.optimizer.zero_grad()
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        self.clip(self.model.parameters(), self.clip_norm)
        self.optimizer.step()
        self.schedule.step()
        self.losses.append(loss.item())
        return self.losses[-1]

    def held_out_loss(self, tokens, block_size, windows=None):
        """The mean loss per predicted token over the full windows of
        ``tokens``, the first ``windows`` of them (None: all)."""
        if windows is not None:
            tokens = tokens[: windows * block_size + 1]
        total, count = 0.0, 0
        was_training = self.model.training
        self.model.eval()  # no dropout, as minitrans's evaluation
        with self.torch.no_grad():
            for batch in every_window(tokens, block_size, EVAL_BATCH):
                x, y = self.tensors(batch)
                total += self.loss_fn(self.model(x), y).item() * batch.num_tokens
                count += batch.num_tokens
        self.model.train(was_training)
        return total / count

    def synchronize(self):
        if self.device == "cuda":
            self.torch.cuda.synchronize()


def device_synchronize():
    """Wait for the GPU's queued work (CuPy returns before its kernels end);
    nothing to wait for on the host."""
    if backend.backend_name() == "cupy":
        backend.get_xp().cuda.Device().synchronize()


def timed(step, synchronize=lambda: None):
    start = time.perf_counter()
    step()
    synchronize()
    return time.perf_counter() - start


def train_in_turns(trainer, twin, steps, turn, report):
    """Both sides' step times, ``turn`` steps each in alternation."""
    ours, theirs = [], []
    while len(ours) < steps:
        count = min(turn, steps - len(ours))
        ours += [timed(trainer.train_step, device_synchronize) for _ in range(count)]
        theirs += [timed(twin.step, twin.synchronize) for _ in range(count)]
        report(f"step {len(ours)}: minitrans loss {trainer.history['loss'][-1]:.4f}")
    return ours, theirs


def summary(times, tokens_per_step, loss, warm=0):
    """The row numbers of one side: the median of the steps after the
    first ``warm``."""
    median = statistics.median(times[warm:] or times)
    return {"step_ms": 1e3 * median, "tokens_per_s": tokens_per_step / median,
            "wall_s": sum(times), "loss": loss,
            "bits": None if loss is None else loss / math.log(2)}


def table(rows):
    lines = ["| | median step (ms) | tokens/s | wall time of the steps (s) | held-out loss "
             "(nats/char) | bits/char |", "| --- | --- | --- | --- | --- | --- |"]
    for name, row in rows.items():
        loss = "-" if row["loss"] is None else f"{row['loss']:.4f}"
        bits = "-" if row["bits"] is None else f"{row['bits']:.4f}"
        wall = "-" if row["wall_s"] is None else f"{row['wall_s']:.1f}"
        lines.append(f"| {name} | {row['step_ms']:.1f} | {row['tokens_per_s']:,.0f} | {wall} "
                     f"| {loss} | {bits} |")
    return "\n".join(lines)


def loss_gap(dropout):
    """The held-out losses' largest honest gap: float32's rounding apart
    without dropout; with it, the two sides' masks apart (DROPOUT_LOSS_GAP)."""
    return DROPOUT_LOSS_GAP if dropout else LOSS_GAP


def verdicts(ours, theirs, judge_loss=True, gap_allowed=LOSS_GAP):
    """The targets' table; ``judge_loss``: the held-out loss against
    TARGET_LOSS (nanoGPT's CPU recipe on Tiny Shakespeare's number)."""
    def mark(ok):
        return "yes" if ok else "**no**"
    gap = abs(ours["loss"] - theirs["loss"])
    loss_row = [f"| held-out loss <= {TARGET_LOSS} | {ours['loss']:.4f} | "
                f"{mark(ours['loss'] <= TARGET_LOSS)} |"] if judge_loss else []
    return "\n".join([
        "| target | measured | met |", "| --- | --- | --- |", *loss_row,
        f"| minitrans's wall time <= the tuned twin's | {ours['wall_s']:.1f} s vs "
        f"{theirs['wall_s']:.1f} s ({ours['wall_s'] / theirs['wall_s']:.2f}x) | "
        f"{mark(ours['wall_s'] <= theirs['wall_s'])} |",
        f"| held-out losses within {gap_allowed} nats | {gap:.4f} | "
        f"{mark(gap <= gap_allowed)} |"])


@contextlib.contextmanager
def text_file(args):
    """(the path of the text to train on, what it is in words)."""
    if args.data:
        yield args.data, None
        return
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "lessons.txt")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(lesson_prose(LESSONS))
        yield path, "the Markdown prose of the lessons (lessons/NN_*.py, as lesson 16 gathers it)"


def run(args, report):
    """(the setup in a line, the table's rows, the numbers of --result-line)."""
    import torch

    recipe = RECIPES[args.recipe]
    threads = os.cpu_count() or 1
    torch.set_num_threads(threads)
    twin_device = "cuda" if args.backend == "cupy" else "cpu"
    with minitrans.using(args.backend, dtype="float32"), tempfile.TemporaryDirectory() as folder, \
            text_file(args) as (data, text_name):
        trainer = minitrans_side(data, args.steps, folder, recipe)
        task, config = trainer.task, trainer.config
        report(task.description)
        twin = TorchSide(torch, trainer, device=twin_device)
        untuned = (TorchSide(torch, trainer, fused=False, device=twin_device) if recipe.untuned
                   else None)
        ours, theirs = train_in_turns(trainer, twin, args.steps, TURN, report)
        untuned_times = [timed(untuned.step) for _ in range(min(recipe.untuned, args.steps))]
        threads_times = thread_times(trainer, data, args.steps, folder, recipe)
        windows = recipe.eval_windows
        ours_loss, measured = text_loss(trainer.model, task.valid, task.block_size, windows)
        theirs_loss = twin.held_out_loss(task.valid, task.block_size, windows)
        tokens = config.batch_size * task.block_size
        on = BACKEND_NAMES[args.backend]
        where = f"{threads} threads" if twin_device == "cpu" else "CUDA"
        rows = {f"minitrans ({on}, float32)": summary(ours, tokens, ours_loss, recipe.warm),
                f"PyTorch twin, tuned (eager, fused AdamW, {where})":
                    summary(theirs, tokens, theirs_loss, recipe.warm)}
        if untuned_times:
            rows[f"PyTorch twin, untuned (default AdamW), first {len(untuned_times)} steps"] = \
                dict(summary(untuned_times, tokens, None), wall_s=None)
        if threads_times:
            rows[f"minitrans, worker threads, first {len(threads_times)} steps"] = \
                dict(summary(threads_times, tokens, None), wall_s=None)
        model = trainer.model.config
        setup = (f"{task.description}; model {model.N} layers, {model.h} heads, width "
                 f"{model.d_model}, {sum(p.size for _, p, _ in trainer.model.named_parameters()):,}"
                 f" parameters; {args.steps} steps of {config.batch_size} windows of "
                 f"{task.block_size}, minitrans with {workers_text(trainer.parallel)}")
        if text_name:
            setup = f"{text_name}: {setup.replace(data, 'the prose')}"
        if model.dropout:
            setup += f"; dropout {model.dropout}, each side drawing its own masks"
        if windows is not None:
            setup += f"; held-out loss over the first {measured} windows"
        numbers = {"recipe": args.recipe, "backend": args.backend, "twin_device": twin_device,
                   "steps": args.steps, "warm": recipe.warm, "dropout": model.dropout,
                   "tokens_per_step": tokens, "eval_windows": measured, "setup": setup,
                   "text": text_name or data, "gap_allowed": loss_gap(model.dropout),
                   "minitrans": dict(rows[f"minitrans ({on}, float32)"],
                                     train_loss=tail_mean(trainer.history["loss"])),
                   "twin": dict(list(rows.values())[1], train_loss=tail_mean(twin.losses))}
        return setup, rows, numbers


def thread_times(trainer, data, steps, folder, recipe):
    """The step times of ``trainer``'s twin with its workers on threads,
    over the first ``recipe.untuned`` steps; none where its workers are not
    processes."""
    parallel = trainer.parallel
    if not (parallel.processes and parallel.workers > 1 and recipe.untuned):
        return []
    on_threads = minitrans_side(data, steps, os.path.join(folder, "threads"), recipe)
    on_threads.parallel = DataParallel(on_threads.model, on_threads.loss_fn, parallel.workers,
                                       parallel.blas_threads, processes=False)
    return [timed(on_threads.train_step) for _ in range(min(recipe.untuned, steps))]


def workers_text(parallel):
    """"2 worker processes", "2 worker threads" or "1 worker"."""
    if parallel.workers == 1:
        return "1 worker"
    return f"{parallel.workers} worker {'processes' if parallel.processes else 'threads'}"


def tail_mean(losses):
    """The training loss at the end: the mean of the last TRAIN_TAIL steps'."""
    last = losses[-TRAIN_TAIL:]
    return sum(last) / len(last)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    text = parser.add_mutually_exclusive_group(required=True)
    text.add_argument("--data", help="a plain UTF-8 text (Tiny Shakespeare)")
    text.add_argument("--text", choices=["lessons"],
                      help="a text the repository holds: the lessons' Markdown prose")
    parser.add_argument("--recipe", choices=sorted(RECIPES), default="cpu",
                        help="nanoGPT's CPU recipe (default), its GPU recipe, or tiny sizes")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu",
                        help="gpu: minitrans on CuPy, the twin on CUDA")
    parser.add_argument("--backend", choices=sorted(BACKEND_NAMES),
                        help="minitrans's backend (default: numpy on the CPU, cupy on the GPU; "
                             "strict: the device's path rehearsed on a CPU)")
    parser.add_argument("--steps", type=int,
                        help="training steps of each side (default the recipe's: 2000 for the "
                             "CPU's, nanoGPT's; fewer: a smoke run, no targets judged, no file "
                             "written)")
    parser.add_argument("--result-line", action="store_true",
                        help="end with a line RESULT {json} of the run's numbers")
    results.add_option(parser, "text_lm")
    args = parser.parse_args(argv)
    args.steps = RECIPES[args.recipe].steps if args.steps is None else args.steps
    if args.steps < 1:
        parser.error(f"--steps: expected at least 1, got {args.steps}")
    args.backend = args.backend or ("cupy" if args.device == "gpu" else "numpy")
    if (args.device == "gpu") != (args.backend == "cupy"):
        parser.error(f"--backend {args.backend}: --device {args.device} trains on "
                     + ("cupy" if args.device == "gpu" else "numpy or strict"))
    return args


def main(argv=None):
    args = parse_args(argv)
    recipe = RECIPES[args.recipe]
    smoke = args.steps != recipe.steps

    def report(message):
        print(message, flush=True, file=sys.stderr)

    setup, rows, numbers = run(args, report)
    ours, theirs = list(rows.values())[:2]
    judged = (f"A smoke run: the targets are judged after {recipe.steps:,} steps only."
              if smoke else "Targets:\n\n" + verdicts(ours, theirs, args.recipe == "cpu",
                                                       numbers["gap_allowed"]))
    body = "\n\n".join([f"Setup: {setup}.", table(rows), judged]) + "\n"
    print(body)
    on = "CPU" if args.device == "cpu" else "GPU"
    results.save(args.results, "text_lm", f"Your own GPT: {recipe.title}, minitrans and its "
                 f"PyTorch twin" + ("" if args.recipe == "cpu" else f", on the {on}"), body,
                 machine.summary(with_torch=True), smoke=smoke)
    if args.result_line:
        print(RESULT_PREFIX + json.dumps(numbers), flush=True)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()

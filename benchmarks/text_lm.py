"""nanoGPT's CPU recipe on a text, trained by minitrans and by its PyTorch
twin side by side, in one run.

Run from the repository root, after `pip install ".[train,torch]"`:

    python benchmarks/text_lm.py --data input.txt               # 2,000 steps each
    python benchmarks/text_lm.py --data input.txt --steps 40    # a smoke run: no file written

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
machine does falls on both.

Reported: the median time of a step and tokens per second, the wall time
of all the steps, and the held-out loss at the end, in nats per character
over every full window of the held-out tenth, with its bits per character.
The targets: a held-out loss of at most TARGET_LOSS, minitrans's wall time
at most the twin's, and the two held-out losses within LOSS_GAP nats of
each other (float32 rounding apart, both train the same model).
"""

import argparse
import contextlib
import math
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import minitrans
from minitrans.data.text_corpus import TextWindows, every_window
from minitrans.training.text_recipe import text_loss
from minitrans.training.text_run import new_text_trainer, text_train_config

from harness import machine, results

TARGET_LOSS = 1.90  # nanoGPT's 1.88 on a CPU, with room for another seed
LOSS_GAP = 0.02  # nats: the two implementations of one training, in float32
TURN = 100  # steps each side takes in a turn
UNTUNED_STEPS = 100
EVAL_BATCH = 32


def minitrans_side(data, steps, out_dir):
    """The TextTrainer of `minitrans train text --data DATA --steps STEPS`."""
    config = text_train_config(data=data, steps=steps, eval_every=steps, out_dir=out_dir,
                               warmup=min(100, steps))  # a smoke run's few steps: warm-up in them
    return new_text_trainer(config, progress=False, log=lambda message: None)


class TorchSide:
    """The twin of the trainer's model, trained by GPT's recipe in PyTorch
    on the trainer's stream of windows (the same seed, the same batches)."""

    def __init__(self, torch, trainer, fused=True):
        from minitrans.interop.torch import (TokenCrossEntropy, clip_grad_norm, gpt_optimizer,
                                             gpt_schedule, to_torch)

        config = trainer.config
        self.torch, self.clip = torch, clip_grad_norm
        self.model = to_torch(trainer.model)  # before any step: the same initial weights
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

    def step(self):
        batch = self.windows.batch()
        x, y = (self.torch.from_numpy(np.asarray(a)) for a in (batch.tgt_in, batch.tgt_out))
        self.optimizer.zero_grad()
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        self.clip(self.model.parameters(), self.clip_norm)
        self.optimizer.step()
        self.schedule.step()
        return loss.item()

    def held_out_loss(self, tokens, block_size):
        """The mean loss per predicted token over every full window of ``tokens``."""
        total, count = 0.0, 0
        with self.torch.no_grad():
            for batch in every_window(tokens, block_size, EVAL_BATCH):
                x, y = (self.torch.from_numpy(np.asarray(a))
                        for a in (batch.tgt_in, batch.tgt_out))
                total += self.loss_fn(self.model(x), y).item() * batch.num_tokens
                count += batch.num_tokens
        return total / count


def timed(step):
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def train_in_turns(trainer, twin, steps, turn, report):
    """Both sides' step times, ``turn`` steps each in alternation."""
    ours, theirs = [], []
    while len(ours) < steps:
        count = min(turn, steps - len(ours))
        ours += [timed(trainer.train_step) for _ in range(count)]
        theirs += [timed(twin.step) for _ in range(count)]
        report(f"step {len(ours)}: minitrans loss {trainer.history['loss'][-1]:.4f}")
    return ours, theirs


def summary(times, tokens_per_step, loss):
    """The row numbers of one side."""
    median = statistics.median(times)
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


def verdicts(ours, theirs):
    def mark(ok):
        return "yes" if ok else "**no**"
    gap = abs(ours["loss"] - theirs["loss"])
    return "\n".join([
        "| target | measured | met |", "| --- | --- | --- |",
        f"| held-out loss <= {TARGET_LOSS} | {ours['loss']:.4f} | "
        f"{mark(ours['loss'] <= TARGET_LOSS)} |",
        f"| minitrans's wall time <= the tuned twin's | {ours['wall_s']:.1f} s vs "
        f"{theirs['wall_s']:.1f} s ({ours['wall_s'] / theirs['wall_s']:.2f}x) | "
        f"{mark(ours['wall_s'] <= theirs['wall_s'])} |",
        f"| held-out losses within {LOSS_GAP} nats | {gap:.4f} | {mark(gap <= LOSS_GAP)} |"])


def run(args, report):
    import torch

    threads = os.cpu_count() or 1
    torch.set_num_threads(threads)
    with minitrans.using("numpy", dtype="float32"), tempfile.TemporaryDirectory() as folder:
        trainer = minitrans_side(args.data, args.steps, folder)
        task, config = trainer.task, trainer.config
        report(task.description)
        twin, untuned = TorchSide(torch, trainer), TorchSide(torch, trainer, fused=False)
        ours, theirs = train_in_turns(trainer, twin, args.steps, TURN, report)
        untuned_times = [timed(untuned.step) for _ in range(min(UNTUNED_STEPS, args.steps))]
        ours_loss = text_loss(trainer.model, task.valid, task.block_size)[0]
        theirs_loss = twin.held_out_loss(task.valid, task.block_size)
        tokens = config.batch_size * task.block_size
        rows = {"minitrans (NumPy, float32)": summary(ours, tokens, ours_loss),
                f"PyTorch twin, tuned (eager, fused AdamW, {threads} threads)":
                    summary(theirs, tokens, theirs_loss),
                f"PyTorch twin, untuned (default AdamW), first {len(untuned_times)} steps":
                    dict(summary(untuned_times, tokens, None), wall_s=None)}
        setup = (f"{task.description}; model {trainer.model.config.N} layers, "
                 f"{trainer.model.config.h} heads, width {trainer.model.config.d_model}, "
                 f"{sum(p.size for _, p, _ in trainer.model.named_parameters()):,} parameters; "
                 f"{args.steps} steps of {config.batch_size} windows of {task.block_size}, "
                 f"minitrans with {trainer.parallel.workers} workers")
        return setup, rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="a plain UTF-8 text (Tiny Shakespeare)")
    parser.add_argument("--steps", type=int, default=2000,
                        help="training steps of each side (default 2000, nanoGPT's; fewer: "
                             "a smoke run, no targets judged, no file written)")
    results.add_option(parser, "text_lm")
    args = parser.parse_args(argv)
    smoke = args.steps != 2000

    def report(message):
        print(message, flush=True, file=sys.stderr)

    setup, rows = run(args, report)
    ours, theirs = list(rows.values())[:2]
    judged = ("Targets:\n\n" + verdicts(ours, theirs) if not smoke else
              "A smoke run: the targets are judged after 2,000 steps only.")
    body = "\n\n".join([f"Setup: {setup}.", table(rows), judged]) + "\n"
    print(body)
    results.save(args.results, "text_lm", "Your own GPT: nanoGPT's CPU recipe, minitrans and "
                 "its PyTorch twin", body, machine.summary(with_torch=True), smoke=smoke)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()

"""Fine-tuning a pretrained language model (GPT-2, Llama) on a text corpus.

The task (``TextBlocks``) is plain UTF-8 text tokenized with the model's own
tokenizer and cut into blocks of ``block_size + 1`` tokens, each block
starting where the previous one's inputs ended: the model reads its first
``block_size`` tokens and predicts each next one, so every token of the
text is a target once. No padding (a loaded model has ``pad_id=None``):
every block is full, and the tokens after the last full block are dropped.

``FinetuneTrainer`` is the ``Trainer`` (the same step: forward, backward by
hand, clipped gradient, Adam; the same checkpoints, atomic, every
``eval_every`` steps) with what fine-tuning changes:

    learning rate   a constant ``lr`` after a linear warm-up of ``warmup``
                    steps (the paper's schedule is for training from scratch)
    Adam            betas (0.9, 0.999), eps 1e-8, as fine-tuning recipes use
    loss            plain cross-entropy, no label smoothing
    evaluation      the held-out loss, mean over every held-out target token
                    (there is no answer to match exactly); ``best.npz`` keeps
                    the lowest
    checkpoint      the Trainer's arrays and records, the task's record
                    naming the pretrained folder and the block size; it holds
                    no vocabulary, so ``--resume`` and ``translate`` refuse it
"""

import dataclasses
import math
from typing import NamedTuple

import numpy as np

from minitrans.core import backend
from minitrans.layers.loss import LabelSmoothedCrossEntropy
from minitrans.training.run_files import checkpoint, trainer_state
from minitrans.training.optimisation import evaluation
from minitrans.training.optimisation.optim import Adam
from minitrans.training.trainer import Trainer, TrainingError

HELD_OUT_SHARE = 0.1  # of the blocks, when no held-out text is given


class Batch(NamedTuple):
    """What ``Trainer.train_step`` takes from a batch (``evaluation.model_inputs``)."""
    src: object
    tgt_in: object
    tgt_out: object
    num_tokens: int


@dataclasses.dataclass
class TextBlocks:
    """A tokenized text as training blocks: ``train`` and ``valid`` are lists
    of arrays of ``block_size + 1`` token ids."""
    name: str
    kind: str
    train: list
    valid: list
    block_size: int
    description: str

    def make_batch(self, blocks):
        ids = np.stack(blocks).astype(np.int64)
        return Batch(None, backend.to_device(ids[:, :-1]), backend.to_device(ids[:, 1:]),
                     int(ids.shape[0] * (ids.shape[1] - 1)))


def blocks_of(ids, block_size):
    """The full blocks of ``block_size + 1`` tokens of ``ids``, block i
    starting at token i * block_size (its last token is the next block's first
    input, so every token but the first is a target once)."""
    ids = np.asarray(ids, dtype=np.int64)
    count = (len(ids) - 1) // block_size if len(ids) > 1 else 0
    return [ids[i * block_size:i * block_size + block_size + 1] for i in range(count)]


def text_task(tokenizer, text, block_size, valid_text=None, source="the corpus"):
    """A TextBlocks of ``text`` (a str), held out: the blocks of
    ``valid_text`` where given, else the last HELD_OUT_SHARE of the blocks
    (at least one). Refuses a text too short for one block of each."""
    blocks = blocks_of(_encode(tokenizer, text), block_size)
    need = block_size + 1
    if valid_text is not None:
        valid = blocks_of(_encode(tokenizer, valid_text), block_size)
        if not valid:
            raise ValueError(f"--valid: expected at least {need} tokens (one block of "
                             f"--block-size {block_size} + 1), the held-out text has fewer")
        train = blocks
    else:
        held = max(1, int(len(blocks) * HELD_OUT_SHARE))
        train, valid = blocks[:-held], blocks[-held:]
    if not train:
        raise ValueError(f"--data: {source} gives {len(blocks)} block(s) of --block-size "
                         f"{block_size} + 1 tokens, expected at least "
                         f"{1 if valid_text is not None else 2} (one held out); give a longer "
                         "text or a smaller --block-size")
    return TextBlocks("pretrained", "pretrained-lm", train, valid, block_size,
                      f"fine-tuning on {source}: blocks of {block_size} tokens")


def _encode(tokenizer, text):
    """Token ids of ``text`` without special tokens added (a HFTokenizer's
    template would add a <s> per call, not per document)."""
    return tokenizer.encode(text)


class FinetuneTrainer(Trainer):
    """The Trainer of a loaded model on a TextBlocks (see the module's docstring).

    ``config``: a TrainConfig (steps, batch_size, warmup, eval_every, seed,
    workers, max_minutes, out_dir; label_smoothing 0); ``lr``: the learning
    rate after warm-up; ``source``: a dict recorded in the checkpoint (the
    pretrained folder, its architecture)."""

    def __init__(self, model, task, config, lr, source=None, **options):
        if config.average_decay:  # its evaluations and saves measure the model itself
            raise ValueError(f"average_decay: a fine-tuning run keeps no moving average of the "
                             f"weights, expected 0, got {config.average_decay!r}")
        config = dataclasses.replace(config, label_smoothing=0.0)  # before the loss is made
        super().__init__(model, task, config, **options)
        self.lr = float(lr)
        self.source = dict(source or {})
        self.optimizer = Adam(model, betas=(0.9, 0.999), eps=1e-8,
                              weight_decay=config.weight_decay)

    def learning_rate(self, step):
        return self.lr * min(1.0, step / self.config.warmup)

    def held_out_pairs(self):
        return self.task.valid

    def teacher_forced_metrics(self, batch_size=16):
        """{"loss": mean cross-entropy over every held-out target token}."""
        total = count = 0.0
        loss_fn = LabelSmoothedCrossEntropy(0.0, pad_id=None)
        with evaluation.evaluating(self.model):
            for start in range(0, len(self.task.valid), batch_size):
                batch = self.task.make_batch(self.task.valid[start:start + batch_size])
                logits = self.model.forward(batch.tgt_in)
                total += float(loss_fn.forward(logits, batch.tgt_out)) * batch.num_tokens
                count += batch.num_tokens
        return {"loss": total / max(count, 1.0)}

    def evaluate(self):
        return {"step": self.step, "blocks": len(self.task.valid), **self.teacher_forced_metrics()}

    def evaluate_and_save(self, log=None):
        """Evaluate, save the checkpoint, and ``best.npz`` when the held-out
        loss is below every earlier evaluation's."""
        metrics = self.evaluate()
        if not math.isfinite(metrics["loss"]):
            raise TrainingError(f"step {self.step}: the held-out loss is not finite; training "
                                f"stopped and this state not saved, {self._last_good()}")
        self._refuse_diverged(metrics["loss"])
        best = min((e["loss"] for e in self.evaluations), default=math.inf)
        self.evaluations.append(metrics)
        (log or self.log)(f"step {self.step}: held-out loss {metrics['loss']:.4f} "
                          f"({metrics['blocks']} blocks of {self.task.block_size} tokens)")
        self.save(self.checkpoint_path)
        if metrics["loss"] < best:
            self.save(self.best_checkpoint_path())
        return metrics

    def best_evaluation(self):
        """The evaluation ``best.npz`` holds: the earliest of lowest held-out loss."""
        return min(self.evaluations, key=lambda e: e["loss"], default=None)

    def stop_reason(self, minutes):
        if self.config.max_minutes is not None and minutes >= self.config.max_minutes:
            return f"the time budget of {self.config.max_minutes:g} minutes is spent, stopping"
        return None

    def save(self, path):
        """The Trainer's arrays (parameters, Adam's moments) with this run's
        records, written atomically."""
        records = {
            "model_config": self.model.config.to_dict(),
            "train_config": dataclasses.asdict(self.config),
            "task": {"name": self.task.name, "kind": self.task.kind,
                     "block_size": self.task.block_size, "lr": self.lr, **self.source},
            "step": self.step,
            "optimizer_step": self.optimizer.step_count,
            "rng": {"seed": self.config.seed, "step": self.step,
                    "rule": "numpy default_rng([seed, epoch])"},
            "history": self.history,
            "evaluations": self.evaluations,
        }
        try:
            checkpoint.save_checkpoint(path, trainer_state.arrays_of(self), records)
        except OSError as error:
            reason = error.strerror or str(error)
            raise TrainingError(f"step {self.step}: could not write {path}: {reason}; "
                                f"training stopped, {self._last_good()}") from None
        if path == self.checkpoint_path:
            self.last_good = path

    def load_best(self):
        """Put the parameters of ``best.npz`` into the model (after ``fit``)."""
        path = self.best_checkpoint_path()
        arrays, _ = checkpoint.load_checkpoint(path)
        checkpoint.load_parameters(self.model, arrays, path)
        return path

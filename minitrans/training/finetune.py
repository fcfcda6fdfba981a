"""Fine-tuning a pretrained language model (GPT-2, Llama) on a text corpus.

The task (``TextBlocks``) is plain UTF-8 text tokenized with the model's own
tokenizer and cut into blocks of ``block_size + 1`` tokens, each block
starting where the previous one's inputs ended: the model reads its first
``block_size`` tokens and predicts each next one, so every token of the
text is a target once. No padding (a loaded model has ``pad_id=None``):
every block is full, and the tokens after the last full block are dropped.

``FinetuneTrainer`` is the ``Trainer`` (the same loop: forward, backward by
hand, clipped gradient, Adam; the same checkpoints, atomic, every
``eval_every`` steps) given ``FineTuningRecipe``, what fine-tuning changes
(``training.recipe``):

    learning rate   a constant ``lr`` after a linear warm-up of ``warmup``
                    steps (the paper's schedule is for training from scratch)
    Adam            betas (0.9, 0.999), eps 1e-8, as fine-tuning recipes use
    loss            plain cross-entropy, no label smoothing
    evaluation      the held-out loss, mean over every held-out target token
                    (there is no answer to match exactly); ``best.npz`` keeps
                    the lowest
    stopping        only the time budget, ``max_minutes``
    checkpoint      the Trainer's arrays and records, the task's record
                    naming the pretrained folder and the block size; it holds
                    no vocabulary, so ``--resume`` and ``translate`` refuse it
"""

import dataclasses
from typing import NamedTuple

import numpy as np

from minitrans.core import backend
from minitrans.layers.loss import LabelSmoothedCrossEntropy
from minitrans.training.optimisation import evaluation
from minitrans.training.optimisation.adam import Adam
from minitrans.training.recipe import LowestLossRecipe
from minitrans.training.run_files import checkpoint
from minitrans.training.trainer import Trainer

HELD_OUT_SHARE = 0.1  # of the blocks, when no held-out text is given
EVAL_BATCH = 16  # held-out blocks per forward pass of an evaluation


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


class FineTuningRecipe(LowestLossRecipe):
    """What fine-tuning changes in the Trainer's run (see the module's
    docstring; the methods are those of ``training.recipe``). ``lr``: the
    learning rate after warm-up; ``source``: a dict recorded in the
    checkpoint's task record (the pretrained folder, its architecture)."""

    def __init__(self, lr, source=None):
        self.lr = float(lr)
        self.source = dict(source or {})

    def optimizer(self, model, config):
        return Adam(model, betas=(0.9, 0.999), eps=1e-8, weight_decay=config.weight_decay)

    def learning_rate(self, step, model, config):
        return self.lr * min(1.0, step / config.warmup)

    def held_out(self, task, config):
        return task.valid

    def teacher_forced_metrics(self, model, task, config):
        """{"loss": mean cross-entropy over every held-out target token}."""
        total = count = 0.0
        loss_fn = LabelSmoothedCrossEntropy(0.0, pad_id=None)
        with evaluation.evaluating(model):
            for start in range(0, len(task.valid), EVAL_BATCH):
                batch = task.make_batch(task.valid[start:start + EVAL_BATCH])
                logits = model.forward(batch.tgt_in)
                total += float(loss_fn.forward(logits, batch.tgt_out)) * batch.num_tokens
                count += batch.num_tokens
        return {"loss": total / max(count, 1.0)}

    def evaluate(self, model, task, config):
        return {"blocks": len(task.valid), **self.teacher_forced_metrics(model, task, config)}

    def describe(self, metrics, task):
        return (f"held-out loss {metrics['loss']:.4f} ({metrics['blocks']} blocks of "
                f"{task.block_size} tokens)")

    def records(self, trainer):
        """The checkpoint's records: those of a run from scratch but the
        vocabulary, the task's naming the pretrained folder and block size."""
        return {
            "model_config": trainer.model.config.to_dict(),
            "train_config": dataclasses.asdict(trainer.config),
            "task": {"name": trainer.task.name, "kind": trainer.task.kind,
                     "block_size": trainer.task.block_size, "lr": self.lr, **self.source},
            "step": trainer.step,
            "optimizer_step": trainer.optimizer.step_count,
            "rng": {"seed": trainer.config.seed, "step": trainer.step,
                    "rule": "numpy default_rng([seed, epoch])"},
            "history": trainer.history,
            "evaluations": trainer.evaluations,
        }


class FinetuneTrainer(Trainer):
    """The Trainer of a loaded model on a TextBlocks, by ``FineTuningRecipe(lr,
    source)`` (see the module's docstring).

    ``config``: a TrainConfig (steps, batch_size, warmup, eval_every, seed,
    workers, max_minutes, out_dir; label_smoothing 0); ``lr``: the learning
    rate after warm-up; ``source``: a dict recorded in the checkpoint (the
    pretrained folder, its architecture)."""

    def __init__(self, model, task, config, lr, source=None, **options):
        if config.average_decay:  # its evaluations and saves measure the model itself
            raise ValueError(f"average_decay: a fine-tuning run keeps no moving average of the "
                             f"weights, expected 0, got {config.average_decay!r}")
        config = dataclasses.replace(config, label_smoothing=0.0)  # before the loss is made
        super().__init__(model, task, config, recipe=FineTuningRecipe(lr, source), **options)

    def load_best(self):
        """Put the parameters of ``best.npz`` into the model (after ``fit``)."""
        path = self.best_checkpoint_path()
        arrays, _ = checkpoint.load_checkpoint(path)
        checkpoint.load_parameters(self.model, arrays, path)
        return path

"""Training a GPT from scratch on a plain text, as nanoGPT trains on Tiny
Shakespeare: the task (``TextTask``), the recipe (``GPTRecipe``) and the
trainer that draws its batches as random windows (``TextTrainer``).

The loop is the Trainer's (``training.trainer``: forward, backward by hand,
clipped gradient, Adam, checkpoints every ``eval_every`` steps); what a
text changes is the recipe (``training.recipe``):

    optimiser       AdamW with betas (0.9, 0.99), eps 1e-8, the config's
                    ``weight_decay`` on the matrices only (weights, embedding
                    and position tables), never on biases or norms
    learning rate   a linear warm-up to ``peak_lr``, then a cosine down to
                    ``min_lr`` at the last step (``schedule.cosine_lr``)
    batches         ``batch_size`` random windows of ``block_size`` tokens of
                    the training text (``data.text_corpus.TextWindows``),
                    their generator's state kept in the checkpoint (record
                    "windows"), so a resumed run draws the same next windows
    evaluation      the mean cross-entropy over the first ``eval_windows``
                    full windows of the held-out text, in nats per token and
                    in bits per character; a short sample continuing the
                    held-out text's start, with a fixed seed, shows in the log
    best.npz        the lowest held-out loss
    stopping        after ``steps`` steps, or at the first evaluation after
                    ``max_minutes``

Bits per character: a loss of L nats per token is L / ln 2 bits per token,
and a text of n tokens holding c characters costs L n / (c ln 2) bits per
character; at the character level n = c, so it is L / ln 2. In byte-level
BPE tokens n < c, and the held-out part's own n and c (counted when it was
encoded) stand for those of the windows measured.
"""

import dataclasses
import math

from minitrans.core import backend
from minitrans.data.text_corpus import TextWindows, every_window
from minitrans.data.vocab import PAD_ID
from minitrans.decoding.search import generate
from minitrans.layers.loss import LabelSmoothedCrossEntropy
from minitrans.training.optimisation import evaluation
from minitrans.training.optimisation.adam import Adam
from minitrans.training.optimisation.schedule import cosine_lr
from minitrans.training.recipe import LowestLossRecipe
from minitrans.training.run_files import text_records
from minitrans.training.trainer import Trainer

EVAL_BATCH = 32  # held-out windows per forward pass of an evaluation
SAMPLE_PROMPT = 16  # tokens of the held-out text's start that a sample continues
SAMPLE_TOKENS = 48  # tokens a sample adds (fewer where the model has fewer positions)


@dataclasses.dataclass
class TextTask:
    """A text made ready to train on: ``train`` and ``valid`` its token ids
    (memory-mapped arrays, ``data.text_corpus.prepare_text``) and the
    characters they stand for, ``tokenizer`` (a CharacterTable or a ByteBPE:
    ``encode``, ``decode`` and its ``level``) and ``vocab`` how text becomes
    ids, ``block_size`` the window length."""

    name: str
    kind: str
    tokenizer: object
    vocab: object
    train: object
    valid: object
    block_size: int
    description: str
    train_characters: int
    valid_characters: int


def bits_per_character(loss, tokens, characters):
    """``loss`` nats per token over ``tokens`` tokens of ``characters``
    characters, in bits per character."""
    return loss / math.log(2) * tokens / characters


def text_loss(model, tokens, block_size, windows=None):
    """(the mean cross-entropy in nats per predicted token, the windows
    measured) of ``model`` over the full windows of ``tokens``, in order,
    at most ``windows`` of them (None: all)."""
    if windows is not None:
        tokens = tokens[: windows * block_size + 1]  # the first ``windows`` full windows
    loss_fn = LabelSmoothedCrossEntropy(0.0, pad_id=None)
    total, count, measured = 0.0, 0, 0
    with evaluation.evaluating(model):
        for batch in every_window(tokens, block_size, EVAL_BATCH):
            logits = model.forward(batch.tgt_in)
            total += float(loss_fn.forward(logits, batch.tgt_out)) * batch.num_tokens
            count += batch.num_tokens
            measured += batch.tgt_in.shape[0]
    return total / count, measured


def sample_text(model, task, seed):
    """The start of the held-out text and the model's continuation of it,
    drawn at temperature 1 by a generator seeded with ``seed``."""
    prompt = min(SAMPLE_PROMPT, max(1, model.config.max_len // 4))  # 3/4 of the room is new
    prompt_ids = task.valid[:prompt].astype("int64")  # a host array, from the token file
    new_tokens = min(SAMPLE_TOKENS, model.config.max_len - len(prompt_ids))
    with evaluation.evaluating(model):
        # no token ends it: a text has no <eos>, and one drawn shows as such
        new = generate(model, backend.to_device(prompt_ids[None]), new_tokens, eos_id=None,
                       pad_id=PAD_ID, strategy="sample", rng=backend.device_rng(seed))
    return task.tokenizer.decode(prompt_ids), task.tokenizer.decode(backend.to_numpy(new)[0])


class GPTRecipe(LowestLossRecipe):
    """What training a GPT on a text changes in the Trainer's run (see the
    module's docstring; the methods are those of ``training.recipe``)."""

    def __init__(self):
        self.sample = None  # (prompt, continuation) of the last evaluation

    def optimizer(self, model, config):
        return Adam(model, betas=(0.9, 0.99), eps=1e-8, weight_decay=config.weight_decay,
                    decay="matrices")

    def learning_rate(self, step, model, config):
        return cosine_lr(step, config.peak_lr, config.min_lr, config.warmup, config.steps)

    def held_out(self, task, config):
        """The held-out ids an evaluation reads: its first ``eval_windows`` windows."""
        return task.valid[: config.eval_windows * task.block_size + 1]

    def teacher_forced_metrics(self, model, task, config):
        """The held-out loss (nats per token) and bits per character, by the
        held-out part's tokens and characters."""
        loss, windows = text_loss(model, task.valid, task.block_size, config.eval_windows)
        bits = bits_per_character(loss, len(task.valid), task.valid_characters)
        return {"windows": windows, "loss": loss, "bits_per_character": bits}

    def evaluate(self, model, task, config):
        metrics = self.teacher_forced_metrics(model, task, config)
        self.sample = sample_text(model, task, config.seed)
        return metrics

    def describe(self, metrics, task):
        line = (f"held-out loss {metrics['loss']:.4f} nats/token, "
                f"{metrics['bits_per_character']:.4f} bits/char ({metrics['windows']:,} "
                f"windows of {task.block_size})")
        if self.sample is not None:
            prompt, continuation = self.sample
            line += f"; sample: {prompt!r} -> {continuation!r}"
        return line

    def records(self, trainer):
        """A text run's records (``run_files.text_records``): the windows'
        generator state, and the merges at level "bpe"."""
        return text_records.records_of(trainer)


class TextTrainer(Trainer):
    """The Trainer of a decoder-only model on a TextTask, by ``GPTRecipe``:
    each step's batch is ``batch_size`` random windows of the training
    text (``TextWindows``, seeded by the config's seed)."""

    def __init__(self, model, task, config, **options):
        if config.average_decay:  # its evaluations and saves measure the model itself
            raise ValueError(f"average_decay: the {task.name} task keeps no moving average of "
                             f"the weights, expected 0, got {config.average_decay!r}")
        config = dataclasses.replace(config, label_smoothing=0.0)  # before the loss is made
        super().__init__(model, task, config, recipe=GPTRecipe(), **options)
        self.windows = TextWindows(task.train, task.block_size, config.batch_size,
                                   rng=config.seed)

    def next_batch(self, step):
        """The step's windows: the next of the windows' random stream."""
        return self.windows.batch()

    def restore(self, path, arrays, records):
        """What ``save`` wrote, the windows' generator state among it."""
        super().restore(path, arrays, records)
        self.windows.restore(records["windows"])

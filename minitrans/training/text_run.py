"""Putting a text run together (``train text --data FILE``): the text made
into token files in the run's folder, a GPT sized for it, its trainer, new
or resumed; and a text file measured by a trained text model.

The defaults are nanoGPT's CPU recipe for Tiny Shakespeare (4 layers, 4
heads, width 128, windows of 64 characters, batches of 12, 2,000 steps,
no dropout, peak learning rate 1e-3 after 100 warm-up steps down to 1e-4,
weight decay 0.1, gradient clipping at 1.0: held-out 1.88 nats per
character), with GPT's architecture: pre-norm, GELU, learned positions,
tied input and output embeddings, no biases, no scaled embeddings, GPT-2's
initial weights. A text much shorter than Tiny Shakespeare's million
characters (below SMALL_TEXT) gets a smaller model, which over-fits less
and trains faster; the first line of a run says what was chosen and why.

At level "bpe" the text is read in byte-level BPE tokens, BPE_MERGES merges
(unless given) learned from a sample of it; the checkpoint keeps them
(``run_files.text_records``), so that a resumed run, generate and evaluate
read a text as the run did, learning nothing again.
"""

import contextlib
import dataclasses
import os
import tempfile

from minitrans.core.memory_budget import check_fits, training_bytes
from minitrans.data.tasks import TEXT
from minitrans.data.text_corpus import (EXAMPLES, TRAIN_FILE, character_counts,
                                        prepare_text, write_split)
from minitrans.data.text_parts import write_encoded
from minitrans.data.vocab import PAD_ID, SPECIAL_TOKENS, DataError, Vocab
from minitrans.files.token_file import read_tokens
from minitrans.model.config import ModelConfig
from minitrans.training.experiment import build_model, restored
from minitrans.training.optimisation.parallel import default_workers
from minitrans.training.run_files import checkpoint, text_records
from minitrans.training.text_recipe import TextTask, TextTrainer
from minitrans.training.train_config import TrainConfig

SMALL_TEXT = 100_000  # training characters below which the model is smaller
BPE_MERGES = 1000  # merges learned at level "bpe" unless --merges says otherwise
# GPT's architecture, whatever the sizes (nanoGPT's model.py)
GPT_ARCHITECTURE = dict(decoder_only=True, pre_norm=True, activation="gelu", positions="learned",
                        tie_embeddings=True, bias=False, output_bias=False,
                        scale_embedding=False, init="gpt")
SIZES = {"small": dict(d_model=64, h=4, N=2, dropout=0.0),
         "nanogpt": dict(d_model=128, h=4, N=4, dropout=0.0)}
# Read only: every run copies it.
TEXT_DEFAULTS = {
    "model": SIZES["nanogpt"],
    "train": dict(level="char", merges=None, block_size=64, batch_size=12, steps=2000, warmup=100,
                  peak_lr=1e-3, min_lr=1e-4, weight_decay=0.1, clip_norm=1.0, eval_every=250,
                  eval_windows=1000, label_smoothing=0.0),
}
# What may change when a text run is resumed: how long and how it trains on.
RESUMABLE = ("steps", "batch_size", "eval_every", "eval_windows", "max_minutes", "workers",
             "peak_lr", "min_lr", "weight_decay", "clip_norm")


def text_train_config(**overrides):
    """The TrainConfig of a text run: TEXT_DEFAULTS, then ``overrides``
    (those that are not None); at level "bpe" BPE_MERGES merges unless
    given, at level "char" none."""
    settings = {**TEXT_DEFAULTS["train"],
                **{key: value for key, value in overrides.items() if value is not None}}
    if settings["merges"] is None:
        settings["merges"] = BPE_MERGES if settings["level"] == "bpe" else 0
    return TrainConfig(task=TEXT, **settings)


def text_size(characters):
    """"small" or "nanogpt", by the training text's characters."""
    return "small" if characters < SMALL_TEXT else "nanogpt"


def text_model_config(vocab_size, block_size, characters, overrides=None):
    """The ModelConfig of a GPT for a text of ``characters`` training
    characters: its sizes (``text_size``), then ``overrides`` (those not
    None), d_ff four times d_model unless given, as many positions as a window."""
    sizes = {**SIZES[text_size(characters)], **GPT_ARCHITECTURE}
    sizes.update({key: value for key, value in (overrides or {}).items() if value is not None})
    sizes.setdefault("d_ff", 4 * sizes["d_model"])
    return ModelConfig(vocab_size=vocab_size, max_len=block_size, **sizes)


def explain(task, model_config, given):
    """One line: what was chosen for the text and why; the sizes in
    ``given`` (flags the user set) were not chosen. "" when none was."""
    characters = task.train_characters
    chosen = [f"{name} {getattr(model_config, key)}" for key, name in
              (("d_model", "d_model"), ("N", "layers"), ("h", "heads")) if key not in given]
    if not chosen:
        return ""
    if text_size(characters) == "small":
        why = (f"a smaller model than nanoGPT's, which over-fits less and trains faster: "
               f"{characters:,} training characters, below {SMALL_TEXT:,}")
    else:
        why = f"nanoGPT's CPU model: {characters:,} training characters, {SMALL_TEXT:,} or more"
    return f"chosen for this text: {', '.join(chosen)} ({why})"


def prepared_task(config, tokenizer=None):
    """The TextTask of ``config`` (a TrainConfig of the text task): its
    text made into token files in ``config.out_dir``, at level "bpe" by the
    merges of ``tokenizer`` where given (a resumed run's), else by
    ``config.merges`` merges learned from it. A text refused leaves nothing
    behind."""
    if config.data is None:
        raise ValueError(f"data: the {TEXT} task reads a UTF-8 text (--data FILE), got None")
    learned = config.merges if config.level == "bpe" and tokenizer is None else None
    # prepare_text refuses a text before it makes the folder or writes a file
    corpus = prepare_text(config.data, config.out_dir, config.block_size, config.valid,
                          level=config.level, merges=learned, tokenizer=tokenizer)
    return TextTask(TEXT, "lm", corpus.tokenizer, corpus.vocab, corpus.train, corpus.valid,
                    config.block_size, f"{TEXT} at level {config.level}: {corpus.description}",
                    corpus.train_characters, corpus.valid_characters)


def check_text_fits(model_config, train_config):
    """Refuse, before building it, a model whose training needs more
    memory than the machine has."""
    workers = train_config.workers or default_workers()
    needed = training_bytes(model_config, train_config.batch_size, train_config.block_size,
                            workers)
    check_fits(model_config, needed, f"training on batches of {train_config.batch_size} x "
               f"{train_config.block_size} tokens (--batch-size x --block-size)")


def new_text_trainer(train_config, model_overrides=None, **trainer_options):
    """A TextTrainer of a new GPT for ``train_config`` (the text task)."""
    task = prepared_task(train_config)
    config = text_model_config(len(task.vocab), train_config.block_size, task.train_characters,
                               model_overrides)
    check_text_fits(config, train_config)
    model = build_model(config, train_config.seed)
    return TextTrainer(model, task, train_config, **trainer_options)


def resume_text(saved, out_dir, changes=None, **trainer_options):
    """A TextTrainer restored from ``saved`` (an ``experiment.SavedRun`` of
    the text task), its text made into token files again in ``out_dir``,
    which must give the checkpoint's vocabulary. ``changes``: new values of
    RESUMABLE fields."""
    changes = dict(changes or {})
    fixed = sorted(set(changes) - set(RESUMABLE))
    if fixed:
        raise ValueError(f"{', '.join(fixed)}: cannot change when a run is resumed "
                         f"(only {', '.join(RESUMABLE)} can)")
    checkpoint.require(saved.path, saved.records, ["windows"], "records")
    train_config = dataclasses.replace(saved.train_config, out_dir=str(out_dir), **changes)
    with checkpoint.reading(saved.path):
        vocab = Vocab.from_json(saved.records["vocab"])
        tokenizer = text_records.stored_tokenizer(saved.records)
    # the run's own merges, never learned again (a text changed since would learn others)
    task = prepared_task(train_config, tokenizer if tokenizer.level == "bpe" else None)
    if task.vocab != vocab:  # the text has changed since
        raise checkpoint.CheckpointError(
            f"{saved.path}: the text {train_config.data} now gives another vocabulary than the "
            f"checkpoint's ({len(task.vocab)} tokens, the checkpoint has {len(vocab)})")
    check_text_fits(saved.model_config, train_config)
    model = build_model(saved.model_config, train_config.seed)
    return restored(TextTrainer(model, task, train_config, **trainer_options), saved)


@contextlib.contextmanager
def text_file_tokens(path, tokenizer, block_size):
    """(the ids of the text file at ``path`` by ``tokenizer``, its
    characters), the ids memory-mapped from a token file in a temporary
    folder (a text may be larger than memory), for the block. At level
    "char" a character the vocabulary lacks is refused, in one line that
    counts them; at level "bpe" the text is encoded piece by piece
    (``data.text_parts``), and a text of fewer than ``block_size`` + 1 ids
    is refused."""
    vocab = tokenizer.vocab
    with tempfile.TemporaryDirectory() as folder:
        tokens = os.path.join(folder, TRAIN_FILE)
        if tokenizer.level == "bpe":
            (characters,), (length,) = write_encoded(tokenizer, block_size, [
                (path, [(tokens, None, "the text")])])
        else:
            characters = length = checked_characters(path, tokenizer)
            write_split(path, tokenizer, (tokens, length))
        yield read_tokens(tokens, len(vocab), length, low=len(SPECIAL_TOKENS)), characters


def checked_characters(path, table):
    """The characters of the text file at ``path``, each one the
    CharacterTable ``table`` knows: else refused, in one line."""
    counts = character_counts(path)
    ids = table.table[counts.codes.clip(max=len(table.table) - 1)]  # the last: beyond all
    unknown = ids == PAD_ID
    if unknown.any():
        frequent = (-counts.counts[unknown]).argsort(kind="stable")[:EXAMPLES]
        examples = ", ".join(repr(chr(code)) for code in counts.codes[unknown][frequent].tolist())
        raise DataError(
            f"{path}: {int(counts.counts[unknown].sum()):,} characters unknown to the model "
            f"({int(unknown.sum()):,} distinct, such as {examples}), expected only characters "
            "of its training text")
    return counts.total()

"""Putting a run together: task + model + trainer, new or resumed, and
loading a trained model back for translation and evaluation."""

import dataclasses
import os

from minitrans.core import backend
from minitrans.core.memory_budget import check_fits, model_bytes, training_bytes
from minitrans.data import BPE, Tokenizer, Vocab
from minitrans.data.tasks import CORPUS, TEXT, Task, load_task, task_from_tsv
from minitrans.model.config import ModelConfig
from minitrans.model.language_model import DecoderOnlyLM
from minitrans.model.transformer import Transformer
from minitrans.training.run_files import checkpoint, text_records
from minitrans.training import corpus_defaults
from minitrans.training.optimisation.parallel import default_workers
from minitrans.training.run_files.records import check_records, read_task_names
from minitrans.training.trainer import TrainConfig, Trainer

# numbers and dates (the real-language tasks), char level, one setting for
# both: at lr_factor 1.0 and batch 64 the held-out exact match swung by
# several points between evaluations and numbers needed 4000 steps; half the
# rate on twice the batch, 2000 (dates: 1250). Held-out exact match then sat
# near 97% for a thousand steps while Adam's steps wandered (numbers reached
# 99% at step 1375); a moving average of the weights (training.optimisation.averaging)
# reached it at 625 (dates: 375 against 750), evaluated every 125 steps on
# one worker (task_targets.py, on two: numbers 500, dates 375).
# Read only: every user copies it.
LANGUAGE_TASKS = {
    "model": dict(d_model=128, h=4, N=2, d_ff=512, dropout=0.0),
    "train": dict(steps=6000, batch_size=128, warmup=400, lr_factor=0.5, eval_every=125,
                  target_exact_match=0.99, average_decay=0.999),
}

# Sizes and schedules that reach the targets on a 2-core CPU in minutes.
TASK_DEFAULTS = {
    "copy": {
        "model": dict(d_model=64, h=4, N=2, d_ff=256, dropout=0.0),
        "train": dict(steps=2000, batch_size=64, warmup=100, lr_factor=0.2, eval_every=100),
    },
    "reverse": {
        "model": dict(d_model=64, h=4, N=2, d_ff=256, dropout=0.0),
        "train": dict(steps=3000, batch_size=64, warmup=100, lr_factor=0.2, eval_every=200),
    },
    "translate": {
        "model": dict(d_model=128, h=4, N=2, d_ff=512, dropout=0.1),
        "train": dict(steps=3000, batch_size=64, warmup=400, lr_factor=1.0, eval_every=250,
                      target_exact_match=0.98),
    },
    # A user's corpus (train translate --data FILE): sizes and stopping
    # chosen from the corpus (training.corpus_defaults), at half the translate
    # task's learning rate (at the full rate held-out exact match swung between
    # 53% and 95% on written dates); the model sizes here are those of a
    # corpus of 2,000 to 100,000 pairs, as the help text shows them.
    CORPUS: {
        "model": corpus_defaults.sizes("medium"),
        "train": corpus_defaults.training_settings(),
    },
    # lm: 99% at step 1125 with the weights' average, 1750 without
    "lm": {
        "model": dict(d_model=128, h=4, N=2, d_ff=512, dropout=0.0),
        "train": dict(steps=4000, batch_size=128, warmup=400, lr_factor=1.0, eval_every=125,
                      target_exact_match=0.99, average_decay=0.999),
    },
    "numbers": LANGUAGE_TASKS,
    "dates": LANGUAGE_TASKS,
}


def build_task(train_config, bpe=None):
    """The task a TrainConfig names: a built-in one, or the CORPUS task read
    from its ``data`` (with the merges of ``bpe``, a ``data.BPE``, where
    given, instead of learning them)."""
    if train_config.task == CORPUS and train_config.data is None:
        raise ValueError(f"data: the {CORPUS} task reads a TSV file, got None")
    if train_config.data is not None:
        return task_from_tsv(train_config.data, train_config.valid, level=train_config.level,
                             merges=train_config.merges, seed=train_config.seed, bpe=bpe)
    return load_task(train_config.task, seed=train_config.seed)


def stored_tokenizer(records):
    """The tokenizer a checkpoint's (checked) records describe: a text run's
    own (``text_records.stored_tokenizer``: characters or byte-level BPE),
    else a Tokenizer, whose merges are in the record "bpe" at level "bpe"."""
    if records["task"]["name"] == TEXT:
        return text_records.stored_tokenizer(records)
    level = records["task"]["level"]
    return Tokenizer(level, BPE.from_json(records["bpe"]) if level == "bpe" else None)


def model_config_for(task, **overrides):
    """A ModelConfig sized for ``task`` (its defaults, then ``overrides``)."""
    if task.name == CORPUS:  # a user's corpus: sized from the corpus
        sizes = corpus_defaults.model_sizes(task)
    else:
        sizes = dict(TASK_DEFAULTS.get(task.name, TASK_DEFAULTS["translate"])["model"])
    sizes.update({key: value for key, value in overrides.items() if value is not None})
    sizes.setdefault("max_len", max(64, task.max_length + 8))
    return ModelConfig(vocab_size=len(task.vocab), decoder_only=task.kind == "lm", **sizes)


def train_config_for(task_name, **overrides):
    """A TrainConfig for ``task_name`` (its defaults, then ``overrides``);
    with ``data``, a corpus of one's own, for the CORPUS task and its
    defaults."""
    if overrides.get("data") is not None:
        task_name = CORPUS
    settings = dict(TASK_DEFAULTS.get(task_name, TASK_DEFAULTS["translate"])["train"])
    settings.update({key: value for key, value in overrides.items() if value is not None})
    return TrainConfig(task=task_name, **settings)


def build_model(config, seed=0):
    model_class = DecoderOnlyLM if config.decoder_only else Transformer
    return model_class(config, rng=backend.host_rng(seed))


def new_trainer(train_config, model_overrides=None, **trainer_options):
    """A Trainer of a new model for ``train_config``; a corpus read with
    ``merges=None`` records the number of merges it learned."""
    task = build_task(train_config)
    if train_config.merges is None:
        learned = len(task.tokenizer.bpe.merges) if task.tokenizer.level == "bpe" else 0
        train_config = dataclasses.replace(train_config, merges=learned)
    config = model_config_for(task, **(model_overrides or {}))
    if task.max_length > config.max_len:
        raise ValueError(
            f"max_len: the task has sequences of {task.max_length} tokens, "
            f"longer than the model's max_len={config.max_len}"
        )
    check_training_fits(config, train_config, task)
    model = build_model(config, train_config.seed)
    return Trainer(model, task, train_config, **trainer_options)


def check_training_fits(config, train_config, task):
    """Refuse, before building it, a model whose training needs more memory
    than the machine has (``minitrans.core.memory_budget``)."""
    batch_size = min(train_config.batch_size, len(task.train))  # batches never hold more
    workers = train_config.workers or default_workers()
    needed = training_bytes(config, batch_size, task.max_length, workers,
                            average=train_config.average_decay > 0)
    check_fits(config, needed, f"training on batches of {batch_size} x {task.max_length} tokens")


# What may change when a run is resumed: how long and how it trains on.
# Everything else (the task, its data, the sizes, the seed, the warm-up)
# defines the run and stays as the checkpoint says.
RESUMABLE = ("steps", "batch_size", "lr_factor", "eval_every", "target_exact_match", "patience",
             "max_minutes", "workers", "average_decay")


@dataclasses.dataclass
class SavedRun:
    """A checkpoint read and checked: its arrays, records and configs."""

    path: str
    arrays: dict
    records: dict
    train_config: TrainConfig
    model_config: ModelConfig

    @property
    def step(self):
        return self.records["step"]


def read_run(path):
    """The checkpoint at ``path`` as a SavedRun, every record checked before
    anything of the sizes it names is built."""
    arrays, records = checkpoint.load_checkpoint(path)
    checkpoint.require(
        path,
        records,
        ["model_config", "train_config", "task", "vocab", "step", "optimizer_step", "history",
         "evaluations"],
        "records",
    )
    check_records(path, records, arrays)  # before a model of the sizes it names is built
    records = read_task_names(records)
    with checkpoint.reading(path):
        train_config = TrainConfig(**records["train_config"])
        config = ModelConfig.from_dict(records["model_config"])
    return SavedRun(str(path), arrays, records, train_config, config)


def resume_from(saved, out_dir=None, changes=None, **trainer_options):
    """A trainer restored from ``saved`` (a SavedRun), ready to continue
    ``fit()``, writing into ``out_dir`` (default: the folder of the
    checkpoint, never the folder recorded in it). ``changes`` maps fields of
    RESUMABLE to new values; changing ``batch_size`` changes the batches from
    here on (each epoch's order is cut into batches of the new size)."""
    changes = dict(changes or {})
    fixed = sorted(set(changes) - set(RESUMABLE))
    if fixed:
        raise ValueError(f"{', '.join(fixed)}: cannot change when a run is resumed "
                         f"(only {', '.join(RESUMABLE)} can)")
    if out_dir is None:
        out_dir = os.path.dirname(saved.path) or "."
    train_config = dataclasses.replace(saved.train_config, out_dir=str(out_dir), **changes)
    with checkpoint.reading(saved.path):
        tokenizer = stored_tokenizer(saved.records)
        vocab = Vocab.from_json(saved.records["vocab"])
    task = build_task(train_config, bpe=tokenizer.bpe)  # the merges the model was trained with
    if train_config.data is not None and task.vocab != vocab:  # the file has changed since
        raise checkpoint.CheckpointError(
            f"{saved.path}: the training data now gives another vocabulary than the "
            f"checkpoint's ({len(task.vocab)} tokens, the checkpoint has {len(vocab)})"
        )
    check_training_fits(saved.model_config, train_config, task)
    model = build_model(saved.model_config, train_config.seed)
    return restored(Trainer(model, task, train_config, **trainer_options), saved)


def restored(trainer, saved):
    """``trainer`` given the state ``saved`` holds (its weights, optimiser,
    history: ``Trainer.restore``), which is then its last good checkpoint."""
    with checkpoint.reading(saved.path):
        trainer.restore(saved.path, saved.arrays, saved.records)
    trainer.last_good = saved.path
    return trainer


def resume_trainer(path, steps=None, out_dir=None, **trainer_options):
    """A trainer restored from the checkpoint at ``path`` (``resume_from``);
    ``steps`` raises the total number of steps."""
    changes = {} if steps is None else {"steps": steps}
    return resume_from(read_run(path), out_dir, changes, **trainer_options)


def load_trained(path):
    """(model in eval mode, task without data) from a checkpoint: enough to
    translate and evaluate."""
    arrays, records = checkpoint.load_checkpoint(path)
    checkpoint.require(path, records, ["model_config", "task", "vocab"], "records")
    check_records(path, records, arrays)  # before a model of the sizes it names is built
    records = read_task_names(records)
    with checkpoint.reading(path):
        config = ModelConfig.from_dict(records["model_config"])
    check_fits(config, model_bytes(config), f"the model of {path}")  # not the file's fault
    with checkpoint.reading(path):
        model = build_model(config)
        checkpoint.load_parameters(model, arrays, path)
        info = records["task"]
        task = Task(name=info["name"], kind=info["kind"], tokenizer=stored_tokenizer(records),
                    vocab=Vocab.from_json(records["vocab"]), train=[], valid=[],
                    description=f"loaded from {path}")
    if len(task.vocab) != model.config.vocab_size:
        raise checkpoint.CheckpointError(f"{path}: the vocabulary has {len(task.vocab)} tokens, "
                                         f"the model's vocab_size is {model.config.vocab_size}")
    return model.eval(), task

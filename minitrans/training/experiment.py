"""Putting a run together: task + model + trainer, new or resumed, and
loading a trained model back for translation and evaluation."""

import dataclasses

from minitrans.core import backend
from minitrans.data import Tokenizer, Vocab
from minitrans.data.tasks import Task, load_task, task_from_tsv
from minitrans.model.config import ModelConfig
from minitrans.model.language_model import DecoderOnlyLM
from minitrans.model.transformer import Transformer
from minitrans.training import checkpoint
from minitrans.training.records import check_records
from minitrans.training.trainer import TrainConfig, Trainer

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
    "lm": {
        "model": dict(d_model=128, h=4, N=2, d_ff=512, dropout=0.0),
        "train": dict(steps=4000, batch_size=128, warmup=400, lr_factor=1.0, eval_every=250,
                      target_exact_match=0.99),
    },
    # numbers and dates, char level: at lr_factor 1.0 and batch 64 the held-out
    # exact match swung by several points between evaluations and numbers
    # needed 4000 steps; half the rate on twice the batch, 2000 (dates: 1250)
    "numbers": {
        "model": dict(d_model=128, h=4, N=2, d_ff=512, dropout=0.0),
        "train": dict(steps=6000, batch_size=128, warmup=400, lr_factor=0.5, eval_every=250,
                      target_exact_match=0.99),
    },
    "dates": {
        "model": dict(d_model=128, h=4, N=2, d_ff=512, dropout=0.0),
        "train": dict(steps=6000, batch_size=128, warmup=400, lr_factor=0.5, eval_every=250,
                      target_exact_match=0.99),
    },
}


def build_task(train_config):
    """The task a TrainConfig names: a built-in one, or one read from TSV."""
    if train_config.data is not None:
        return task_from_tsv(train_config.data, train_config.valid, level=train_config.level,
                             seed=train_config.seed)
    return load_task(train_config.task, seed=train_config.seed)


def model_config_for(task, **overrides):
    """A ModelConfig sized for ``task`` (its defaults, then ``overrides``)."""
    sizes = dict(TASK_DEFAULTS.get(task.name, TASK_DEFAULTS["translate"])["model"])
    sizes.update({key: value for key, value in overrides.items() if value is not None})
    sizes.setdefault("max_len", max(64, task.max_length() + 8))
    return ModelConfig(vocab_size=len(task.vocab), decoder_only=task.kind == "lm", **sizes)


def train_config_for(task_name, **overrides):
    settings = dict(TASK_DEFAULTS.get(task_name, TASK_DEFAULTS["translate"])["train"])
    settings.update({key: value for key, value in overrides.items() if value is not None})
    return TrainConfig(task=task_name, **settings)


def build_model(config, seed=0):
    model_class = DecoderOnlyLM if config.decoder_only else Transformer
    return model_class(config, rng=backend.host_rng(seed))


def new_trainer(train_config, model_overrides=None, **trainer_options):
    task = build_task(train_config)
    config = model_config_for(task, **(model_overrides or {}))
    if task.max_length() > config.max_len:
        raise ValueError(
            f"max_len: the task has sequences of {task.max_length()} tokens, "
            f"longer than the model's max_len={config.max_len}"
        )
    model = build_model(config, train_config.seed)
    return Trainer(model, task, train_config, **trainer_options)


def resume_trainer(path, steps=None, **trainer_options):
    """A trainer restored from a checkpoint, ready to continue ``fit()``;
    ``steps`` raises the total number of steps."""
    arrays, records = checkpoint.load_checkpoint(path)
    checkpoint.require(
        path,
        records,
        ["model_config", "train_config", "step", "optimizer_step", "history", "evaluations"],
        "records",
    )
    check_records(path, records, arrays)  # before a model of the sizes it names is built
    with checkpoint.reading(path):
        train_config = TrainConfig(**records["train_config"])
        config = ModelConfig.from_dict(records["model_config"])
    if steps is not None:
        train_config = dataclasses.replace(train_config, steps=steps)
    task = build_task(train_config)
    trainer = Trainer(build_model(config, train_config.seed), task, train_config, **trainer_options)
    with checkpoint.reading(path):
        trainer.restore(path, arrays, records)
    trainer.checkpoint_path = str(path)
    return trainer


def load_trained(path):
    """(model in eval mode, task without data) from a checkpoint: enough to
    translate and evaluate."""
    arrays, records = checkpoint.load_checkpoint(path)
    checkpoint.require(path, records, ["model_config", "task", "vocab"], "records")
    check_records(path, records, arrays)  # before a model of the sizes it names is built
    with checkpoint.reading(path):
        model = build_model(ModelConfig.from_dict(records["model_config"]))
        checkpoint.load_parameters(model, arrays, path)
        info = records["task"]
        task = Task(name=info["name"], kind=info["kind"], tokenizer=Tokenizer(info["level"]),
                    vocab=Vocab.from_json(records["vocab"]), train=[], valid=[],
                    description=f"loaded from {path}")
    if len(task.vocab) != model.config.vocab_size:
        raise checkpoint.CheckpointError(f"{path}: the vocabulary has {len(task.vocab)} tokens, "
                                         f"the model's vocab_size is {model.config.vocab_size}")
    return model.eval(), task

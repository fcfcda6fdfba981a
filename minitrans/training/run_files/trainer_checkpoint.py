"""What a checkpoint of a trainer holds: its arrays, written and read back,
and the records of a run from scratch.

A checkpoint holds every parameter (``param/NAME``), Adam's moments
(``optim/m/NAME``, ``optim/v/NAME``) and records. A run from scratch
(``training.recipe.PaperRecipe``) records the configs, the task, its
vocabulary and byte-pair merges, the step, the random-number rule, the loss
history and the held-out evaluations (``records_of``); a fine-tuning run
records its own (``training.finetune``). ``save`` writes the arrays with
the records, ``restore`` loads them into a trainer whose model has the
same shapes, so that training goes on as if it had never stopped. The
file format itself, and the checks of what is read, are
``training.run_files.checkpoint``'s.

A run that keeps a moving average of its weights (``training.optimisation.averaging``)
saves the average as ``param/NAME``: it is the model that the run's
evaluations measured and that every reader of a checkpoint should use. The
weights the optimiser updates are saved beside it as ``optim/weights/NAME``,
the rest of the optimiser's state, so that a resumed run goes on from them.
"""

import dataclasses

from minitrans.core import backend
from minitrans.training.run_files import checkpoint

ADAM_MOMENTS = ("optim/m/", "optim/v/")  # one of each for every parameter
WEIGHTS = "optim/weights/"  # the optimised weights, where param/ holds their average


def records_of(trainer):
    """The JSON records of the checkpoint of ``trainer``, a run from scratch
    (a dict); at level "bpe" the record "bpe" holds the merges
    (``data.BPE.to_json``)."""
    bpe = trainer.task.tokenizer.bpe
    return {**({"bpe": bpe.to_json()} if bpe is not None else {}),
        "model_config": trainer.model.config.to_dict(),
        "train_config": dataclasses.asdict(trainer.config),
        "task": {
            "name": trainer.task.name,
            "kind": trainer.task.kind,
            "level": trainer.task.tokenizer.level,
        },
        "vocab": trainer.task.vocab.to_json(),
        "step": trainer.step,
        "optimizer_step": trainer.optimizer.step_count,
        "rng": {
            "seed": trainer.config.seed,
            "step": trainer.step,
            "rule": "numpy default_rng([seed, epoch]) and dropout [seed, step]",
        },
        "history": trainer.history,
        "evaluations": trainer.evaluations,
    }


def arrays_of(trainer):
    """The parameters (their moving average, where the trainer keeps one,
    and the weights themselves under ``optim/weights/``) and Adam's moments,
    by their names in the file."""
    model = trainer.evaluated_model
    arrays = {f"param/{name}": value for name, value, _ in model.named_parameters()}
    if model is not trainer.model:
        arrays.update({f"{WEIGHTS}{name}": value
                       for name, value, _ in trainer.model.named_parameters()})
    state = trainer.optimizer.state_dict()
    arrays.update({f"optim/{key}": value for key, value in state.items() if key != "step"})
    return arrays


def save(trainer, path, records):
    """Write ``trainer``'s checkpoint to ``path`` (atomically): its arrays
    and ``records``, the JSON records its recipe gives."""
    checkpoint.save_checkpoint(path, arrays_of(trainer), records)


def restore(trainer, path, arrays, records):
    """Load a checkpoint's ``arrays`` and checked ``records`` into ``trainer``."""
    restore_weights(trainer, path, arrays)
    other = sorted(k for k in arrays if k.startswith("optim/")
                   and not k.startswith((*ADAM_MOMENTS, WEIGHTS)))
    if other:
        raise checkpoint.CheckpointError(f"{path}: optimizer state Adam has not: {other[:3]}")
    if records["optimizer_step"] > 0 or any(k.startswith(ADAM_MOMENTS) for k in arrays):
        for prefix in ADAM_MOMENTS:  # every parameter has them after one step
            checkpoint.check_arrays(path, arrays, prefix, trainer.model, "optimizer state")
    cut = len("optim/")
    state = {k[cut:]: backend.to_device(v) for k, v in arrays.items()
             if k.startswith(ADAM_MOMENTS)}
    trainer.optimizer.load_state_dict({"step": records["optimizer_step"], **state})
    trainer.step = int(records["step"])
    trainer.history = {key: list(values) for key, values in records["history"].items()}
    trainer.evaluations = list(records["evaluations"])


def restore_weights(trainer, path, arrays):
    """The weights to train on from ``optim/weights/`` where the file has
    them, else from ``param/``; and the trainer's moving average (if it keeps
    one) from ``param/`` where the file holds an average, else started anew
    at the weights (a run that did not average before)."""
    averaged = any(key.startswith(WEIGHTS) for key in arrays)
    checkpoint.load_parameters(trainer.model, arrays, path, WEIGHTS if averaged else "param/")
    if trainer.average is None:
        return
    if averaged:
        checkpoint.load_parameters(trainer.average.model, arrays, path)
    else:
        trainer.average.restart()

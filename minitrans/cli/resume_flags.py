"""``minitrans train --resume``: which flags may change a resumed run.

A checkpoint is one run: its task, data, tokens, sizes, seed and warm-up
made the weights it holds, and a flag that asks for others cannot be
honoured by continuing it, so it is refused (all such flags named in one
line, each with the checkpoint's value). How long and how it trains on
(``experiment.RESUMABLE``) may change, and the change is reported.
To tell which flags the user gave, every one of these flags has the
default None in the parser.
"""

from minitrans.data.tasks import CORPUS
from minitrans.training import experiment

# The command line's task of a corpus of one's own: train translate --data FILE.
CORPUS_COMMAND = "translate"

# argparse destination, which is also the config's field -> (flag, the config that keeps it)
FIXED = {
    "data": ("--data", "train"),
    "valid": ("--valid", "train"),
    "level": ("--level", "train"),
    "merges": ("--merges", "train"),
    "d_model": ("--d-model", "model"),
    "h": ("--heads", "model"),
    "N": ("--layers", "model"),
    "d_ff": ("--d-ff", "model"),
    "dropout": ("--dropout", "model"),
    "tie_embeddings": ("--tie-embeddings", "model"),
    "pre_norm": ("--pre-norm", "model"),
    "d_k": ("--d-k", "model"),
    "positions": ("--positions", "model"),
    "activation": ("--activation", "model"),
    "rope_base": ("--rope-base", "model"),
    "norm": ("--norm", "model"),
    "norm_eps": ("--norm-eps", "model"),
    "kv_heads": ("--kv-heads", "model"),
    "bias": ("--no-bias", "model"),
    "output_bias": ("--no-output-bias", "model"),
    "scale_embedding": ("--no-scale-embedding", "model"),
    "seed": ("--seed", "train"),
    "warmup": ("--warmup", "train"),
}
# The model's own flags: a new run builds its ModelConfig from them.
MODEL_FIELDS = tuple(field for field, (_, where) in FIXED.items() if where == "model")


def saved_value(saved, where, field):
    """The value of ``field`` in ``saved``'s train or model config."""
    config = saved.train_config if where == "train" else saved.model_config
    return getattr(config, field, None)


def check_unchanged(args, saved):
    """Refuse, in one line, every flag in ``args`` that asks ``saved`` (a
    SavedRun) for another task, data or size than it has."""
    offending = []
    if args.task != command_task(saved):
        offending.append(f"task {args.task} (checkpoint: {command_task(saved)})")
    for field, (flag, where) in FIXED.items():
        given = getattr(args, field, None)  # None: not given (or no such flag in this version)
        stored = saved_value(saved, where, field)
        if given is not None and given != stored:
            shown = "" if isinstance(given, bool) else f" {given}"
            offending.append(f"{flag}{shown} (checkpoint: {stored})")
    if offending:
        raise ValueError(
            f"--resume {saved.path}: these cannot change when a run is resumed: "
            f"{', '.join(offending)}; drop them, or start a new run without --resume"
        )


def command_task(saved):
    """The task the command line names to train ``saved`` (a SavedRun):
    CORPUS_COMMAND for the corpus task, else the task itself."""
    task = saved.train_config.task
    return CORPUS_COMMAND if task == CORPUS else task


def changes(args, saved):
    """The RESUMABLE fields that ``args`` gives other values than
    ``saved``'s: {field: new value}."""
    found = {}
    for field in experiment.RESUMABLE:
        given = getattr(args, field, None)
        if given is not None and given != getattr(saved.train_config, field):
            found[field] = given
    return found


def check_steps(args, saved, changed):
    """Refuse a resumed run that would train no step."""
    steps = changed.get("steps", saved.train_config.steps)
    if steps > saved.step:
        return
    if args.steps is not None:
        raise ValueError(
            f"the checkpoint is at step {saved.step}; --steps {args.steps} is not "
            f"above it: nothing to train"
        )
    raise ValueError(
        f"the checkpoint is at step {saved.step}, the end of its run (steps "
        f"{steps}): give --steps above {saved.step} to train on"
    )


def describe(saved, changed):
    """One line: where the run resumes, and what changed."""
    line = f"resuming at step {saved.step} of {saved.path}"
    if not changed:
        return line + "; nothing changed"
    shown = ", ".join(
        f"{field} {getattr(saved.train_config, field)} -> {value}"
        for field, value in changed.items()
    )
    note = (
        " (batches from here on differ from the original run's)" if "batch_size" in changed else ""
    )
    return f"{line}; changed: {shown}{note}"

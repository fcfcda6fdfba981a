"""``minitrans train text --data FILE``: a GPT trained from scratch on a
UTF-8 text, character by character or (``--level bpe``) in byte-level BPE
tokens learned from it, by nanoGPT's recipe (``training.text_run``,
``training.text_recipe``).

    minitrans train text --data input.txt                    nanoGPT's CPU recipe
    minitrans train text --data input.txt --level bpe --merges 500
    minitrans train text --data input.txt --steps 5000 --block-size 128
    minitrans train text --resume runs/input/checkpoint.npz --steps 4000
    minitrans generate --checkpoint runs/input/best.npz "ROMEO:"
    minitrans evaluate --checkpoint runs/input/best.npz --data test.txt

A bad flag is refused in one line before anything is written: the text's
token files go into the run's folder only once every flag has passed.
"""

import os

from minitrans.cli import flags, resume_flags
from minitrans.data.tasks import TEXT
from minitrans.data.vocab import SPECIAL_TOKENS
from minitrans.model.config import LIMITS
from minitrans.training import experiment, text_run
from minitrans.training.run_files import interrupt, run_folder

# argparse destination -> the TrainConfig field it sets, for the text task
SETTINGS = {"steps": "steps", "batch_size": "batch_size", "warmup": "warmup",
            "eval_every": "eval_every", "eval_windows": "eval_windows",
            "max_minutes": "max_minutes", "workers": "workers", "lr": "peak_lr",
            "min_lr": "min_lr", "weight_decay": "weight_decay", "grad_clip": "clip_norm",
            "block_size": "block_size", "level": "level", "merges": "merges", "seed": "seed"}
# The flags of the text task alone (refused with every other task)
OWN = ("min_lr", "weight_decay", "grad_clip", "eval_windows")
# Flags of the paper's tasks that a text run has no use for
REFUSED = {"init_from": "--init-from (it fine-tunes a pretrained model)",
           "lr_factor": "--lr-factor (use --lr, the peak rate)",
           "target_exact_match": "--target", "patience": "--patience",
           "average_decay": "--average-decay"}


def add_flags(train):
    """The train command's flags of the text task alone (--lr and
    --block-size are shared with --init-from)."""
    defaults = text_run.TEXT_DEFAULTS["train"]
    train.add_argument("--min-lr", type=flags.number(float, low=0),
                       help="text: the learning rate the cosine ends at, on the last step "
                       f"(default {defaults['min_lr']:g})")
    train.add_argument("--weight-decay", type=flags.number(float, low=0),
                       help="text: AdamW's weight decay, on the weight matrices and tables "
                       f"only (default {defaults['weight_decay']:g})")
    train.add_argument("--grad-clip", type=flags.number(float, low=0),
                       help="text: the most the gradient's global norm may be, 0: no clipping "
                       f"(default {defaults['clip_norm']:g})")
    train.add_argument("--eval-windows", type=flags.step_count,
                       help="text: held-out windows each evaluation measures (default "
                       f"{defaults['eval_windows']})")


def check_not_given(args):
    """Refuse the text task's own flags in a run of another task."""
    for name in OWN:
        if getattr(args, name, None) is not None:
            raise ValueError(f"--{name.replace('_', '-')}: only used by the {TEXT} task "
                             f"(minitrans train {TEXT} --data FILE)")


def run(args):
    check_flags(args)
    flags.use_device(args)
    progress = flags.progress_bar(args)
    trainer = resume(args, progress) if args.resume else new_run(args, progress)
    config, task, model = trainer.config, trainer.task, trainer.model
    budget = f" or {config.max_minutes:g} minutes" if config.max_minutes is not None else ""
    print(f"training for at most {config.steps} steps{budget}, evaluating every "
          f"{config.eval_every} on {config.eval_windows:,} held-out windows; AdamW at lr "
          f"{config.peak_lr:g} after {config.warmup} warm-up steps, a cosine down to "
          f"{config.min_lr:g}, weight decay {config.weight_decay:g}, gradient clipping at "
          f"{config.clip_norm:g}")
    print(f"{task.description}; {len(task.train):,} training and {len(task.valid):,} held-out "
          f"tokens, batches of {config.batch_size} windows of {task.block_size}")
    print(f"model: {model.num_parameters():,} parameters, {model.config}")
    try:
        trainer.fit()
    except interrupt.TrainingInterrupted as stop:
        return flags.interrupted(
            stop, f"; resume with minitrans train {TEXT} --resume {stop.checkpoint}")
    figures = trainer.save_plots()
    best = trainer.best_evaluation()
    print(f"held-out loss {best['loss']:.4f} nats/token, {best['bits_per_character']:.4f} "
          f"bits/char at step {best['step']} (the best of {len(trainer.evaluations)} "
          f"evaluations, {trainer.step} steps)")
    print(f"checkpoint: {trainer.checkpoint_path} (last), {trainer.best_checkpoint_path()} "
          f"(lowest held-out loss)" + (f"; plots: {', '.join(figures)}" if figures else ""))
    print(f"continue a text with: minitrans generate --checkpoint "
          f"{trainer.best_checkpoint_path()} \"...\"")
    return 0


def check_flags(args):
    """Refuse, before anything is read or written, what a text run cannot do."""
    given = [shown for name, shown in REFUSED.items() if getattr(args, name, None) is not None]
    if given:
        raise ValueError(f"these flags do not apply to the {TEXT} task: {', '.join(given)}")
    if args.resume:
        return
    if args.data is None:
        raise ValueError(f"--data: the {TEXT} task trains on a UTF-8 text of your own: "
                         f"minitrans train {TEXT} --data FILE")
    if args.level not in (None, "char", "bpe"):
        raise ValueError(f"--level {args.level}: the {TEXT} task reads characters or byte-level "
                         "BPE tokens, expected --level char or --level bpe")
    if args.merges is not None and args.level != "bpe":
        raise ValueError(f"--merges: byte-pair merges are learned at --level bpe alone, the "
                         f"{TEXT} task reads characters at --level {args.level or 'char'}")
    if args.block_size is not None and args.block_size > LIMITS["max_len"]:
        raise ValueError(f"--block-size: expected at most {LIMITS['max_len']} (the most "
                         f"positions a model may have), got {args.block_size}")


def train_settings(args):
    """{TrainConfig field: value} of the flags given (None: not given)."""
    return {field: getattr(args, name) for name, field in SETTINGS.items()}


def new_run(args, progress):
    """The trainer of a new run: its config and sizes checked first, then
    the text read into the run's folder."""
    settings = train_settings(args)
    config = text_run.text_train_config(data=args.data, valid=args.valid, **settings)
    if config.warmup > config.steps:
        raise ValueError(f"--warmup: {config.warmup} warm-up steps, expected at most --steps "
                         f"{config.steps}; give a smaller --warmup or more --steps")
    sizes = {field: getattr(args, field) for field in resume_flags.MODEL_FIELDS}
    for characters in (0, text_run.SMALL_TEXT):  # either size a text may get
        text_run.text_model_config(len(SPECIAL_TOKENS) + 2, config.block_size,
                                   characters, sizes)
    out = flags.new_run_folder(args, TEXT)
    config = text_run.text_train_config(data=args.data, valid=args.valid, out_dir=out,
                                        **settings)
    trainer = text_run.new_text_trainer(config, sizes, progress=progress)
    given = {name for name in ("d_model", "N", "h") if sizes[name] is not None}
    chosen = text_run.explain(trainer.task, trainer.model.config, given)
    if chosen:
        print(chosen)
    return trainer


def resume(args, progress):
    """The trainer of --resume: flags that would make it another run
    refused, the changed ones reported."""
    saved = experiment.read_run(args.resume)
    if saved.train_config.task != TEXT:
        command = resume_flags.command_task(saved)
        raise ValueError(f"--resume {args.resume}: holds a run of the {command} task; "
                         f"continue it with minitrans train {command} --resume {args.resume}")
    resume_flags.check_unchanged(args, saved)
    stored = saved.train_config.block_size
    if args.block_size is not None and args.block_size != stored:
        raise ValueError(f"--resume {args.resume}: these cannot change when a run is resumed: "
                         f"--block-size {args.block_size} (checkpoint: {stored}); drop it, or "
                         "start a new run without --resume")
    settings = train_settings(args)
    changed = {field: settings[field] for field in text_run.RESUMABLE
               if settings.get(field) is not None
               and settings[field] != getattr(saved.train_config, field)}
    resume_flags.check_steps(args, saved, changed)
    out = args.out if args.out is not None else (os.path.dirname(args.resume) or ".")
    run_folder.check_resume_into(out, args.resume, args.force)
    trainer = text_run.resume_text(saved, out, changed, progress=progress)
    print(resume_flags.describe(saved, changed) + (f"; writing into {out}" if args.out else ""))
    return trainer

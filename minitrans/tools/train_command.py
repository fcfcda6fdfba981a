"""``minitrans train``: train a model on a built-in task or a TSV corpus.

A run never overwrites another: a new run goes into a folder without a
checkpoint (``training.run_folder``), a resumed one refuses flags that would
make it another run (``tools.resume_flags``), and Ctrl-C saves first.
"""

import os
import sys

from minitrans.tools import arguments


def add_parser(commands):
    train = commands.add_parser("train", help="train a model on a toy task or a TSV corpus")
    train.add_argument("task", choices=["copy", "reverse", "translate", "lm"])
    train.add_argument("--data", help="training pairs, one 'source<TAB>target' per line (UTF-8)")
    train.add_argument("--valid", help="held-out pairs (default: a fixed slice of --data)")
    train.add_argument("--level", choices=["word", "char"], help="tokens of --data (default word)")
    train.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    train.add_argument("--steps", type=arguments.positive_int)
    train.add_argument("--batch-size", type=arguments.positive_int)
    train.add_argument("--warmup", type=arguments.positive_int)
    train.add_argument("--lr-factor", type=float)
    train.add_argument("--eval-every", type=arguments.positive_int)
    train.add_argument(
        "--target", type=float, dest="target_exact_match", help="stop at this exact match (0-1)"
    )
    train.add_argument(
        "--seed", type=arguments.non_negative_int, help="seed (default 0)"
    )
    train.add_argument(
        "--workers",
        type=arguments.positive_int,
        help="threads, each training on a shard of every batch (default 2 on cpu, 1 on gpu)",
    )
    train.add_argument("--d-model", type=arguments.positive_int)
    train.add_argument("--heads", type=arguments.positive_int, dest="h")
    train.add_argument("--layers", type=arguments.positive_int, dest="N")
    train.add_argument("--d-ff", type=arguments.positive_int)
    train.add_argument("--dropout", type=arguments.probability)
    train.add_argument("--tie-embeddings", action="store_true", default=None)
    train.add_argument("--pre-norm", action="store_true", default=None)
    train.add_argument(
        "--out",
        help="folder for the checkpoint and plots (default runs/TASK, or runs/NAME for "
        "--data NAME.tsv; if that holds a checkpoint, the next free runs/TASK-2, -3, ...)",
    )
    train.add_argument(
        "--resume",
        metavar="CHECKPOINT",
        help="continue a run from its checkpoint (its task, data, sizes, seed and warmup stay), "
        "writing into --out (default: its folder)",
    )
    train.add_argument(
        "--force", action="store_true", help="replace the checkpoint of an earlier run in --out"
    )
    train.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args):
    from minitrans.training import evaluation, experiment, interrupt

    arguments.use_device(args)
    progress = not args.no_progress
    if args.resume:
        trainer = resume(args, progress)
    else:
        out = folder_of_new_run(args)
        schedule = (
            "steps",
            "batch_size",
            "warmup",
            "lr_factor",
            "eval_every",
            "target_exact_match",
            "workers",
        )
        train_config = experiment.train_config_for(
            args.task,
            data=args.data,
            valid=args.valid,
            level=args.level,
            seed=args.seed,
            out_dir=out,
            **{k: getattr(args, k) for k in schedule},
        )
        sizes = {
            k: getattr(args, k)
            for k in ("d_model", "h", "N", "d_ff", "dropout", "tie_embeddings", "pre_norm")
        }
        trainer = experiment.new_trainer(train_config, sizes, progress=progress)
    task, model = trainer.task, trainer.model
    print(
        f"task {task.name}: {task.description}; "
        f"{len(task.train)} training and {len(task.valid)} held-out pairs"
    )
    print(f"model: {model.num_parameters():,} parameters, {model.config}")
    try:
        result = trainer.fit()
    except interrupt.TrainingInterrupted as stop:
        print(f"interrupted at step {stop.step}; saved {stop.checkpoint}; resume with "
              f"minitrans train {args.task} --resume {stop.checkpoint}", file=sys.stderr)
        return 130
    figures = trainer.save_plots()
    print(
        f"held-out exact match {result['exact_match']:.1%} on {result['pairs']} pairs "
        f"after {trainer.step} steps"
    )
    samples = task.valid[:5]
    _, predictions = evaluation.exact_match(model, task, samples)
    for (source, target), prediction in zip(samples, predictions):
        mark = "ok " if prediction == task.tokenizer.join(task.tokenizer.split(target)) else "BAD"
        print(f"  {mark} {source!r} -> {prediction!r}")
    print(
        f"checkpoint: {trainer.checkpoint_path}"
        + (f"; plots: {', '.join(figures)}" if figures else "")
    )
    return 0


def folder_of_new_run(args):
    """--out, refused if it holds an earlier run's checkpoint (unless
    --force) or a trainer works there; without --out the default folder, or
    the next free numbered one, said in the first line of output."""
    from minitrans.training import run_folder

    if args.out is not None:
        run_folder.check_new_run(args.out, args.force)
        return args.out
    default = run_folder.default_folder(args.task, args.data)
    if args.force:
        run_folder.check_new_run(default, force=True)
        return default
    out = run_folder.free_folder(default)
    if out != default:
        print(f"{default} holds another run; this one writes into {out}")
    return out


def resume(args, progress):
    """The trainer of --resume: flags that would make it another run
    refused, the changed ones reported, written into --out (default: the
    checkpoint's folder)."""
    from minitrans.tools import resume_flags
    from minitrans.training import experiment, run_folder

    saved = experiment.read_run(args.resume)
    resume_flags.check_unchanged(args, saved)
    changed = resume_flags.changes(args, saved)
    out = args.out if args.out is not None else (os.path.dirname(args.resume) or ".")
    trainer = experiment.resume_from(saved, out, changed, progress=progress)  # checks the rest
    resume_flags.check_steps(args, saved, changed)
    run_folder.check_resume_into(out, args.resume, args.force)
    print(resume_flags.describe(saved, changed) + (f"; writing into {out}" if args.out else ""))
    return trainer

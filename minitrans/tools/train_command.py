"""``minitrans train``: train a model on a built-in task or a TSV corpus."""

import os

from minitrans.data.tasks import TASKS
from minitrans.tools import arguments


def add_parser(commands):
    train = commands.add_parser("train", help="train a model on a toy task or a TSV corpus")
    train.add_argument("task", choices=list(TASKS))  # the task registry: data.tasks.TASKS
    train.add_argument("--data", help="training pairs, one 'source<TAB>target' per line (UTF-8)")
    train.add_argument("--valid", help="held-out pairs (default: a fixed slice of --data)")
    train.add_argument(
        "--level", choices=["word", "char"], default="word", help="tokens of --data (default word)"
    )
    train.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    train.add_argument("--steps", type=arguments.positive_int)
    train.add_argument("--batch-size", type=arguments.positive_int)
    train.add_argument("--warmup", type=arguments.positive_int)
    train.add_argument("--lr-factor", type=float)
    train.add_argument("--eval-every", type=arguments.positive_int)
    train.add_argument(
        "--target", type=float, dest="target_exact_match", help="stop at this exact match (0-1)"
    )
    train.add_argument("--seed", type=arguments.non_negative_int, default=0)
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
    train.add_argument("--out", help="folder for the checkpoint and plots (default runs/TASK)")
    train.add_argument("--resume", metavar="CHECKPOINT", help="continue a run from its checkpoint")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args):
    from minitrans.training import evaluation, experiment

    arguments.use_device(args)
    progress = not args.no_progress
    if args.resume:
        trainer = experiment.resume_trainer(args.resume, steps=args.steps, progress=progress)
    else:
        out = args.out or os.path.join("runs", args.task)
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
    result = trainer.fit()
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

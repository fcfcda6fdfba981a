"""``minitrans train``: train a model on a built-in task or a TSV corpus.

A run never overwrites another: a new run goes into a folder without a
checkpoint (``training.run_files.run_folder``), a resumed one refuses flags that would
make it another run (``cli.resume_flags``), and Ctrl-C saves first.
"""

import dataclasses
import os
import sys

from minitrans.cli import finetune, flags, resume_flags, train_text
from minitrans.data import corpus
from minitrans.data.bpe import MAX_MERGES
from minitrans.data.tasks import CORPUS, TASKS, TEXT
from minitrans.layers.add_norm import NORMS
from minitrans.layers.feedforward import FEED_FORWARDS
from minitrans.layers.positional import POSITIONS
from minitrans.model.config import LIMITS, ModelConfig
from minitrans.training import corpus_defaults, experiment
from minitrans.training.optimisation import evaluation, stopping
from minitrans.training.run_files import interrupt, run_folder
from minitrans.training.optimisation.parallel import MAX_WORKERS
from minitrans.training.train_config import TrainConfig


def per_task(key):
    """The default of a train flag for each task, in words, read from
    ``experiment.TASK_DEFAULTS`` (else the TrainConfig or ModelConfig
    default): "copy 2000, reverse 3000, translate 3000, --data 20000, lm 4000",
    where "--data" stands for TASK_DEFAULTS' CORPUS, a user's corpus, or
    "--data 4, the built-in tasks none" where only that one differs."""
    fallback = {f.name: f.default for config in (TrainConfig, ModelConfig)
                for f in dataclasses.fields(config)}
    values = {task: {**sections["model"], **sections["train"]}.get(key, fallback.get(key))
              for task, sections in experiment.TASK_DEFAULTS.items()}
    shown = {task: "none" if value is None else str(value) for task, value in values.items()}
    if len(set(shown.values())) == 1:
        return next(iter(shown.values()))
    others = {value for task, value in shown.items() if task != CORPUS}
    if len(others) == 1:  # only a corpus of one's own differs
        return f"--data {shown[CORPUS]}, the built-in tasks {others.pop()}"
    return ", ".join(f"{'--data' if task == CORPUS else task} {value}"
                     for task, value in shown.items())


def add_parsers(commands):
    train = commands.add_parser(
        "train", help="train a model on a toy task or a TSV corpus",
        description="Train a model on a built-in task or on your own TSV corpus. Sizes and "
        "schedule default per task (shown below as 'copy 2000, reverse 3000, ...'), and "
        "training on your own corpus has its own ('--data ...'). Every --eval-every steps: "
        "held-out loss, token accuracy, exact match and a checkpoint. A progress bar is drawn "
        "only when standard error is a terminal; otherwise a line of training loss, learning "
        "rate and tokens/s per evaluation. 'train text --data FILE' trains a GPT from scratch "
        "on a UTF-8 text, character by character, by nanoGPT's CPU recipe (4 layers, 4 heads, "
        "width 128, a smaller model for a text under 100,000 characters; --block-size 64, "
        "--batch-size 12, --steps 2000, --lr 1e-3 after --warmup 100 down to --min-lr 1e-4, "
        "--eval-every 250); its held-out loss is in nats per token and bits per character.",
        formatter_class=flags.HelpFormatter,
    )

    def flag(name, key, meaning, **options):
        train.add_argument(name, **options, help=f"{meaning} (default: {per_task(key)})")

    train.add_argument("task", choices=[*TASKS, TEXT], nargs="?",  # data.tasks.TASKS, and text
                       help="the task (translate with --data: your own corpus; text with "
                       "--data: a GPT on your own text); none with --init-from")
    finetune.add_flags(train)
    train_text.add_flags(train)
    train.add_argument("--data", help="training pairs, one 'source<TAB>target' per line (UTF-8) "
                       "(default: the task's own generated data)")
    train.add_argument("--valid", help="held-out pairs (default: a fixed slice of --data)")
    train.add_argument(
        "--level", choices=["bpe", "char", "word"],
        help="tokens of --data: bpe (sub-words learned from the training pairs: no word is "
        "unknown unless it holds an unseen character), char, or word (default bpe)",
    )
    train.add_argument("--merges", type=flags.number(int, low=0, most=MAX_MERGES),
                       help="byte-pair merges learned at --level bpe (default: every pair seen "
                       "in at least 1 of every 100 training pairs)")
    flags.add_device(train)
    flag("--steps", "steps", "training steps", type=flags.step_count)
    flag("--batch-size", "batch_size", "pairs per step", type=flags.batch_size)
    flag("--warmup", "warmup", "steps of linear learning-rate warm-up",
         type=flags.step_count)
    flag("--lr-factor", "lr_factor", "multiplies the paper's learning-rate schedule", type=float)
    flag("--eval-every", "eval_every", "steps between held-out evaluations and checkpoints",
         type=flags.step_count)
    flag("--target", "target_exact_match", "stop once held-out exact match reaches this (0-1)",
         type=float, dest="target_exact_match")
    flag("--patience", "patience", "stop once this many evaluations in a row bring no better "
         "held-out exact match (none: never)", type=flags.step_count)
    flag("--max-minutes", "max_minutes", "stop at the first evaluation after this many minutes "
         "of training (none: no limit)", type=flags.positive_number)
    flag("--average-decay", "average_decay", "evaluate and save a moving average of the "
         "weights with this decay, e.g. 0.999 (0: the weights themselves)",
         type=flags.number(float, low=0, high=1, high_open=True))
    train.add_argument("--seed", type=flags.non_negative_int,
                       help="seed of the data, the weights and every step's batch (default 0)")
    train.add_argument(
        "--workers",
        type=flags.size(MAX_WORKERS),
        help="workers (processes on Linux, else threads), each training on a shard of every "
             "batch (default 2 on cpu, 1 on gpu)",
    )
    flag("--d-model", "d_model", "model width d_model", type=flags.size(LIMITS["d_model"]))
    flag("--heads", "h", "attention heads h (must divide d_model, unless --d-k)",
         type=flags.size(LIMITS["h"]), dest="h")
    flag("--layers", "N", "layers N of the encoder and of the decoder",
         type=flags.size(LIMITS["N"]), dest="N")
    flag("--d-ff", "d_ff", "inner width of the feed-forward network",
         type=flags.size(LIMITS["d_ff"]))
    flag("--dropout", "dropout", "dropout probability", type=flags.probability)
    flag("--tie-embeddings", "tie_embeddings", "share one matrix between the embeddings and "
         "the output projection", action="store_true", default=None)
    flag("--pre-norm", "pre_norm", "the norm before each sub-layer instead of after",
         action="store_true", default=None)
    train.add_argument("--d-k", type=flags.size(LIMITS["d_k"]),
                       help="width d_k of each attention head (default: d_model / heads)")
    flag("--positions", "positions", "positional encoding: the paper's sinusoids, a learned "
         "table, or rope (rotary: queries and keys turned by their positions, as Llama)",
         choices=POSITIONS)
    flag("--rope-base", "rope_base", "base of the rotary angles of --positions rope (Llama 3: "
         "500000)", type=flags.number(float, low=1, low_open=True))
    flag("--activation", "activation", "the feed-forward network: the paper's ReLU, GELU, or "
         "swiglu (a gated network of three matrices, as Llama)", choices=FEED_FORWARDS)
    flag("--norm", "norm", "normalisation: layer (the paper's LayerNorm) or rms (RMSNorm, as "
         "Llama)", choices=NORMS)
    flag("--norm-eps", "norm_eps", "eps of every norm", type=flags.positive_number)
    add_modern_flags(train)
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
        "--force", action="store_true",
        help="replace the checkpoint of an earlier run in --out (default: refuse a folder "
        "that holds one)"
    )
    train.add_argument("--no-progress", action="store_true",
                       help="no progress bar, even on a terminal (default: a bar on a terminal)")
    train.set_defaults(run=run, parser=train)


def add_modern_flags(train):
    """The options of later models that have no per-task default: grouped-
    query attention and the biases and scale that GPT-2 and Llama leave out.
    Each defaults to None in the parser, so that --resume can tell what was given."""
    train.add_argument("--kv-heads", type=flags.size(LIMITS["kv_heads"]),
                       help="key/value heads of grouped-query attention, a divisor of --heads "
                       "(default: heads, the paper's multi-head attention)")
    train.add_argument("--no-bias", action="store_false", dest="bias", default=None,
                       help="no biases in the attention and feed-forward projections, as Llama "
                       "(default: biases, as the paper)")
    train.add_argument("--no-output-bias", action="store_false", dest="output_bias",
                       default=None, help="no bias in the output projection, as GPT-2 and "
                       "Llama (default: a bias)")
    train.add_argument("--no-scale-embedding", action="store_false", dest="scale_embedding",
                       default=None, help="embeddings not multiplied by sqrt(d_model), as GPT-2 "
                       "and Llama (default: multiplied, as the paper)")


def run(args):
    if args.task == TEXT:
        return train_text.run(args)
    train_text.check_not_given(args)
    if args.init_from is not None:
        return finetune.run(args)
    if args.task is None:
        args.parser.error("the following arguments are required: task (or --init-from FOLDER)")
    finetune.check_not_given(args)
    flags.use_device(args)
    check_corpus_flags(args)
    progress = flags.progress_bar(args)
    if args.resume:
        trainer = resume(args, progress)
    else:
        out = flags.new_run_folder(args, CORPUS if args.data is not None else args.task)
        schedule = (
            "steps",
            "batch_size",
            "warmup",
            "lr_factor",
            "eval_every",
            "target_exact_match",
            "patience",
            "max_minutes",
            "workers",
            "average_decay",
        )
        train_config = experiment.train_config_for(
            args.task,
            data=args.data,
            valid=args.valid,
            level=args.level,
            merges=args.merges,
            seed=args.seed,
            out_dir=out,
            **{k: getattr(args, k) for k in schedule},
        )
        sizes = {field: getattr(args, field) for field in resume_flags.MODEL_FIELDS}
        trainer = experiment.new_trainer(train_config, sizes, progress=progress)
    print(stopping.describe(trainer.config))  # first: how long this may take
    if trainer.config.average_decay:
        print(f"evaluating and saving a moving average of the weights (decay "
              f"{trainer.config.average_decay:g}; --average-decay 0: the weights themselves)")
    task, model = trainer.task, trainer.model
    print(
        f"task {task.description}; "
        f"{len(task.train)} training and {len(task.valid)} held-out pairs"
    )
    print(f"model: {model.num_parameters():,} parameters, {model.config}")
    if trainer.config.data is not None and not args.resume:
        given = {name for name in ("merges", "d_model") if getattr(args, name) is not None}
        print(corpus_defaults.explain(task, trainer.config, model.config, given))
    if trainer.config.data is not None:  # a user's corpus: can every held-out token be predicted?
        coverage, warnings = corpus.coverage_report(task)
        print(coverage)
        for warning in warnings:
            print(f"minitrans: warning: {warning}", file=sys.stderr)
    try:
        result = trainer.fit()
    except interrupt.TrainingInterrupted as stop:
        return flags.interrupted(
            stop, f"; resume with minitrans train {args.task} --resume {stop.checkpoint}")
    figures = trainer.save_plots()
    print(
        f"held-out exact match {result['exact_match']:.1%} on {result['pairs']} pairs "
        f"after {trainer.step} steps"
    )
    samples = task.valid[:5]
    _, predictions = evaluation.exact_match(trainer.evaluated_model, task, samples)
    for (source, target), prediction in zip(samples, predictions):
        mark = "ok " if prediction == evaluation.reference_text(task, target) else "BAD"
        print(f"  {mark} {source!r} -> {prediction!r}")
    best = trainer.best_evaluation()
    print(
        f"checkpoint: {trainer.checkpoint_path} (last)"
        + (f", {trainer.best_checkpoint_path()} (best held-out exact match, "
           f"{best['exact_match']:.1%} at step {best['step']})" if best else "")
        + (f"; plots: {', '.join(figures)}" if figures else "")
    )
    return 0


def check_corpus_flags(args):
    """Refuse the flags that only a corpus (--data) uses when none is given:
    they would be ignored, or recorded without meaning anything; and a
    corpus given to another task than translate, which it would not be."""
    if args.data is not None and args.task != resume_flags.CORPUS_COMMAND:
        raise ValueError(f"--data: a corpus of your own trains with the "
                         f"{resume_flags.CORPUS_COMMAND} task (minitrans train "
                         f"{resume_flags.CORPUS_COMMAND} --data FILE), got {args.task}")
    if args.data is not None or args.resume:
        return
    for name in ("valid", "level", "merges"):
        if getattr(args, name) is not None:
            raise ValueError(f"--{name}: only used with --data (a corpus of your own); the "
                             f"{args.task} task generates its own data, got --{name} "
                             f"{getattr(args, name)}")


def resume(args, progress):
    """The trainer of --resume: flags that would make it another run
    refused, the changed ones reported, written into --out (default: the
    checkpoint's folder)."""
    saved = experiment.read_run(args.resume)
    resume_flags.check_unchanged(args, saved)
    changed = resume_flags.changes(args, saved)
    out = args.out if args.out is not None else (os.path.dirname(args.resume) or ".")
    trainer = experiment.resume_from(saved, out, changed, progress=progress)  # checks the rest
    resume_flags.check_steps(args, saved, changed)
    run_folder.check_resume_into(out, args.resume, args.force)
    print(resume_flags.describe(saved, changed) + (f"; writing into {out}" if args.out else ""))
    return trainer

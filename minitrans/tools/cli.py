"""The ``minitrans`` command line.

    minitrans train copy|reverse|translate|lm [--data TRAIN.tsv [--valid VALID.tsv]] ...
    minitrans translate --checkpoint FILE "text"     (or one sentence per stdin line)
    minitrans evaluate --checkpoint FILE --data TEST.tsv
    minitrans gradcheck [--backend numpy|strict|cupy]

Every error in what the user typed or pointed to is reported as one line on
stderr with a non-zero exit status, never as a traceback.
"""

import argparse
import os
import sys
import warnings

from minitrans.core import backend, checks


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line instead of usage + message
        raise _UsageError(f"{self.prog}: {message} (see --help)")


class _UsageError(Exception):
    pass


def _number(convert, **bounds):
    """An argparse type: ``convert(text)`` (int or float), refused outside
    ``bounds`` in the words of ``checks.check_int``/``check_number``. Text
    that is not a number at all gets argparse's own "invalid int value:
    'abc'", hence the name."""
    if convert is int:
        is_valid, describe = checks.is_int, checks.describe_int
    else:
        is_valid, describe = checks.is_number, checks.describe_number

    def parse(text):
        value = convert(text)
        if not is_valid(value, **bounds):
            raise argparse.ArgumentTypeError(f"expected {describe(**bounds)}, got {text}")
        return value

    parse.__name__ = convert.__name__
    return parse


_positive_int = _number(int, low=1)
_non_negative_int = _number(int, low=0)
_probability = _number(float, low=0, high=1, high_open=True)


def _device(args):
    """--device gpu runs the same code on CuPy."""
    backend.use("cupy" if args.device == "gpu" else "numpy")


def build_parser():
    parser = _Parser(prog="minitrans", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    train = commands.add_parser("train", help="train a model on a toy task or a TSV corpus")
    train.add_argument("task", choices=["copy", "reverse", "translate", "lm"])
    train.add_argument("--data", help="training pairs, one 'source<TAB>target' per line (UTF-8)")
    train.add_argument("--valid", help="held-out pairs (default: a fixed slice of --data)")
    train.add_argument(
        "--level", choices=["word", "char"], default="word", help="tokens of --data (default word)"
    )
    train.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    train.add_argument("--steps", type=_positive_int)
    train.add_argument("--batch-size", type=_positive_int)
    train.add_argument("--warmup", type=_positive_int)
    train.add_argument("--lr-factor", type=float)
    train.add_argument("--eval-every", type=_positive_int)
    train.add_argument(
        "--target", type=float, dest="target_exact_match", help="stop at this exact match (0-1)"
    )
    train.add_argument("--seed", type=_non_negative_int, default=0)
    train.add_argument(
        "--workers",
        type=_positive_int,
        help="threads, each training on a shard of every batch (default 2 on cpu, 1 on gpu)",
    )
    train.add_argument("--d-model", type=_positive_int)
    train.add_argument("--heads", type=_positive_int, dest="h")
    train.add_argument("--layers", type=_positive_int, dest="N")
    train.add_argument("--d-ff", type=_positive_int)
    train.add_argument("--dropout", type=_probability)
    train.add_argument("--tie-embeddings", action="store_true", default=None)
    train.add_argument("--pre-norm", action="store_true", default=None)
    train.add_argument("--out", help="folder for the checkpoint and plots (default runs/TASK)")
    train.add_argument("--resume", metavar="CHECKPOINT", help="continue a run from its checkpoint")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")

    translate = commands.add_parser("translate", help="translate text with a trained checkpoint")
    translate.add_argument("--checkpoint", required=True)
    translate.add_argument(
        "text", nargs="?", help="a sentence (default: every line of standard input)"
    )
    translate.add_argument(
        "--beam", type=_positive_int, default=1, help="beam width (default 1: greedy)"
    )
    translate.add_argument("--device", choices=["cpu", "gpu"], default="cpu")

    evaluate = commands.add_parser(
        "evaluate", help="exact match and BLEU of a checkpoint on a TSV file"
    )
    evaluate.add_argument("--checkpoint", required=True)
    evaluate.add_argument("--data", required=True)
    evaluate.add_argument("--device", choices=["cpu", "gpu"], default="cpu")

    check = commands.add_parser(
        "gradcheck",
        help="check every layer's backward against central differences (float64)",
        description="Gradient-check every layer in float64 and print a table; "
        "exits with status 1 if any tensor's relative error is 1e-6 or more.",
    )
    check.add_argument("--backend", choices=backend.BACKENDS, default=None,
                       help="array backend (default: MINITRANS_BACKEND or numpy)")
    check.add_argument(
        "--seed", type=_non_negative_int, default=0, help="seed of inputs and weights (default 0)"
    )
    return parser


def gradcheck_command(args):
    from minitrans.tools.gradcheck import format_table
    from minitrans.tools.gradcheck_report import run_report

    name = args.backend or backend.backend_name()
    results = run_report(name, seed=args.seed)
    print(f"Gradient check, backend {name}, float64, relative error must be below 1e-6\n")
    print(format_table(results))
    failures = [r for r in results if not r.passed]
    if failures:
        print(f"\n{len(failures)} of {len(results)} tensors FAILED")
        return 1
    print(f"\nall {len(results)} tensors of {len({r.layer for r in results})} layer checks passed")
    return 0


def train_command(args):
    from minitrans.training import evaluation, experiment

    _device(args)
    progress = not args.no_progress
    if args.resume:
        trainer = experiment.resume_trainer(args.resume, steps=args.steps, progress=progress)
    else:
        out = args.out or os.path.join("runs", args.task)
        schedule = ("steps", "batch_size", "warmup", "lr_factor", "eval_every",
                    "target_exact_match", "workers")
        train_config = experiment.train_config_for(
            args.task, data=args.data, valid=args.valid, level=args.level, seed=args.seed,
            out_dir=out, **{k: getattr(args, k) for k in schedule})
        sizes = {k: getattr(args, k)
                 for k in ("d_model", "h", "N", "d_ff", "dropout", "tie_embeddings", "pre_norm")}
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


def translate_command(args):
    from minitrans.training import evaluation, experiment

    _device(args)
    model, task = experiment.load_trained(args.checkpoint)
    lines = [args.text] if args.text is not None else [line.rstrip("\n") for line in sys.stdin]
    for text in lines:
        if not text.strip():
            print()
            continue
        ids = evaluation.predict(model, task, [text], beam_size=args.beam)[0]
        print(task.tokenizer.join(task.vocab.decode(ids)))
    return 0


def evaluate_command(args):
    from minitrans.data import read_tsv
    from minitrans.training import evaluation, experiment

    _device(args)
    model, task = experiment.load_trained(args.checkpoint)
    pairs = read_tsv(args.data)
    accuracy, predictions = evaluation.exact_match(model, task, pairs)
    references = [task.tokenizer.join(task.tokenizer.split(target)) for _, target in pairs]
    print(f"{len(pairs)} pairs from {args.data}")
    print(f"exact match: {accuracy:.1%}")
    print(f"BLEU: {evaluation.corpus_bleu(predictions, references):.2f}")
    return 0


COMMANDS = {"gradcheck": gradcheck_command, "train": train_command,
            "translate": translate_command, "evaluate": evaluate_command}


def main(argv=None):
    from minitrans.training.checkpoint import CheckpointError
    from minitrans.training.trainer import TrainingError

    try:
        args = build_parser().parse_args(argv)
        with warnings.catch_warnings():
            # OpenBLAS can set this flag for a product of finite numbers
            # (README, "CPU and GPU: the backends"). A real invalid value
            # still stops training: the trainer refuses a non-finite loss.
            warnings.filterwarnings(
                "ignore", message="invalid value encountered in matmul", category=RuntimeWarning
            )
            return COMMANDS[args.command](args)
    except BrokenPipeError:  # output piped into `head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print("minitrans: interrupted", file=sys.stderr)
        return 130
    except _UsageError as error:
        print(error, file=sys.stderr)
        return 2
    except (ValueError, TypeError, RuntimeError, OSError, CheckpointError, TrainingError) as error:
        if os.environ.get("MINITRANS_DEBUG"):
            raise  # the whole traceback, for developers
        print(f"minitrans: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""What the commands of ``minitrans`` share, declared once: argument types
that refuse a bad value in the words of ``core.checks``, the help
formatter, the flags several commands take (--checkpoint, --seed,
--device), and how a training command shows progress and stops on Ctrl-C."""

import argparse
import sys

from minitrans.core import backend, checks
from minitrans.training.run_files import run_folder


def number(convert, most=None, **bounds):
    """An argparse type: ``convert(text)`` (int or float), refused outside
    ``bounds`` in the words of ``checks.check_int``/``check_number``, or
    above ``most`` ("expected at most 64"). Text that is not a number at
    all gets argparse's own "invalid int value: 'abc'", hence the name."""
    if convert is int:
        is_valid, describe = checks.is_int, checks.describe_int
    else:
        is_valid, describe = checks.is_number, checks.describe_number

    def parse(text):
        value = convert(text)
        if not is_valid(value, **bounds):
            raise argparse.ArgumentTypeError(f"expected {describe(**bounds)}, got {text}")
        if most is not None and value > most:
            raise argparse.ArgumentTypeError(f"expected at most {most}, got {text}")
        return value

    parse.__name__ = convert.__name__
    return parse


positive_int = number(int, low=1)
non_negative_int = number(int, low=0)
probability = number(float, low=0, high=1, high_open=True)
positive_number = number(float, low=0, low_open=True)
probability_above_zero = number(float, low=0, high=1, low_open=True)


class HelpFormatter(argparse.HelpFormatter):
    """--help as the commands write it: a description's paragraphs (split by
    blank lines) are wrapped to the terminal, but a paragraph of indented
    lines (examples) keeps its lines; the help of an option starts in a
    column wide enough for most flags, so it is not pushed onto a line of
    its own."""
    def __init__(self, prog):
        super().__init__(prog, max_help_position=32)

    def _fill_text(self, text, width, indent):
        fill = super()._fill_text
        return "\n\n".join(
            paragraph if paragraph.startswith(" ") else fill(paragraph, width, indent)
            for paragraph in text.split("\n\n")
        )

# Upper bounds of the train command's counts: far above any run of these
# models (ten million steps is weeks of training on one machine), so a
# value beyond them is a typo, refused at once rather than run for ever.
MAX_STEPS = 10**7
MAX_BATCH_SIZE = 2**16
step_count = number(int, low=1, most=MAX_STEPS)
batch_size = number(int, low=1, most=MAX_BATCH_SIZE)
# generate decodes a prompt's samples as one batch and prints a line each:
# the bound of a training batch, refused before the checkpoint is read
# (the machine's memory, which depends on the model, is checked after).
MAX_SAMPLES = MAX_BATCH_SIZE
sample_count = number(int, low=1, most=MAX_SAMPLES)


def size(limit):
    """A positive integer at most ``limit`` (a size of ModelConfig's LIMITS,
    the most workers)."""
    return number(int, low=1, most=limit)


def add_checkpoint(parser, kind="a trained"):
    """--checkpoint FILE, required: ``kind`` says which model the command
    takes ("an encoder-decoder", "a decoder-only", "a trained")."""
    parser.add_argument("--checkpoint", required=True, metavar="FILE",
                        help=f"{kind} checkpoint (required)")


def add_seed(parser, what):
    """--seed N (default 0); ``what`` says what it seeds ("of the draws")."""
    parser.add_argument("--seed", type=non_negative_int, default=0,
                        help=f"seed {what} (default 0)")


def add_device(parser):
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu",
                        help="cpu (NumPy) or gpu (CuPy) (default cpu)")


def use_device(args):
    """--device gpu runs the same code on CuPy."""
    backend.use("cupy" if args.device == "gpu" else "numpy")


def new_run_folder(args, name):
    """The folder of a new run of train: --out, refused if it holds an
    earlier run's checkpoint (unless --force) or a trainer works there;
    without --out the default folder runs/<name or --data's stem>, or the
    next free numbered one, said in the first line of output."""
    if args.out is not None:
        run_folder.check_new_run(args.out, args.force)
        return args.out
    default = run_folder.default_folder(name, args.data)
    run_folder.check_is_folder(default, named="the default folder")
    if args.force:
        run_folder.check_new_run(default, force=True)
        return default
    out = run_folder.free_folder(default)
    if out != default:
        print(f"{default} holds another run; this one writes into {out}")
    return out


INTERRUPTED = 130  # the exit status of a command stopped by Ctrl-C: 128 + SIGINT, as shells say


def progress_bar(args):
    """Whether a training command draws a progress bar: unless --no-progress,
    and only on a terminal (a bar floods a log file)."""
    return not args.no_progress and sys.stderr.isatty()


def interrupted(stop, what_next):
    """Say, on standard error, where a run stopped by Ctrl-C (``stop``, a
    ``TrainingInterrupted``) left its checkpoint, then ``what_next``; return
    the command's exit status."""
    print(f"interrupted at step {stop.step}; saved {stop.checkpoint}{what_next}",
          file=sys.stderr)
    return INTERRUPTED

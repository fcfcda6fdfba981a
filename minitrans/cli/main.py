"""The ``minitrans`` command line.

    minitrans train TASK [--data TRAIN.tsv [--valid VALID.tsv]] ...   (TASK: see train --help)
    minitrans translate --checkpoint FILE "text"     (or one sentence per stdin line)
    minitrans evaluate --checkpoint FILE --data TEST.tsv
    minitrans generate --checkpoint LM.npz "12+" [--temperature T --top-k K --top-p P]
    minitrans generate --pretrained FOLDER "prompt"   (a GPT-2 or Llama folder, Hub layout)
    minitrans train --init-from FOLDER --data corpus.txt   (fine-tune it on a text)
    minitrans attention --checkpoint FILE "text" --out attention.png
    minitrans gradcheck [--backend numpy|strict|cupy]
    minitrans doctor [--device cpu|gpu]                (this machine, for a bug report)
    minitrans --version

Every error in what the user typed or pointed to is reported as one line on
stderr with a non-zero exit status, never as a traceback.
"""

import argparse
import os
import sys
import warnings

import minitrans
from minitrans.cli import doctor, flags, generate, gradcheck, train, translate
from minitrans.training.run_files.checkpoint import CheckpointError
from minitrans.training.trainer import TrainingError

DESCRIPTION = """\
The Transformer of "Attention Is All You Need" in NumPy, every gradient by hand:
train it, translate with it, sample from it, look at its attention, check its gradients.
"minitrans COMMAND --help" shows a command's flags and their defaults."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line instead of usage + message
        raise _UsageError(f"{self.prog}: {message} (see --help)")


class _UsageError(Exception):
    pass


# One module per command, each adding its parser(s) with ``run`` as the
# function that carries the command out.
COMMAND_MODULES = (train, translate, generate, gradcheck, doctor)


def build_parser():
    parser = _Parser(prog="minitrans", description=DESCRIPTION,
                     formatter_class=flags.HelpFormatter)
    parser.add_argument("--version", action="version", version=f"minitrans {minitrans.__version__}",
                        help="print the version and exit")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for module in COMMAND_MODULES:
        module.add_parsers(commands)
    return parser


def main(argv=None):
    try:
        args = build_parser().parse_args(argv)
        with warnings.catch_warnings():
            # OpenBLAS can set this flag for a product of finite numbers
            # (README, "CPU and GPU: the backends"). A real invalid value
            # still stops training: the trainer refuses a non-finite loss.
            warnings.filterwarnings(
                "ignore", message="invalid value encountered in matmul", category=RuntimeWarning
            )
            return args.run(args)
    except BrokenPipeError:  # output piped into `head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print("minitrans: interrupted", file=sys.stderr)
        return flags.INTERRUPTED
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

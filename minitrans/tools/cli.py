"""The ``minitrans`` command line.

    minitrans train TASK [--data TRAIN.tsv [--valid VALID.tsv]] ...   (TASK: see train --help)
    minitrans translate --checkpoint FILE "text"     (or one sentence per stdin line)
    minitrans evaluate --checkpoint FILE --data TEST.tsv
    minitrans generate --checkpoint LM.npz "12+" [--temperature T --top-k K --top-p P]
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
from minitrans.core import backend
from minitrans.tools import (arguments, doctor, explore_commands, model_commands,
                             train_command)

DESCRIPTION = """\
The Transformer of "Attention Is All You Need" in NumPy, every gradient by hand:
train it, translate with it, sample from it, look at its attention, check its gradients.
"minitrans COMMAND --help" shows a command's flags and their defaults."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line instead of usage + message
        raise _UsageError(f"{self.prog}: {message} (see --help)")


class _UsageError(Exception):
    pass


def build_parser():
    parser = _Parser(prog="minitrans", description=DESCRIPTION,
                     formatter_class=arguments.HelpFormatter)
    parser.add_argument("--version", action="version", version=f"minitrans {minitrans.__version__}",
                        help="print the version and exit")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    train_command.add_parser(commands)
    model_commands.add_translate_parser(commands)
    model_commands.add_evaluate_parser(commands)
    explore_commands.add_generate_parser(commands)
    explore_commands.add_attention_parser(commands)
    check = commands.add_parser(
        "gradcheck",
        help="check every layer's backward against central differences (float64)",
        description="Gradient-check every layer in float64 and print a table; "
        "exits with status 1 if any tensor's relative error is 1e-6 or more.",
        formatter_class=arguments.HelpFormatter,
    )
    check.add_argument(
        "--backend",
        choices=backend.BACKENDS,
        default=None,
        help="array backend (default: MINITRANS_BACKEND or numpy)",
    )
    check.add_argument(
        "--seed",
        type=arguments.non_negative_int,
        default=0,
        help="seed of the inputs and weights (default 0)",
    )
    doctor.add_parser(commands)
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


COMMANDS = {
    "gradcheck": gradcheck_command,
    "train": train_command.run,
    "translate": model_commands.translate,
    "evaluate": model_commands.evaluate,
    "generate": explore_commands.generate,
    "attention": explore_commands.attention,
    "doctor": doctor.run,
}


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

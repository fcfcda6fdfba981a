"""The ``minitrans`` command line.

    minitrans gradcheck [--backend numpy|strict|cupy] [--seed N]

Every error is reported as one line on stderr with a non-zero exit status,
never as a traceback.
"""

import argparse
import os
import sys

from minitrans import backend
from minitrans.gradcheck import format_table
from minitrans.gradcheck_report import run_report


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line instead of usage + message
        raise _UsageError(f"{self.prog}: {message} (see --help)")


class _UsageError(Exception):
    pass


def build_parser():
    parser = _Parser(prog="minitrans", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    check = commands.add_parser(
        "gradcheck",
        help="check every layer's backward against central differences (float64)",
        description="Gradient-check every layer in float64 and print a table; "
        "exits with status 1 if any tensor's relative error is 1e-6 or more.",
    )
    check.add_argument("--backend", choices=backend.BACKENDS, default=None,
                       help="array backend (default: MINITRANS_BACKEND or numpy)")
    check.add_argument("--seed", type=int, default=0, help="seed of inputs and weights (default 0)")
    return parser


def gradcheck_command(args):
    name = args.backend or backend.backend_name()
    results = run_report(name, seed=args.seed)
    print(f"Gradient check, backend {name}, float64, relative error must be below 1e-6\n")
    print(format_table(results))
    failures = [r for r in results if not r.passed]
    layers = len({r.layer for r in results})
    if failures:
        print(f"\n{len(failures)} of {len(results)} tensors FAILED")
        return 1
    print(f"\nall {len(results)} tensors of {layers} layer checks passed")
    return 0


def main(argv=None):
    try:
        args = build_parser().parse_args(argv)
        return gradcheck_command(args)
    except BrokenPipeError:  # output piped into `head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except _UsageError as error:
        print(error, file=sys.stderr)
        return 2
    except (ValueError, TypeError, RuntimeError, OSError) as error:
        print(f"minitrans: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""``minitrans gradcheck``: every layer's backward, and the whole model's,
against central differences in float64 (``minitrans.gradcheck``)."""

import sys
import time

from minitrans import gradcheck
from minitrans.cli import flags
from minitrans.core import backend


def add_parsers(commands):
    check = commands.add_parser(
        "gradcheck",
        help="check every layer's backward against central differences (float64)",
        description="Gradient-check every layer in float64 and print a table; "
        f"exits with status 1 if any tensor's relative error is {gradcheck.TOLERANCE:g} or more.",
        formatter_class=flags.HelpFormatter,
    )
    check.add_argument(
        "--backend",
        choices=backend.BACKENDS,
        default=None,
        help="array backend (default: MINITRANS_BACKEND or numpy)",
    )
    flags.add_seed(check, "of the inputs and weights")
    check.set_defaults(run=run)


def run(args):
    name = args.backend or backend.backend_name()
    started = time.perf_counter()

    def say_progress(number, label, checks):
        """A line on stderr per layer check, as it ends: the table comes at
        the end, and a GPU takes minutes to get there."""
        verdict = "pass" if all(c.passed for c in checks) else "FAIL"
        worst = max((c.rel_error for c in checks), default=0.0)
        tensors = f"{len(checks)} tensor" + ("" if len(checks) == 1 else "s")
        print(f"layer check {number}: {label}: {tensors} {verdict}, "
              f"worst {worst:.1e}, {time.perf_counter() - started:.1f} s",
              file=sys.stderr, flush=True)

    results = gradcheck.run_report(name, seed=args.seed, on_layer_checked=say_progress)
    print(f"Gradient check, backend {name}, float64, "
          f"relative error must be below {gradcheck.TOLERANCE:g}\n")
    print(gradcheck.format_table(results))
    failures = [r for r in results if not r.passed]
    if failures:
        print(f"\n{len(failures)} of {len(results)} tensors FAILED")
        return 1
    print(f"\nall {len(results)} tensors of {len({r.layer for r in results})} layer checks passed")
    return 0

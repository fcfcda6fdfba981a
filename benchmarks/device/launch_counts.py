"""The kernel launches of a tiny training step and of one decoded token,
counted on the host with the strict backend, beside their budgets: a
command of the device check (``check.py``).

    python benchmarks/device/launch_counts.py

The step, the token and the budgets are tests/library/test_launches.py's
own (imported from it, not copied): the check reports the numbers that the
suite holds to its budgets. Prints one line ``RESULT {json}`` at the end.
"""

import importlib.util
import json
import os
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULT_PREFIX = "RESULT "
TOP_KINDS = 8  # of each count, the kinds of launch shown, most frequent first


def launch_tests():
    """tests/library/test_launches.py as a module."""
    path = os.path.join(REPO, "tests", "library", "test_launches.py")
    spec = importlib.util.spec_from_file_location("test_launches", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def counted_launches():
    """{"step", "token", their budgets and unfused counts, and the most
    frequent kinds of each}: one tiny training step and one decoded token."""
    import minitrans

    tests = launch_tests()
    with minitrans.using("strict", dtype="float32"), tempfile.TemporaryDirectory() as folder:
        step, model = tests.tiny_step_launches(folder)
        per_token, decoding, _ = tests.token_launches(model)
    return {"step": step.count, "token": per_token,
            "step_budget": tests.STEP_BUDGET, "token_budget": tests.TOKEN_BUDGET,
            "unfused_step": tests.UNFUSED_STEP, "unfused_token": tests.UNFUSED_TOKEN,
            "step_kinds": step.summary().splitlines()[:TOP_KINDS],
            "decoding_kinds": decoding.summary().splitlines()[:TOP_KINDS]}


def main():
    print(RESULT_PREFIX + json.dumps(counted_launches()))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, REPO)  # minitrans from this checkout, installed or not
    sys.exit(main())

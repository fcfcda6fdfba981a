"""The machinery every exercise checker shares: a ``Case`` (the arguments
handed to the learner's function and the answer expected), the comparison of
an answer with it, and the verdict, an ``ExerciseResult``.

A checker is one call, ``run_checker(name, fn, make_cases, hint, quiet,
seed, outputs=..., precision=...)``: ``make_cases(rng)`` draws the cases from
a seed that the verdict prints, the learner's function is called on a copy of
each case's arguments, and the first case that fails is named with its sizes,
what went wrong (for a function that returns several results, which of them,
by the names in ``outputs``) and a hint. Floating-point answers are compared
by relative error; integer, boolean and non-array answers (token ids, masks,
lists of symbols) must be equal. An answer that misses the tolerance by less
than ten times is called a precision matter, with ``precision``: where such
answers usually lose their digits. ``exercise_verdict`` shows the verdict,
its hint folded away in a notebook.
"""

import dataclasses

import numpy as np

from minitrans.core import checks
from minitrans.gradcheck import relative_error
from minitrans_course.exercise_verdict import show

FLOAT64_TOLERANCE = 1e-7
FLOAT32_TOLERANCE = 1e-4  # float32 keeps about 7 digits; errors add up over a row
CLOSE = 10  # an error under CLOSE times the tolerance is a matter of precision, not of maths
PRECISION = ("precision is usually lost in a float32 step: an intermediate array made float32 "
             "(np.arange(..., dtype=np.float32), a float32 input's dtype reused) or a long sum "
             "accumulated in float32; compute in float64 and cast the result at the end")


@dataclasses.dataclass
class Case:
    """One try of an exercise: its name, the sizes (for the verdict), the
    arguments for the learner's function and the expected answer: an array,
    a tuple of arrays for a backward, or any value compared with ``==``."""

    name: str
    sizes: str
    args: tuple
    expected: object
    tolerance: float = FLOAT64_TOLERANCE

    def label(self):
        return f"case '{self.name}' ({self.sizes})"


@dataclasses.dataclass
class ExerciseResult:
    """The verdict: ``rel_error`` is the worst over the cases when all pass,
    else the failing case's; ``case`` names that case ('' when all pass)."""

    name: str
    passed: bool
    rel_error: float
    message: str
    case: str = ""
    seed: int = 0
    hint: str = ""

    def __bool__(self):
        return self.passed

    def __repr__(self):  # one line, so that a notebook cell can end with the call
        verdict = "correct" if self.passed else f"not yet ({self.case})"
        return f"<{self.name}: {verdict}, relative error {self.rel_error:.1e}>"


def normal(rng, shape, dtype=np.float64, scale=1.0):
    """Standard normal numbers of the given shape, times scale, as dtype."""
    return (rng.standard_normal(shape) * scale).astype(dtype)


def make_case(name, sizes, args, reference, dtype=np.float64):
    """A case whose expected answer is reference(*args), with the tolerance
    of dtype (float32 inputs may be answered in float32)."""
    tolerance = FLOAT32_TOLERANCE if dtype == np.float32 else FLOAT64_TOLERANCE
    sizes = f"{sizes}, {np.dtype(dtype).name}"
    return Case(name, sizes, args, reference(*args), tolerance)


def _is_exact(expected):
    """Token ids, masks and symbols are right or wrong: no tolerance."""
    if isinstance(expected, np.ndarray):
        return expected.dtype.kind in "biu"
    return not isinstance(expected, (float, np.floating))


def _compare_one(want, have, tolerance, precision):
    """(relative error, problem or '') of one answer against the expected one."""
    if have is None:
        return float("inf"), "it is None"
    if not isinstance(want, np.ndarray) and _is_exact(want):
        if isinstance(have, np.generic):  # NumPy rounds the int to float32 to compare
            have = have.item()  # np.float32(124480848) == 124480849 would be True
        return (0.0, "") if have == want else (float("inf"), f"expected {want!r}, got {have!r}")
    have, problem = _as_array(have, np.shape(want))
    if problem:
        return float("inf"), problem
    if _is_exact(want):
        wrong = int(np.sum(have != want))
        return (0.0, "") if wrong == 0 else (float("inf"), f"{wrong} entries differ")
    have = have.astype(np.float64)
    if not np.all(np.isfinite(have)):
        return float("inf"), "the result has NaN or inf"
    error = relative_error(have, np.asarray(want, dtype=np.float64))
    if error >= CLOSE * tolerance:
        return error, f"relative error {error:.1e} (allowed {tolerance:.0e})"
    if error >= tolerance:  # the formula is right; digits were lost on the way
        return error, (f"relative error {error:.1e} (allowed {tolerance:.0e}): close, a matter "
                       f"of precision, not of the formula: {precision}")
    return error, ""


def _as_array(have, shape):
    """(the answer as an array, problem or ''): a list of numbers is read as
    the array it spells, a ragged list is named as such, and a shape that
    differs from ``shape`` is a problem."""
    from_list = isinstance(have, list)
    try:
        have = np.asarray(have)
    except ValueError:  # NumPy refuses a ragged list
        have = np.asarray(have, dtype=object)
    if from_list and have.dtype == object:
        return have, ("your function returned a list that is no array: return a NumPy array "
                      "(np.array(...), or np.stack(...) for a list of arrays)")
    if have.shape != shape:
        return have, (f"expected shape {shape}, got {have.shape}"
                      + (" (your function returned a list: return a NumPy array)"
                         if from_list else ""))
    return have, ""


def compare_answer(case, got, outputs=None, precision=PRECISION):
    """(worst relative error, problem or '') of the learner's answer for one
    case. A function that returns several results (a backward's gradients)
    has each compared, and the problem names those that are wrong, by the
    names in ``outputs`` (else by their places)."""
    if got is None:
        return float("inf"), "your function returned None: did you forget `return`?"
    expected = case.expected if isinstance(case.expected, tuple) else (case.expected,)
    if isinstance(got, list) and len(expected) > 1:
        got = tuple(got)  # [dx, dW, db] for (dx, dW, db): the same answer
    got = got if isinstance(got, tuple) else (got,)
    if len(got) != len(expected):
        return float("inf"), f"expected {len(expected)} results, got {len(got)}"
    compared = [_compare_one(want, have, case.tolerance, precision)
                for want, have in zip(expected, got)]
    problems = [(n, problem) for n, (_, problem) in enumerate(compared) if problem]
    worst = max(error for error, _ in compared)
    if not problems:
        return worst, ""
    if len(expected) == 1:
        return worst, problems[0][1]
    names = outputs or [f"result {n + 1} of {len(expected)}" for n in range(len(expected))]
    wrong = "; ".join(f"{names[n]} is wrong: {problem}" for n, problem in problems)
    right = [names[n] for n, (_, problem) in enumerate(compared) if not problem]
    return worst, wrong + (f" ({' and '.join(right)}: right)" if right else "")


def _copied(value):
    """A fresh copy of an argument, so that a function that writes into its
    input cannot change the next case or the expected answer."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, list):
        return [_copied(v) for v in value]
    if isinstance(value, dict):
        return {key: _copied(v) for key, v in value.items()}
    return value


def run_checker(name, fn, make_cases, hint, quiet=False, seed=None, *, outputs=None,
                precision=PRECISION):
    """Run fn on every case of make_cases(rng); stop at the first that fails.
    ``outputs``: the names of the results, for a function that returns
    several; ``precision``: where a nearly right answer usually loses digits."""
    if seed is None:
        seed = int(np.random.default_rng().integers(2**31))
    checks.check_int("seed", seed, low=0)
    worst = 0.0
    all_cases = make_cases(np.random.default_rng(seed))
    for case in all_cases:
        args = tuple(_copied(a) for a in case.args)
        try:
            with np.errstate(all="ignore"):  # a NaN or inf in the result is the verdict
                error, problem = compare_answer(case, fn(*args), outputs, precision)
        except Exception as exc:  # the learner's code: report, never crash the lesson
            error, problem = float("inf"), f"raised {type(exc).__name__}: {exc}"
        if problem:
            message = (f"not yet: {case.label()}: {problem}; seed {seed} (seed={seed} draws "
                       f"the same cases again). Hint: {hint}")
            result = ExerciseResult(name, False, error, message, case.label(), seed, hint)
            return _report(result, quiet)
        worst = max(worst, error)
    message = f"correct on all {len(all_cases)} cases (seed {seed})"
    return _report(ExerciseResult(name, True, worst, message, "", seed), quiet)


def _report(result, quiet):
    if not quiet:
        show(result)
    return result

"""``minitrans doctor``: the report of this machine to paste into a bug
report, and the first command to run on a GPU.

    minitrans doctor                the report; exits 1 if NumPy cannot run minitrans
    minitrans doctor --device gpu   the report; exits 1, with one line saying why and
                                    what to install, unless CuPy runs minitrans right

The report ends with a smoke test of each backend that loads: a matrix
product compared with NumPy's on the host, and a float64 gradient check of
a LayerNorm, because a GPU that is found is not yet a GPU that computes.
The facts come from ``environment`` and ``gpu_environment``, the one-line
verdict on the GPU from ``gpu_advice``.
"""

import math
from dataclasses import dataclass, field

from minitrans.cli import environment, flags, gpu_advice, gpu_environment
from minitrans.core import backend
from minitrans.gradcheck import check_layer, randomise_params, relative_error
from minitrans.layers.layernorm import LayerNorm

SMOKE_BACKENDS = ("numpy", "strict", "cupy")
PRODUCT_TOLERANCE = 1e-10  # a right float64 product agrees with NumPy's to about 1e-15


class DoctorError(RuntimeError):
    """The device asked for cannot run minitrans here; the message says why."""


def add_parsers(commands):
    doctor = commands.add_parser(
        "doctor",
        help="report this machine (for a bug report) and check that each backend computes",
        description="Print the versions, libraries, devices and settings minitrans runs "
        "with, then a smoke test of each backend (a matrix product against NumPy's, a "
        "LayerNorm gradient check in float64). Exits with status 1 when the --device "
        "asked for cannot run minitrans, with one line saying why and what to install.",
        formatter_class=flags.HelpFormatter,
    )
    flags.add_device(doctor)
    doctor.set_defaults(run=run)


# ---------------------------------------------------------------- smoke tests


@dataclass
class SmokeTest:
    """The outcome of one backend's smoke test."""
    backend: str
    checks: list = field(default_factory=list)  # (what, passed, detail)
    problem: str = None  # why the checks could not run at all
    unavailable: bool = False  # the backend cannot load here (rather than failing)

    @property
    def passed(self):
        return self.problem is None and all(passed for _, passed, _ in self.checks)

    def failure(self):
        """What failed, in one line, or None."""
        if self.problem is not None:
            return self.problem
        failed = [f"{what}: {detail}" for what, passed, detail in self.checks if not passed]
        return "; ".join(failed) or None


def device_product(a, b):
    """``a @ b`` computed on the current backend and copied back to the host."""
    return backend.to_numpy(backend.to_device(a) @ backend.to_device(b))


def smoke_test(name):
    """SmokeTest of backend ``name``: a product and a gradient check, in float64."""
    result = SmokeTest(name)
    try:
        with backend.using(name, dtype="float64"):
            result.checks = [_run_check("product", _check_product),
                             _run_check("LayerNorm gradients", _check_gradients)]
    except backend.BackendUnavailableError as error:
        result.problem, result.unavailable = environment.one_line(error), True
    except Exception as error:  # a bad MINITRANS_* variable: the backend cannot start
        result.problem = environment.one_line(error)
    return result


def _run_check(what, check):
    try:
        passed, detail = check()
    except Exception as error:  # a backend that raises has failed its check
        return what, False, f"raised {type(error).__name__}: {environment.one_line(error)}"
    return what, passed, detail


def _check_product():
    rng = backend.host_rng(0)
    a, b = rng.standard_normal((16, 24)), rng.standard_normal((24, 8))
    error = relative_error(device_product(a, b), a @ b)  # against NumPy, on the host
    return error < PRODUCT_TOLERANCE, (f"rel. error {error:.1e} "
                                       f"(must be below {_short(PRODUCT_TOLERANCE)})")


def _check_gradients():
    rng = backend.host_rng(1)
    layer = randomise_params(LayerNorm(8), rng)
    x = backend.from_host(rng.standard_normal((2, 3, 8)))
    results = check_layer(layer, x)
    worst = max(results, key=lambda result: result.rel_error)
    passed = all(result.passed for result in results)
    return passed, (f"max rel. error {worst.rel_error:.1e} in {worst.tensor} "
                    f"(must be below {_short(worst.tolerance)})")


def _short(tolerance):
    """1e-06 -> "1e-6", as the tolerances are written everywhere else."""
    return f"1e{round(math.log10(tolerance))}"


def smoke_facts(smoke_tests):
    """(key, value) pairs of the report's smoke-test section."""
    facts = []
    for test in smoke_tests:
        if test.problem is not None:
            outcome = "unavailable" if test.unavailable else "FAILED"
            facts.append((test.backend, f"{outcome}: {test.problem}"))
        for what, passed, detail in test.checks:
            facts.append((f"{test.backend} {what}", f"{'ok' if passed else 'FAILED'}, {detail}"))
    return facts


# ------------------------------------------------------------ report, verdict


def section(title, gather, *args):
    """(title, facts); a section whose gathering fails shows why instead."""
    facts = environment.fact(gather, *args)
    return title, [("unavailable", facts)] if isinstance(facts, str) else facts


def format_report(sections):
    """The sections as titled blocks of aligned "key: value" lines."""
    blocks = []
    for title, facts in sections:
        width = max((len(key) for key, _ in facts), default=0) + 1
        lines = [f"  {key + ':':<{width}} {value}" for key, value in facts]
        blocks.append("\n".join([title] + lines))
    return "\n\n".join(blocks)


def verdict(device, cupy, smi, smoke_tests):
    """Why ``device`` cannot run minitrans here (one line), or None when it can."""
    tests = {test.backend: test for test in smoke_tests}
    if device == "cpu":
        failure = tests["numpy"].failure()
        return None if failure is None else f"the smoke test on numpy FAILED ({failure})"
    failure = tests["cupy"].failure()
    if failure is None:
        return None
    return (gpu_advice.why_the_gpu_fails(cupy, smi, failure)
            or f"the smoke test on cupy FAILED ({failure})")


def run(args):
    """``minitrans doctor``: print the report; DoctorError if --device fails."""
    cupy, smi = gpu_environment.inspect_cupy(), gpu_environment.run_nvidia_smi()
    smoke_tests = [smoke_test(name) for name in SMOKE_BACKENDS]
    print("minitrans doctor: this machine as minitrans sees it (paste all of it into a "
          "bug report)\n")
    print(format_report([
        section("system", environment.system_facts),
        section("NumPy and BLAS", environment.numpy_facts),
        section("environment variables", environment.variable_facts),
        section("CuPy and CUDA", gpu_environment.cupy_report, cupy, smi),
        section("PyTorch", environment.torch_facts),
        section("minitrans settings (for a new process)", environment.settings_facts),
        section("smoke tests (float64)", smoke_facts, smoke_tests),
    ]))
    problem = verdict(args.device, cupy, smi, smoke_tests)
    if problem is not None:
        raise DoctorError(problem)
    return 0

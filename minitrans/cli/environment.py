"""What ``minitrans doctor`` reports about the host: Python, the CPU, NumPy
and its BLAS, the environment variables that change how minitrans runs,
PyTorch, and the backend, dtype and kernel set minitrans would choose.

Each fact is gathered on its own (``fact``): one that cannot be found is
shown as "unavailable: <reason>" and the rest of the report still appears,
because the report is most needed on a machine where something is broken.
"""

import importlib.metadata
import os
import platform
import sys

import threadpoolctl

import minitrans
from minitrans.core import backend, checks, kernels
from minitrans.core.threads import usable_cores

UNSET = "(not set)"
# The variables that size the BLAS and OpenMP thread pools, and the one that
# overrides OpenBLAS's choice of kernel (a wrong guess in a VM is slow or fails).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                    "OPENBLAS_CORETYPE")
MINITRANS_VARIABLES = ("MINITRANS_BACKEND", "MINITRANS_DTYPE", "MINITRANS_KERNELS",
                       "MINITRANS_DEBUG")


def one_line(error):
    """An exception (or text) as one line. CuPy's import errors span many
    lines, between rules of '=', around an "Original error:" line: the line
    after it is kept. Other short texts are joined; a long one keeps its
    first line."""
    text = str(error) or type(error).__name__
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and set(line.strip()) != {"="}]
    if "Original error:" in lines[:-1]:
        return lines[lines.index("Original error:") + 1]
    return " ".join(lines) if len(lines) <= 3 else lines[0]


def fact(gather, *args):
    """``gather(*args)``, or "unavailable: <reason>" if it raises: one
    missing fact must not hide the others (nor end in a traceback)."""
    try:
        return gather(*args)
    except Exception as error:  # any failure of a probe is itself the fact to report
        return f"unavailable: {one_line(error)}"


def installed_version(distribution):
    """The version of an installed distribution, or "not installed"; from
    its metadata, without importing it (importing torch takes seconds)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def variable(name):
    """An environment variable's value as the report shows it."""
    value = os.environ.get(name)
    return UNSET if value is None else repr(value)


# ------------------------------------------------------------------- sections


def system_facts():
    """(key, value) pairs: minitrans, Python, the platform, the CPU and its cores."""
    return [
        ("minitrans", minitrans.__version__),
        ("python", f"{platform.python_version()} ({platform.python_implementation()}) "
                   f"at {sys.executable}"),
        ("platform", fact(platform.platform)),
        ("cpu", fact(cpu_model)),
        ("cores", fact(_cores)),
    ]


def cpu_model():
    """The "model name" of /proc/cpuinfo (Linux on x86), else what
    ``platform.processor()`` says, else "unknown"."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:  # not Linux
        pass
    return platform.processor() or "unknown"


def _cores():
    return f"{os.cpu_count()} ({usable_cores()} usable by this process)"


def numpy_facts():
    """(key, value) pairs: NumPy's version and each BLAS or OpenMP library it
    loaded, with its kernel architecture and thread count."""
    facts = [("numpy", installed_version("numpy"))]
    pools = fact(threadpoolctl.threadpool_info)
    if isinstance(pools, str):  # the probe failed: its reason is the fact
        return facts + [("blas", pools)]
    for pool in pools:
        facts.append((pool.get("user_api", "library"), _describe_pool(pool)))
    if not pools:
        facts.append(("blas", "none found by threadpoolctl"))
    return facts


def _describe_pool(pool):
    details = [pool.get("architecture"), pool.get("threading_layer") and
               f"{pool['threading_layer']} threading", f"{pool.get('num_threads')} threads"]
    described = ", ".join(detail for detail in details if detail)
    return (f"{pool.get('internal_api')} {pool.get('version')} ({described}) "
            f"{pool.get('filepath')}")


def variable_facts():
    """(name, value) of the thread variables and every MINITRANS_* variable."""
    names = list(THREAD_VARIABLES) + list(MINITRANS_VARIABLES)
    names += sorted(name for name in os.environ
                    if name.startswith("MINITRANS_") and name not in names)
    return [(name, variable(name)) for name in names]


def torch_facts():
    """PyTorch's version, read from its metadata: importing it takes seconds."""
    return [("torch", installed_version("torch"))]


def settings_facts():
    """The backend, dtype and kernel set a new minitrans process would use,
    each from its environment variable or the default; a bad value is shown
    in the words minitrans would refuse it with."""
    return [
        ("backend", _setting("MINITRANS_BACKEND", "numpy", backend.BACKENDS)),
        ("dtype", _setting("MINITRANS_DTYPE", "float32", backend.DTYPES)),
        ("kernels", _setting("MINITRANS_KERNELS", "fast", kernels.KERNEL_SETS)),
    ]


def _setting(name, default, choices):
    given = os.environ.get(name)
    value = given or default  # an empty variable means the default, as in minitrans itself
    try:
        checks.check_choice(name, value, choices)
    except ValueError as error:
        return f"invalid: {error}"
    return f"{value} (from {name})" if given else f"{value} (the default)"

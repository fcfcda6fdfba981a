"""What ``minitrans doctor`` finds out about CUDA: the CuPy package, the
driver, the devices, and, when the GPU cannot work, why and what to install.

CuPy is built once per CUDA major version, and minitrans has an extra for
each: ``minitrans[gpu-cuda12]`` installs ``cupy-cuda12x`` and
``minitrans[gpu-cuda13]`` installs ``cupy-cuda13x`` (``minitrans[gpu]`` is
the CUDA 12 one under its first name). A driver runs every CUDA up to the
one ``nvidia-smi`` prints as "CUDA Version", so that line chooses the extra.
The other way round, CUDA 13 no longer supports GPUs of compute capability
below 7.5 (Maxwell, Pascal, Volta): they need the CUDA 12 extra whatever
the driver.
"""

import importlib
import importlib.metadata
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass, field

from minitrans.cli.environment import fact, one_line, variable

NVIDIA_SMI_TIMEOUT_S = 5  # nvidia-smi can hang on a broken driver: never wait longer
# Its table is a few KB; one that prints without end (a broken or fake one)
# is read no further than this, and its error quoted no longer than a line.
NVIDIA_SMI_MAX_BYTES = 64 * 2**10
PROBLEM_CHARS = 120
OLDEST_FOR_CUDA13 = (7, 5)  # the lowest compute capability CUDA 13 builds for
GIB = 2**30


@dataclass
class CupyFacts:
    """What CuPy says about itself and the GPU; None where it could not say,
    and why in ``errors`` (fact name -> one line)."""
    packages: list = field(default_factory=list)  # the distributions providing `cupy`
    version: str = None
    import_error: str = None
    runtime: int = None  # CuPy's CUDA runtime, 1000 * major + 10 * minor
    driver: int = None  # the newest CUDA the driver runs, same encoding; 0: no driver
    device_count: int = None
    devices: list = field(default_factory=list)  # (name, bytes, (major, minor)) or a reason
    errors: dict = field(default_factory=dict)  # "runtime", "driver", "device_count"

    @property
    def package(self):
        """The distribution the imported ``cupy`` comes from (the first on sys.path)."""
        return self.packages[0] if self.packages else "cupy"

    @property
    def cuda_major(self):
        """The CUDA major version CuPy was built for: from the package's name
        (cupy-cuda13x), else from its runtime."""
        match = re.fullmatch(r"cupy-cuda(\d+)x", self.package)
        if match:
            return int(match.group(1))
        return self.runtime // 1000 if self.runtime else None


@dataclass
class NvidiaSmi:
    """The driver's own report: versions as printed ("12.4"), or the problem."""
    driver: str = None
    cuda: str = None
    problem: str = None  # "not found on PATH", "no answer within 5 s", its error


def cuda_text(version):
    """12040 -> "12.4", the encoding of CUDA's version calls."""
    return f"{version // 1000}.{version % 1000 // 10}"


def extra_for(cuda_major):
    """The minitrans extra whose CuPy runs on a driver for ``cuda_major``, or None."""
    if cuda_major is None or cuda_major < 12:
        return None
    return "gpu-cuda13" if cuda_major >= 13 else "gpu-cuda12"


def cupy_packages():
    """The installed distributions that provide the module ``cupy``, in sys.path order."""
    return list(dict.fromkeys(importlib.metadata.packages_distributions().get("cupy", [])))


def inspect_cupy():
    """CupyFacts of the CuPy installed here; never raises."""
    packages = fact(cupy_packages)
    facts = CupyFacts(packages=packages if isinstance(packages, list) else [])
    try:
        # By name, inside a function: the doctor inspects CuPy even where the
        # backend refuses it, and layer modules take CuPy only from the backend.
        cupy = importlib.import_module("cupy")
    except Exception as error:  # ImportError, or CUDA libraries CuPy could not load
        facts.import_error = one_line(error)
        return facts
    facts.version = getattr(cupy, "__version__", "unknown")
    for name, call in [("runtime", "runtimeGetVersion"), ("driver", "driverGetVersion"),
                       ("device_count", "getDeviceCount")]:
        try:
            setattr(facts, name, getattr(cupy.cuda.runtime, call)())
        except Exception as error:  # CUDA raises its own error types
            facts.errors[name] = one_line(error)
    for index in range(facts.device_count or 0):
        facts.devices.append(fact(_device, cupy.cuda.runtime, index))
    return facts


def _device(runtime, index):
    properties = runtime.getDeviceProperties(index)
    name = properties["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    return name, properties["totalGlobalMem"], (properties["major"], properties["minor"])


def run_nvidia_smi():
    """NvidiaSmi from the header of ``nvidia-smi``'s table; never raises,
    never waits more than NVIDIA_SMI_TIMEOUT_S and never reads more than
    NVIDIA_SMI_MAX_BYTES."""
    path = shutil.which("nvidia-smi")
    if path is None:
        return NvidiaSmi(problem="not found on PATH")
    try:
        output = _output_within(path, NVIDIA_SMI_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return NvidiaSmi(problem=f"no answer within {NVIDIA_SMI_TIMEOUT_S} s")
    except OSError as error:
        return NvidiaSmi(problem=one_line(error))
    driver = re.search(r"Driver Version:\s*([\d.]+)", output)
    cuda = re.search(r"CUDA Version:\s*(\d+\.\d+)", output)
    if cuda is None:  # "NVIDIA-SMI has failed because it couldn't communicate with ..."
        said = one_line(output or "no output")
        if len(said) > PROBLEM_CHARS:
            said = said[:PROBLEM_CHARS - 3] + "..."
        return NvidiaSmi(problem=f"failed: {said}")
    return NvidiaSmi(driver=driver and driver.group(1), cuda=cuda.group(1))


def _output_within(path, timeout):
    """The first NVIDIA_SMI_MAX_BYTES bytes ``path`` prints, as text;
    TimeoutExpired when it neither ends nor prints that much within
    ``timeout`` seconds."""
    process = subprocess.Popen([path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL)
    read = []
    # A thread reads, so that the wait has a timeout on every system (select
    # waits on pipes on POSIX only); it ends at the limit or when the output does.
    reader = threading.Thread(
        target=lambda: read.append(process.stdout.read(NVIDIA_SMI_MAX_BYTES)), daemon=True)
    reader.start()
    reader.join(timeout)
    finished = not reader.is_alive()
    # Done or not, what it would print past the limit is not wanted. A hung
    # driver can leave nvidia-smi unkillable: wait a moment only.
    process.kill()
    try:
        process.wait(timeout=1)
    except subprocess.TimeoutExpired:
        pass
    if not finished:
        raise subprocess.TimeoutExpired([path], timeout)
    process.stdout.close()
    return read[0].decode("utf-8", errors="replace")


# -------------------------------------------------------------- the report


def cupy_report(cupy, smi):
    """(key, value) pairs of the report's CuPy section."""
    if cupy.import_error is not None:
        state = (f"{', '.join(cupy.packages)} installed, but not importable" if cupy.packages
                 else "not installed")
        facts = [("cupy", f"{state} ({cupy.import_error})")]
    else:
        facts = [("cupy", f"{cupy.package} {cupy.version}"),
                 ("cuda runtime", _value_or_error(cupy, "runtime", cuda_text)),
                 ("driver runs cuda", _driver_text(cupy)),
                 ("devices", _value_or_error(cupy, "device_count", str))]
        facts += [(f"device {i}", _describe_device(d)) for i, d in enumerate(cupy.devices)]
    if len(cupy.packages) > 1:
        facts.append(("warning", f"several CuPy packages ({', '.join(cupy.packages)}) "
                                 "overwrite each other's files: keep one"))
    smi_text = smi.problem or f"driver {smi.driver}, CUDA Version {smi.cuda}"
    return facts + [("nvidia-smi", smi_text),
                    ("CUDA_VISIBLE_DEVICES", variable("CUDA_VISIBLE_DEVICES")),
                    ("CUDA_PATH", variable("CUDA_PATH"))]


def _value_or_error(cupy, name, show):
    value = getattr(cupy, name)
    return show(value) if value is not None else f"unavailable: {cupy.errors.get(name)}"


def _driver_text(cupy):
    if cupy.driver is None:
        return _value_or_error(cupy, "driver", cuda_text)
    if cupy.driver == 0:
        return "none: no NVIDIA driver was found"
    if cupy.cuda_major and cupy.driver // 1000 < cupy.cuda_major:
        return f"{cuda_text(cupy.driver)}, older than CuPy's CUDA {cupy.cuda_major}"
    return cuda_text(cupy.driver)


def _describe_device(device):
    if isinstance(device, str):  # its properties could not be read: the reason
        return device
    name, memory, (major, minor) = device
    return f"{name}, {memory / GIB:.1f} GiB, compute capability {major}.{minor}"

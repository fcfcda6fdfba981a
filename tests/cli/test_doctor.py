"""``minitrans doctor``: the report, its smoke tests, and the one line that
says why a GPU cannot run minitrans and which extra to install.

The CuPy cases run against stand-ins written into tmp_path that behave as
the real cupy-cuda13x 14.2.0 wheel does on a machine without a GPU (no
driver: ``driverGetVersion()`` returns 0 and ``getDeviceCount()`` raises
``CUDARuntimeError("cudaErrorInsufficientDriver: ...")``), or as it would
with no device or an older driver. Each runs in a subprocess with PATH
pointing at a folder of our own, so a real nvidia-smi cannot change the answer.
"""

import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from minitrans.layers.layernorm import LayerNorm
from minitrans.cli import doctor, environment, gpu_advice, gpu_environment
from minitrans.cli.main import main

SECTIONS = ["system", "NumPy and BLAS", "environment variables", "CuPy and CUDA", "PyTorch",
            "minitrans settings", "smoke tests (float64)"]
KEYS = ["minitrans:", "python:", "cpu:", "cores:", "numpy:", "OMP_NUM_THREADS:",
        "OPENBLAS_CORETYPE:", "MINITRANS_BACKEND:", "cupy:", "nvidia-smi:", "torch:",
        "backend:", "dtype:", "kernels:"]
posix_only = pytest.mark.skipif(os.name != "posix", reason="the fake nvidia-smi is a sh script")


def assert_one_line_without_traceback(err):
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and err.startswith("minitrans: error: ")


def smoke_line(out, backend, check):
    return re.search(rf"^  {backend} {check}:\s+(\S+),", out, re.M).group(1)


# ------------------------------------------------------------ on this machine


def test_the_report_has_every_section_and_the_cpu_backends_pass(capsys):
    assert main(["doctor"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert all(f"\n{title}" in out for title in SECTIONS), out
    assert all(key in out for key in KEYS), out
    for backend in ("numpy", "strict"):
        assert smoke_line(out, backend, "product") == "ok"
        assert smoke_line(out, backend, "LayerNorm gradients") == "ok"


def test_the_command_runs_as_a_module_in_seconds():
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "minitrans", "doctor"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert all(f"\n{title}" in result.stdout for title in SECTIONS)
    assert time.perf_counter() - started < 60  # a few seconds; generous for a loaded machine


def test_a_fact_that_cannot_be_found_is_shown_not_raised(monkeypatch, capsys):
    def broken():
        raise OSError("no /proc here")

    monkeypatch.setattr(environment, "cpu_model", broken)
    monkeypatch.setattr(environment.threadpoolctl, "threadpool_info", broken)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"cpu:\s+unavailable: no /proc here", out)
    assert re.search(r"blas:\s+unavailable: no /proc here", out)


def test_a_bad_setting_is_reported_in_minitrans_own_words(monkeypatch):
    monkeypatch.setenv("MINITRANS_DTYPE", "float16")
    monkeypatch.setenv("MINITRANS_BACKEND", "strict")
    settings = dict(environment.settings_facts())
    assert settings["dtype"].startswith("invalid: MINITRANS_DTYPE: expected one of")
    assert settings["backend"] == "strict (from MINITRANS_BACKEND)"
    assert settings["kernels"] == "fast (the default)"


def test_a_bad_setting_fails_the_command_in_one_line():
    result = subprocess.run([sys.executable, "-m", "minitrans", "doctor"], capture_output=True,
                            text=True, timeout=120, env=dict(os.environ, MINITRANS_DTYPE="f16"))
    assert result.returncode == 1
    assert_one_line_without_traceback(result.stderr)
    assert "smoke test on numpy FAILED (MINITRANS_DTYPE: expected one of" in result.stderr
    assert re.search(r"dtype:\s+invalid: MINITRANS_DTYPE", result.stdout)


def test_cupys_many_line_import_error_becomes_its_original_error():
    message = "\n".join(["=" * 40, "Failed to import CuPy.", "", "Original error:",
                         "  ImportError: libcuda.so.1: cannot open shared object file", "=" * 40])
    assert environment.one_line(ImportError(message)) == (
        "ImportError: libcuda.so.1: cannot open shared object file")


# --------------------------------------------- the checks fail on wrong answers


def test_a_wrong_product_fails_the_smoke_test(monkeypatch, capsys):
    right = doctor.device_product
    monkeypatch.setattr(doctor, "device_product", lambda a, b: right(a, b) * (1 + 1e-6))
    assert main(["doctor"]) == 1
    out, err = capsys.readouterr()
    assert smoke_line(out, "numpy", "product") == "FAILED"
    assert smoke_line(out, "numpy", "LayerNorm gradients") == "ok"
    assert_one_line_without_traceback(err)
    assert "smoke test on numpy FAILED (product: rel. error 1.0e-06" in err


def test_a_wrong_backward_fails_the_gradient_check(monkeypatch):
    right = LayerNorm.backward
    monkeypatch.setattr(LayerNorm, "backward", lambda self, dy: right(self, dy) * 1.001)
    for backend in ("numpy", "strict"):
        test = doctor.smoke_test(backend)
        assert not test.passed
        assert [what for what, passed, _ in test.checks if not passed] == ["LayerNorm gradients"]


def test_a_backend_that_raises_fails_its_check_with_the_reason(monkeypatch):
    def raising(a, b):
        raise RuntimeError("cudaErrorNoKernelImageForDevice: no kernel image is available")

    monkeypatch.setattr(doctor, "device_product", raising)
    failure = doctor.smoke_test("numpy").failure()
    assert failure == ("product: raised RuntimeError: cudaErrorNoKernelImageForDevice: "
                       "no kernel image is available")


# ------------------------------------------------------- CuPy not installed


def fake_nvidia_smi(folder, cuda_version=None, script=None):
    """A folder holding an nvidia-smi that prints the header of the real one
    for ``cuda_version``, or runs ``script``; returns the folder."""
    folder.mkdir(exist_ok=True)
    header = "| NVIDIA-SMI 550.54.15      Driver Version: 550.54.15      CUDA Version: "
    rule = "+" + "-" * 89 + "+"
    # echo, a builtin of sh: the tests' PATH holds nothing but this folder
    body = script or f"echo '{rule}'\necho '{header}{cuda_version}     |'\necho '{rule}'"
    path = folder / "nvidia-smi"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return folder


@posix_only
@pytest.mark.parametrize("cuda_version, wanted, unwanted", [
    (None, ['"minitrans[gpu-cuda12]" or "minitrans[gpu-cuda13]"', '"CUDA Version"',
            "nvidia-smi here: not found on PATH"], []),
    ("12.4", ['"minitrans[gpu-cuda12]"', "CUDA 12.4"], ["gpu-cuda13"]),
    ("13.0", ['"minitrans[gpu-cuda13]"', "CUDA 13.0"], ["gpu-cuda12"]),
    ("11.8", ["update the NVIDIA driver", "11.8"], ["gpu-cuda13"]),
])
def test_without_cupy_the_gpu_check_names_the_extra_to_install(
        monkeypatch, capsys, tmp_path, cuda_version, wanted, unwanted):
    monkeypatch.setitem(sys.modules, "cupy", None)  # `import cupy` fails
    monkeypatch.setattr(gpu_environment, "cupy_packages", lambda: [])  # none installed
    folder = tmp_path / "bin"
    folder.mkdir()
    if cuda_version:
        fake_nvidia_smi(folder, cuda_version)
    monkeypatch.setenv("PATH", str(folder))
    assert main(["doctor", "--device", "gpu"]) == 1
    out, err = capsys.readouterr()
    assert_one_line_without_traceback(err)
    assert "CuPy is not installed" in err
    assert all(text in err for text in wanted), err
    assert not any(text in err for text in unwanted), err
    assert re.search(r"cupy:\s+not installed \(", out)
    assert main(["doctor"]) == 0  # the CPU needs no CuPy


@posix_only
def test_a_hung_or_failing_nvidia_smi_is_reported_not_waited_for(monkeypatch, tmp_path):
    monkeypatch.setattr(gpu_environment, "NVIDIA_SMI_TIMEOUT_S", 0.5)
    hangs = f"exec {shutil.which('sleep')} 30"
    monkeypatch.setenv("PATH", str(fake_nvidia_smi(tmp_path / "hangs", script=hangs)))
    started = time.perf_counter()
    assert gpu_environment.run_nvidia_smi().problem == "no answer within 0.5 s"
    assert time.perf_counter() - started < 5
    fails = "echo 'NVIDIA-SMI has failed because it could not communicate with the driver'; exit 9"
    monkeypatch.setenv("PATH", str(fake_nvidia_smi(tmp_path / "fails", script=fails)))
    assert gpu_environment.run_nvidia_smi().problem.startswith("failed: NVIDIA-SMI has failed")
    monkeypatch.setenv("PATH", str(fake_nvidia_smi(tmp_path / "works", "13.0")))
    smi = gpu_environment.run_nvidia_smi()
    assert (smi.driver, smi.cuda, smi.problem) == ("550.54.15", "13.0", None)


@posix_only
def test_an_nvidia_smi_that_prints_without_end_is_read_only_in_part(monkeypatch, tmp_path):
    """It was read whole for as long as the timeout let it print: the header
    is read and the rest is left, well before the timeout."""
    monkeypatch.setattr(gpu_environment, "NVIDIA_SMI_TIMEOUT_S", 4)
    header = "| NVIDIA-SMI 550.54.15      Driver Version: 550.54.15      CUDA Version: 13.0 |"
    floods = f"echo '{header}'\nwhile :; do echo '{'x' * 100}'; done"
    monkeypatch.setenv("PATH", str(fake_nvidia_smi(tmp_path / "floods", script=floods)))
    started = time.perf_counter()
    smi = gpu_environment.run_nvidia_smi()
    assert (smi.driver, smi.cuda, smi.problem) == ("550.54.15", "13.0", None)
    assert time.perf_counter() - started < 2
    junk = f"while :; do printf '{'y' * 100}'; done"  # one endless line and no header
    monkeypatch.setenv("PATH", str(fake_nvidia_smi(tmp_path / "junk", script=junk)))
    problem = gpu_environment.run_nvidia_smi().problem
    assert problem.startswith("failed: yyy") and len(problem) < 200, problem[:300]


# ------------------------------------------------- CuPy installed: stand-ins

NO_DEVICE, INSUFFICIENT_DRIVER = 100, 35
H100 = {"name": b"NVIDIA H100 80GB HBM3", "totalGlobalMem": 85_520_809_984, "major": 9,
        "minor": 0}
RUNTIME_MODULE = '''\
"""The stand-in's cupy.cuda.runtime: CuPy's calls, answering as configured."""

MESSAGES = {
    35: "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime "
        "version",
    100: "cudaErrorNoDevice: no CUDA-capable device is detected",
}


class CUDARuntimeError(RuntimeError):
    def __init__(self, status):  # as CuPy's: built from the status, message from CUDA
        self.status = status
        super().__init__(MESSAGES[status])


def runtimeGetVersion():
    return RUNTIME


def driverGetVersion():
    return DRIVER  # 0 where no driver is installed, as CUDA documents


def getDeviceCount():
    if STATUS is not None:
        raise CUDARuntimeError(STATUS)
    return len(DEVICES)


def getDeviceProperties(index):
    getDeviceCount()
    return DEVICES[index]
'''
# A stand-in that computes: NumPy underneath, as the strict backend is.
COMPUTING_CUPY = """\
import numpy
from numpy import *
random, linalg, ndarray = numpy.random, numpy.linalg, numpy.ndarray


def fuse(kernel_name=None):  # cupy.fuse compiles a kernel; here the body runs as it is
    return lambda body: body
"""
# Its cupy.cublas: gemm and gemv as CuPy documents them (out = alpha op(a) op(b) + beta out)
COMPUTING_CUBLAS = """\
def _op(trans, a):
    return a if trans == "N" else a.T


def gemm(transa, transb, a, b, out=None, alpha=1.0, beta=0.0):
    out[...] = alpha * (_op(transa, a) @ _op(transb, b)) + beta * out
    return out


def gemv(transa, alpha, a, x, beta, y):
    y[...] = alpha * (_op(transa, a) @ x) + beta * y
"""


def stand_in_cupy(folder, package="cupy-cuda13x", runtime=13020, driver=0,
                  status=INSUFFICIENT_DRIVER, devices=(), computes=False):
    """Write a package `cupy` and its distribution's metadata into ``folder``."""
    (folder / "cupy" / "cuda").mkdir(parents=True)
    (folder / "cupy" / "__init__.py").write_text(
        (COMPUTING_CUPY if computes else "") + '__version__ = "14.2.0"\nfrom cupy import cuda\n')
    (folder / "cupy" / "cuda" / "__init__.py").write_text("from cupy.cuda import runtime\n")
    if computes:
        (folder / "cupy" / "cublas.py").write_text(COMPUTING_CUBLAS)
    (folder / "cupy" / "cuda" / "runtime.py").write_text(
        RUNTIME_MODULE + f"\nRUNTIME, DRIVER, STATUS = {runtime}, {driver}, {status}\n"
        f"DEVICES = {list(devices)!r}\n")
    info = folder / f"{package.replace('-', '_')}-14.2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 14.2.0\n")
    (info / "top_level.txt").write_text("cupy\n")
    return folder


def doctor_with(folder, *args, **variables):
    """``python -m minitrans doctor *args`` with ``folder`` first on
    PYTHONPATH, and PATH holding no nvidia-smi."""
    (folder / "bin").mkdir(exist_ok=True)
    python_path = [str(folder)] + [p for p in [os.environ.get("PYTHONPATH")] if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(python_path), PATH=str(folder / "bin"))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.update(variables)
    return subprocess.run([sys.executable, "-m", "minitrans", "doctor", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def test_cupy_without_a_driver_as_on_this_machine(tmp_path):
    # what the real cupy-cuda13x 14.2.0 wheel does here, on a machine without a GPU
    result = doctor_with(stand_in_cupy(tmp_path), "--device", "gpu")
    assert result.returncode == 1
    assert_one_line_without_traceback(result.stderr)
    # startswith: where a real CuPy is installed too, the line goes on to say so
    assert result.stderr.startswith(
        "minitrans: error: CuPy for CUDA 13 (cupy-cuda13x 14.2.0) is installed, but no "
        "NVIDIA driver was found (cudaErrorInsufficientDriver: CUDA driver version is "
        "insufficient for CUDA runtime version): run on a machine with an NVIDIA GPU and its "
        "driver, or use --device cpu")
    assert re.search(r"cupy:\s+cupy-cuda13x 14.2.0\n\s+cuda runtime:\s+13.2\n"
                     r"\s+driver runs cuda:\s+none", result.stdout), result.stdout
    assert doctor_with(tmp_path).returncode == 0  # the CPU runs all the same


@pytest.mark.parametrize("hidden, advice", [
    (None, "check that nvidia-smi lists a GPU"),
    ("", "CUDA_VISIBLE_DEVICES='' may hide the GPUs"),
])
def test_cupy_and_a_driver_but_no_device(tmp_path, hidden, advice):
    folder = stand_in_cupy(tmp_path, driver=13000, status=NO_DEVICE)
    variables = {} if hidden is None else {"CUDA_VISIBLE_DEVICES": hidden}
    result = doctor_with(folder, "--device", "gpu", **variables)
    assert result.returncode == 1
    assert_one_line_without_traceback(result.stderr)
    assert ("CuPy for CUDA 13 (cupy-cuda13x 14.2.0) and an NVIDIA driver (CUDA 13.0) are "
            "installed, but no CUDA device was found (cudaErrorNoDevice: no CUDA-capable "
            f"device is detected): {advice}, or use --device cpu") in result.stderr


@pytest.mark.parametrize("package, runtime, driver, expected", [
    ("cupy-cuda13x", 13020, 12040,
     "CuPy for CUDA 13 (cupy-cuda13x 14.2.0) is installed, but the NVIDIA driver runs CUDA "
     '12.4 at most: pip uninstall cupy-cuda13x, then pip install "minitrans[gpu-cuda12]" '
     "(or update the driver)"),
    ("cupy-cuda12x", 12090, 11080,
     "CuPy for CUDA 12 (cupy-cuda12x 14.2.0) is installed, but the NVIDIA driver runs CUDA "
     "11.8 at most: update the driver to one for CUDA 12 or newer"),
])
def test_a_driver_older_than_cupys_cuda(tmp_path, package, runtime, driver, expected):
    folder = stand_in_cupy(tmp_path, package, runtime, driver, status=INSUFFICIENT_DRIVER)
    result = doctor_with(folder, "--device", "gpu")
    assert result.returncode == 1
    assert result.stderr.startswith(f"minitrans: error: {expected}")
    assert f"older than CuPy's CUDA {package[9:11]}" in result.stdout


def test_a_gpu_that_computes_passes(tmp_path):
    folder = stand_in_cupy(tmp_path, driver=13000, status=None, devices=[H100], computes=True)
    result = doctor_with(folder, "--device", "gpu")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert re.search(r"device 0:\s+NVIDIA H100 80GB HBM3, 79.6 GiB, compute capability 9.0",
                     result.stdout)
    assert smoke_line(result.stdout, "cupy", "product") == "ok"
    assert smoke_line(result.stdout, "cupy", "LayerNorm gradients") == "ok"


# ------------------------------------------------------ the advice, directly


def test_cuda13_on_a_gpu_it_no_longer_supports_advises_the_cuda12_extra():
    pascal = ("Tesla P100-PCIE-16GB", 16 * 2**30, (6, 0))
    cupy = gpu_environment.CupyFacts(packages=["cupy-cuda13x"], version="14.2.0", runtime=13020,
                                     driver=13000, device_count=1, devices=[pascal])
    smi = gpu_environment.NvidiaSmi(driver="580.65.06", cuda="13.0")
    failure = "product: raised CUDARuntimeError: cudaErrorNoKernelImageForDevice"
    assert gpu_advice.why_the_gpu_fails(cupy, smi, failure) == (
        f"the smoke test on cupy FAILED ({failure}): CUDA 13 does not support the "
        "Tesla P100-PCIE-16GB (compute capability 6.0, below 7.5): pip uninstall cupy-cuda13x, "
        'then pip install "minitrans[gpu-cuda12]"')
    assert gpu_advice.why_the_gpu_fails(cupy, smi, None) is None  # it passed: nothing to say


def test_a_cupy_that_will_not_import_and_several_cupys_are_named():
    cupy = gpu_environment.CupyFacts(packages=["cupy-cuda12x", "cupy-cuda13x"],
                                     import_error="ImportError: libcudart.so.12: cannot open")
    smi = gpu_environment.NvidiaSmi(driver="550.54.15", cuda="12.4")
    advice = gpu_advice.why_the_gpu_fails(cupy, smi)
    assert advice.startswith(
        "CuPy (cupy-cuda12x, cupy-cuda13x) is installed but cannot be imported (ImportError: "
        "libcudart.so.12: cannot open): pip uninstall cupy-cuda12x cupy-cuda13x, then install "
        'again; the driver runs CUDA 12.4 (nvidia-smi), so: pip install "minitrans[gpu-cuda12]"')
    assert "overwrite each other" in advice


def test_a_driver_that_nvidia_smi_sees_but_cupy_cannot_load():
    error = "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime"
    cupy = gpu_environment.CupyFacts(packages=["cupy-cuda12x"], version="14.2.0", runtime=12090,
                                     driver=0, errors={"device_count": error})
    smi = gpu_environment.NvidiaSmi(driver="580.65.06", cuda="13.0")
    assert gpu_advice.why_the_gpu_fails(cupy, smi) == (
        "nvidia-smi finds an NVIDIA driver (CUDA 13.0), but CuPy for CUDA 12 (cupy-cuda12x "
        f"14.2.0) cannot load it ({error}): check that the driver's libcuda.so.1 is on the "
        "library path")


# ------------------------------------------------------------------ the flag


def test_a_bad_device_is_the_usual_one_line_usage_error(capsys):
    assert main(["doctor", "--device", "tpu"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert "argument --device: invalid choice: 'tpu'" in err and "Traceback" not in err

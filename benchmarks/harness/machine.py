"""The machine a measurement ran on: the CPU model, the BLAS library and
kernels of NumPy and of PyTorch, the environment variables that choose them
and the thread counts, for the "Machine:" line of every results file
(``summary``) and vs_pytorch.py's first line (``machine``). A forced kernel
changes the numbers a lot: OPENBLAS_CORETYPE=Haswell on an AVX-512 machine
measured NumPy's peak at 223 instead of 408 GFLOP/s."""

import importlib.util
import os
import platform
import re
import time

import numpy as np

from minitrans.training.optimisation.worker_processes import processes_usable

from harness.workload import DEVICE_BACKENDS
# set by hand to force a BLAS kernel or a cache size: recorded where set
KERNEL_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "MKL_ENABLE_INSTRUCTIONS",
                    "ATEN_CPU_CAPABILITY")


def cpu_model(cpuinfo="/proc/cpuinfo"):
    """The "model name" of /proc/cpuinfo; platform's guess where there is none."""
    try:
        with open(cpuinfo) as handle:
            for line in handle:
                if line.startswith("model name") and ":" in line:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe_blas(info):
    """One threadpoolctl entry as "openblas 0.3.31, Haswell kernels"."""
    text = f"{info.get('internal_api', '?')} {info.get('version') or ''}".strip()
    if info.get("architecture"):
        text += f", {info['architecture']} kernels"
    return text


def blas_libraries():
    """(NumPy's, PyTorch's) BLAS libraries that threadpoolctl finds loaded
    in this process, as lists of threadpoolctl entries: PyTorch's are those
    inside its package folder (its MKL is linked in, so often none)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None, None
    spec = importlib.util.find_spec("torch")
    torch_folder = os.path.dirname(spec.origin) if spec and spec.origin else None
    blas = [info for info in threadpool_info() if info.get("user_api") == "blas"]
    in_torch = [info for info in blas
                if torch_folder and info["filepath"].startswith(torch_folder)]
    return [info for info in blas if info not in in_torch], in_torch


def numpy_blas():
    ours, _ = blas_libraries()
    if ours is None:
        return "unknown (threadpoolctl is not installed)"
    return "; ".join(describe_blas(info) for info in ours) or "none found by threadpoolctl"


def torch_blas(config_text, found=()):
    """PyTorch's BLAS from ``torch.__config__.show()`` (BLAS_INFO, the MKL
    version, the CPU capability of its own kernels), and threadpoolctl's
    entries where it reports one."""
    parts = []
    blas = re.search(r"BLAS_INFO=(\w+)", config_text)
    parts.append(blas.group(1) if blas else "unknown BLAS")
    mkl = re.search(r"Math Kernel Library Version ([\w.]+)", config_text)
    if mkl:
        parts[-1] += f" {mkl.group(1)}"
    parts += [describe_blas(info) for info in found]
    capability = re.search(r"CPU capability usage: (\w+)", config_text)
    if capability:
        parts.append(f"CPU capability {capability.group(1)}")
    return ", ".join(parts)


def kernel_variables(environ=None):
    """"OPENBLAS_CORETYPE=Haswell" for each of KERNEL_VARIABLES that is set."""
    environ = os.environ if environ is None else environ
    return [f"{name}={environ[name]}" for name in KERNEL_VARIABLES if environ.get(name)]


def thread_variables(environ=None):
    """"OMP_NUM_THREADS=1, OPENBLAS_NUM_THREADS=unset, ...": NumPy's matrix
    products run on a BLAS library that may start its own threads, and
    these variables cap them ("unset": the library's default)."""
    environ = os.environ if environ is None else environ
    return ", ".join(f"{name}={environ.get(name, 'unset')}"
                     for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"))


def summary(with_torch=False):
    """One line about where the numbers were measured, as every results
    file's "Machine:" line gives it: the CPU, cores and system, Python,
    NumPy and its BLAS, the thread variables, the forced BLAS kernels where
    set, and PyTorch with its BLAS where ``with_torch``."""
    parts = [f"{cpu_model()} ({platform.machine()}), {os.cpu_count()} cores, "
             f"{platform.platform()}",
             f"Python {platform.python_version()}",
             f"NumPy {np.__version__} (BLAS: {numpy_blas()})",
             thread_variables(), *kernel_variables()]
    if with_torch:
        import torch

        _, in_torch = blas_libraries()
        parts.append(f"PyTorch {torch.__version__} (BLAS: "
                     f"{torch_blas(torch.__config__.show(), in_torch or ())})")
    return "; ".join(parts)


def matmul_peak_flops(device, size=None, repeats=5):
    """The best FLOP/s of a large float32 matrix product: the machine's
    practical ceiling, measured now, with the threads of this run. On a GPU
    the product is 8192 wide (2048 takes a GPU less time than the launch)."""
    if device == "gpu":
        import cupy as xp
    else:
        xp = np
    size = size or (8192 if device == "gpu" else 2048)
    a = xp.ones((size, size), dtype=np.float32)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ a
        if device == "gpu":
            xp.cuda.Device().synchronize()
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def machine(args, minitrans_threads):
    """The facts of this run for the report's first line."""
    numpy_side = numpy_blas()  # before PyTorch is imported, to tell their libraries apart
    import torch

    _, in_torch = blas_libraries()
    workers, blas_threads = minitrans_threads(args.device, args.threads, args.workers)
    return {
        "cpu": cpu_model(),
        "arch": platform.machine(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numpy_blas": numpy_side,
        "torch": torch.__version__,
        "torch_blas": torch_blas(torch.__config__.show(), in_torch or ()),
        "kernel_variables": kernel_variables(),
        "threads": args.threads,
        "device": args.device,
        "date": time.strftime("%Y-%m-%d"),
        "workers": workers,
        "worker_kind": "processes" if processes_usable(DEVICE_BACKENDS[args.device]) else "threads",
        "blas_threads": blas_threads,
        "allocator": args.allocator,
        "untuned": args.untuned,
        **({"gpu": gpu_description(torch)} if args.device == "gpu" else {}),
    }


def gpu_description(torch):
    """"NVIDIA H100 80GB HBM3 (79 GiB); CUDA 13.0 in PyTorch 2.11.0, CuPy 14.2.0
    (CUDA runtime 13.0)": the GPU and the CUDA of each library."""
    import cupy

    runtime = cupy.cuda.runtime.runtimeGetVersion()  # 13000 for 13.0
    memory = torch.cuda.get_device_properties(0).total_memory
    return (f"{torch.cuda.get_device_name(0)} ({memory / 2**30:.0f} GiB); CUDA "
            f"{torch.version.cuda} in PyTorch {torch.__version__}, CuPy {cupy.__version__} "
            f"(CUDA runtime {runtime // 1000}.{runtime % 1000 // 10})")

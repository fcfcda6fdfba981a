"""Why the GPU cannot run minitrans here, and what to do, in one line.

``minitrans doctor --device gpu`` ends with this line when it fails. It
tells apart: CuPy missing (which extra to install, chosen by the "CUDA
Version" nvidia-smi prints), CuPy installed but unimportable, no NVIDIA
driver, a driver older than CuPy's CUDA, no visible device, and a GPU that
runs but computes wrongly (or that CUDA 13 no longer supports).
"""

import os

from minitrans.cli.gpu_environment import OLDEST_FOR_CUDA13, cuda_text, extra_for

BOTH_EXTRAS = '"minitrans[gpu-cuda12]" or "minitrans[gpu-cuda13]"'


def why_the_gpu_fails(cupy, smi, smoke_failure=None):
    """One line saying why CuPy cannot run minitrans and what to install or
    change, or None when it can.

    Inputs:
        cupy: gpu_environment.CupyFacts
        smi: gpu_environment.NvidiaSmi
        smoke_failure: why the smoke test on cupy failed (one line), or None
    """
    if cupy.import_error is not None:
        reason = _not_importable(cupy, smi)
    elif cupy.device_count is None or cupy.device_count == 0:
        reason = _no_device(cupy, smi)
    elif smoke_failure is not None:
        reason = _smoke_failed(cupy, smoke_failure)
    else:
        return None
    if len(cupy.packages) > 1:
        reason += (f" (several CuPy packages are installed, {', '.join(cupy.packages)}, "
                   "and overwrite each other: pip uninstall all of them, then install one)")
    return reason


def _install(extra):
    return f'pip install "minitrans[{extra}]"'


def _install_advice(smi):
    """Which extra to install on this driver, from nvidia-smi's "CUDA Version"."""
    if smi.cuda is None:
        return (f'pip install {BOTH_EXTRAS}, choosing by the "CUDA Version" that nvidia-smi '
                f"prints (12.x or 13.x); nvidia-smi here: {smi.problem}, so check first "
                "that this machine has an NVIDIA GPU and its driver")
    extra = extra_for(int(smi.cuda.split(".")[0]))
    if extra is None:
        return (f"the driver runs CUDA {smi.cuda} at most (nvidia-smi), older than CuPy's "
                f"CUDA 12: update the NVIDIA driver, then {_install('gpu-cuda12')}")
    return f"the driver runs CUDA {smi.cuda} (nvidia-smi), so: {_install(extra)}"


def _not_importable(cupy, smi):
    if not cupy.packages:
        return f"CuPy is not installed: {_install_advice(smi)}"
    return (f"CuPy ({', '.join(cupy.packages)}) is installed but cannot be imported "
            f"({cupy.import_error}): pip uninstall {' '.join(cupy.packages)}, then install "
            f"again; {_install_advice(smi)}")


def _driver_cuda(cupy, smi):
    """The newest CUDA the driver runs, as (major, "12.4"): CuPy's answer,
    else nvidia-smi's; None where neither found a driver."""
    if cupy.driver:
        return cupy.driver // 1000, cuda_text(cupy.driver)
    if smi.cuda is not None:
        return int(smi.cuda.split(".")[0]), smi.cuda
    return None


def _describe(cupy):
    """ "CuPy for CUDA 13 (cupy-cuda13x 14.2.0)", or without the CUDA where unknown."""
    built_for = f" for CUDA {cupy.cuda_major}" if cupy.cuda_major is not None else ""
    return f"CuPy{built_for} ({cupy.package} {cupy.version})"


def _no_device(cupy, smi):
    what = _describe(cupy)
    error = cupy.errors.get("device_count", "it finds 0 devices")
    driver = _driver_cuda(cupy, smi)
    if driver is None:  # CuPy's driverGetVersion() is 0 where no libcuda is loaded
        return (f"{what} is installed, but no NVIDIA driver was found ({error}): run on a "
                "machine with an NVIDIA GPU and its driver, or use --device cpu")
    major, version = driver
    if cupy.cuda_major is not None and major < cupy.cuda_major:
        return _driver_too_old(cupy, version, major)
    if not cupy.driver:  # nvidia-smi found a driver that CuPy's CUDA runtime did not
        return (f"nvidia-smi finds an NVIDIA driver (CUDA {version}), but {what} cannot load "
                f"it ({error}): check that the driver's libcuda.so.1 is on the library path")
    if "cudaErrorInsufficientDriver" in error:
        return (f"{what} needs a newer NVIDIA driver than this one, which runs CUDA "
                f"{version} ({error}): update the driver")
    if "cudaErrorNoDevice" in error or cupy.device_count == 0:
        hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
        check = (f"CUDA_VISIBLE_DEVICES={hidden!r} may hide the GPUs" if hidden is not None
                 else "check that nvidia-smi lists a GPU")
        return (f"{what} and an NVIDIA driver (CUDA {version}) are installed, but no CUDA "
                f"device was found ({error}): {check}, or use --device cpu")
    return f"{what} is installed, but CUDA cannot start ({error})"


def _driver_too_old(cupy, version, major):
    what = f"{_describe(cupy)} is installed"
    extra = extra_for(major)
    if extra is None:
        return (f"{what}, but the NVIDIA driver runs CUDA {version} at most: update the "
                f"driver to one for CUDA 12 or newer")
    return (f"{what}, but the NVIDIA driver runs CUDA {version} at most: pip uninstall "
            f"{cupy.package}, then {_install(extra)} (or update the driver)")


def _smoke_failed(cupy, failure):
    reason = f"the smoke test on cupy FAILED ({failure})"
    too_old = [device for device in cupy.devices
               if not isinstance(device, str) and device[2] < OLDEST_FOR_CUDA13]
    if (cupy.cuda_major or 0) >= 13 and too_old:
        name, _, (major, minor) = too_old[0]
        reason += (f": CUDA 13 does not support the {name} (compute capability {major}.{minor}, "
                   f"below 7.5): pip uninstall {cupy.package}, then {_install('gpu-cuda12')}")
    return reason

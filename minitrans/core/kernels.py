"""Two versions of every kernel made fast, and the one switch between them.

A kernel that minitrans computes in a fast, less obvious way (a sum written
as a matrix product, a softmax in place, Adam's update in one scratch array)
keeps a reference version beside it, in the same module, that reads as the
equation. ``pair(reference, fast)`` joins the two into the function the
layers call; which one runs is chosen by the active kernel set:

``"fast"``       the default: the versions that train quickly.
``"reference"``  the versions that read as the paper, to follow a number
                 through the model or to test a fast version against.

A kernel may have a third version, ``device``: its element-wise work fused
into one or two kernels (``minitrans.core.fusion``). The fast set runs it
on a device backend (CuPy, and the strict backend that stands in for it),
where a launch costs more than the arithmetic; on NumPy the fast set runs
the fast version.

Choose one with ``minitrans.use(kernels="reference")`` (or, for a block,
``with minitrans.using(kernels="reference"):``), or before Python starts
with the environment variable ``MINITRANS_KERNELS=reference``. The setting is
one for the whole process, not per thread: ``DataParallel`` runs the layers
on worker threads, and they must run the set the caller chose.

Every pair is kept in ``PAIRS`` (name -> pair), which ``tests/library/test_kernels.py``
walks to check that fast (and device) equals reference and ``benchmarks/kernels.py`` walks
to time them.
"""

import os

KERNEL_SETS = ("fast", "reference")
PAIRS = {}

_active = None  # "fast" or "reference"; read from MINITRANS_KERNELS on first use
_device_test = None  # backend.on_device, set by core.fusion (this module cannot import it)


def _checked(name, value):
    if value not in KERNEL_SETS:
        raise ValueError(f"{name}: expected 'fast' or 'reference', got {value!r}")
    return value


def active():
    """The active kernel set: "fast" or "reference"."""
    global _active
    if _active is None:
        _active = _checked("MINITRANS_KERNELS", os.environ.get("MINITRANS_KERNELS") or "fast")
    return _active


def use(kernels):
    """Make ``kernels`` ("fast" or "reference") the active set, for every thread."""
    global _active
    _active = _checked("kernels", kernels)


def set_device_test(test):
    """``test()`` says whether the current backend is a device; the pairs
    with a device version ask it (``core.fusion`` passes ``backend.on_device``)."""
    global _device_test
    _device_test = test


def pair(reference, fast, name=None, device=None):
    """The function the layers call: ``reference(...)`` or ``fast(...)``, by
    the active set, or in the fast set on a device backend ``device(...)``
    where one is given. All stay reachable as ``.reference``, ``.fast`` and
    ``.device`` (None for a pair without one).

    ``name`` (default: the reference's name without "_reference") is the
    pair's key in ``PAIRS``.
    """
    name = name or reference.__name__.removesuffix("_reference")
    if name in PAIRS:
        raise ValueError(f"name: a kernel pair named {name!r} exists already")

    def kernel(*args, **kwargs):
        if active() != "fast":
            return kernel.reference(*args, **kwargs)
        if kernel.device is not None and _device_test is not None and _device_test():
            return kernel.device(*args, **kwargs)
        return kernel.fast(*args, **kwargs)

    kernel.reference, kernel.fast, kernel.device = reference, fast, device
    kernel.__name__ = kernel.__qualname__ = name
    kernel.__module__ = reference.__module__
    kernel.__doc__ = reference.__doc__
    PAIRS[name] = kernel
    return kernel

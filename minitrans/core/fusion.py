"""Fused kernels: a chain of element-wise work written once, as Python that
reads as its equation, and run as ONE kernel on a GPU.

On a GPU every array operation is a kernel launch, and a layer norm's
dozen operations are a dozen launches, each reading and writing memory.
``@fused("name")`` turns a body of element-wise operations into one:

    @fused("scale_and_shift")
    def scale_and_shift(x, gamma, beta):
        return gamma * x + beta

The body takes its array namespace from the backend (``backend.get_xp()``),
never from NumPy or CuPy by name, and what it runs depends on the backend:

``cupy``    ``cupy.fuse`` of the body: it is traced once per kind of input
            and compiled into one kernel (built on the first call).
``strict``  the body itself, inside ``launches.one_launch``: it counts as the
            one launch it would be on a GPU, so tests hold a step to a budget.
``numpy``   the body itself, a plain call.

A body holds element-wise operations only (``+``, ``*``, ``xp.sqrt``,
``xp.tanh``, ``xp.maximum``, comparisons; in-place ``+=`` on an argument);
a sum over an axis is a separate call before it, so that the same body is
valid for ``cupy.fuse``. Python numbers are fine arguments.

Fused versions join the reference and fast versions of a kernel as its
third version (``kernels.pair(reference, fast, device=...)``); the fast
kernel set runs them on a device backend.
"""

import functools

from minitrans.core import backend, kernels, launches


def fused(name):
    """Decorator: the body as one kernel named ``name`` on a device (see the
    module's docstring). The body stays reachable as ``.body``."""

    def decorate(body):
        compiled = []  # the cupy.fuse function, once it is built

        @functools.wraps(body)
        def kernel(*args):
            where = backend.backend_name()
            if where == "numpy":
                return body(*args)
            if where == "strict":
                with launches.one_launch(name):
                    return body(*args)
            if not compiled:
                compiled.append(backend.get_xp().fuse(kernel_name=name)(body))
            return compiled[0](*args)

        kernel.body, kernel.kernel_name = body, name
        return kernel

    return decorate


# kernels cannot ask the backend itself (the backend imports kernels): tell it
# here which backend is a device, for the pairs that have a fused version
kernels.set_device_test(backend.on_device)

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
            and compiled into one kernel (built on the first call, which
            checks it: a body cupy.fuse refuses, or compiles to another
            dtype, runs op by op and is named in ``FELL_BACK``).
``strict``  the body itself, inside ``launches.one_launch``: it counts as the
            one launch it would be on a GPU, so tests hold a step to a budget.
``numpy``   the body itself, a plain call.

A body holds element-wise operations (``+``, ``*``, ``xp.sqrt``,
``xp.tanh``, ``xp.maximum``, ``xp.where``, comparisons; in-place ``+=`` on
an argument), and may end in ONE reduction over an axis, which cupy.fuse
builds into a single reduction kernel:

    @fused("row_inverse_norm")
    def row_inverse_norm(x):
        xp = backend.get_xp()
        return 1.0 / xp.sqrt(xp.sum(x * x, axis=-1))  # shape (...,): no keepdims

The limits, those of ``cupy.fuse``, that keep a body valid there:

* the reduction is ``xp.sum``, ``xp.max`` or ``xp.min``, with ``axis=`` (or
  none: over everything) and no ``keepdims``, which cupy.fuse drops: the
  result has the reduced shape, and the caller adds the axis back, as a view
  (``[..., None]``); ``xp.mean`` is no reduction there: sum ``x * (1 / n)``;
* after the reduction only its value and numbers written in the body
  (``1.0``) take part: neither the arguments (arrays or numbers) nor arrays
  made before it, so a number such as ``eps`` goes in before the sum
  (the mean of ``x + eps`` is the mean of ``x``, plus ``eps``);
* a reduction body returns that one array; an element-wise body may return
  a tuple of arrays of one (broadcast) shape;
* no indexing, ``arange`` or ``reshape`` inside a body: they go around it.

Python numbers are fine arguments, weakly typed (float32 arrays stay float32).

Fused versions join the reference and fast versions of a kernel as its
third version (``kernels.pair(reference, fast, device=...)``); the fast
kernel set runs them on a device backend.
"""

import functools

from minitrans.core import backend, kernels, launches

# The kernels that cupy.fuse could not build, or built to give arrays of
# another dtype than their inputs': name -> why. Each runs as its body, op by
# op, from then on: slower, never wrong. The CuPy leg of the tests and the
# device check require this to stay empty.
FELL_BACK = {}


def fused(name):
    """Decorator: the body as one kernel named ``name`` on a device (see the
    module's docstring). The body stays reachable as ``.body``."""

    def decorate(body):
        compiled = []  # the cupy.fuse function, once it is built and proven

        @functools.wraps(body)
        def kernel(*args):
            where = backend.backend_name()
            if where == "numpy" or name in FELL_BACK:
                return body(*args)
            if where == "strict":
                with launches.one_launch(name):
                    return body(*args)
            if compiled:
                return compiled[0](*args)
            return _first_call(name, body, compiled, args)

        kernel.body, kernel.kernel_name = body, name
        return kernel

    return decorate


def _first_call(name, body, compiled, args):
    """Build the kernel and run it once, checking that its float outputs keep
    the float dtype of its array inputs (cupy.fuse types a Python number as
    a float64 array would be typed); a reduction's output, of the reduced
    shape, 0-d for a sum over everything, is checked as any other. A kernel
    cupy.fuse refuses is run as its body: the refusal comes while tracing,
    before anything is written."""
    try:
        kernel = backend.get_xp().fuse(kernel_name=name)(body)
        result = kernel(*args)
    except Exception as error:  # a cupy.fuse limit: the body still computes the same
        FELL_BACK[name] = f"cupy.fuse refused it: {type(error).__name__}: {error}"
        return body(*args)
    wanted = _float_dtype(args)
    outputs = result if isinstance(result, tuple) else (result,)
    changed = [out.dtype for out in outputs
               if wanted is not None and out.dtype.kind == "f" and out.dtype != wanted]
    if changed:
        FELL_BACK[name] = f"cupy.fuse gave {changed[0]} from {wanted} inputs"
        cast = tuple(out.astype(wanted) if out.dtype.kind == "f" else out for out in outputs)
        return cast if isinstance(result, tuple) else cast[0]
    compiled.append(kernel)
    return result


def _float_dtype(args):
    """The widest float dtype of the array arguments, or None."""
    dtypes = [arg.dtype for arg in args if getattr(getattr(arg, "dtype", None), "kind", "") == "f"
              and getattr(arg, "ndim", 0) > 0]
    return max(dtypes, key=lambda dtype: dtype.itemsize, default=None)


# kernels cannot ask the backend itself (the backend imports kernels): tell it
# here which backend is a device, for the pairs that have a fused version
kernels.set_device_test(backend.on_device)

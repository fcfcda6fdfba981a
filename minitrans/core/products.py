"""Products that add into an array: ``out += a @ b`` and ``out += x``'s column sums.

Gradients accumulate: a linear layer's backward adds ``x^T dy`` to ``dW`` and
the sum of ``dy``'s rows to ``db``. Written as the equation, each is two
kernels on a GPU (the product or the sum, then the addition) and a
temporary array between them. BLAS computes ``alpha * a @ b + beta * out``
in one call, so with ``beta = 1`` the addition happens inside the product:

    out += a @ b          one gemm:  out = 1 * a b + 1 * out
    out += sum_i x[i, :]  one gemv:  out = 1 * x^T 1 + 1 * out   (1: a vector of ones)

On each backend:

``numpy``   the equation, as written above.
``strict``  the equation, counted as the one launch it is on a GPU.
``cupy``    ``cupy.cublas.gemm`` and ``gemv`` with ``beta = 1`` (for float
            arrays in a layout BLAS reads directly; the equation otherwise).
"""

import contextlib

from minitrans.core import backend, launches

_ones = {}  # (length, dtype) -> a device vector of ones, for gemv's column sums


def add_product(out, a, b):
    """``out += a @ b`` in place, for 2-d ``a`` (m, k), ``b`` (k, n) and
    ``out`` (m, n). Returns ``out``."""
    blas = backend.device_blas()
    if blas is not None and _blas_reads(out, a, b):
        blas.gemm("N", "N", a, b, out=out, alpha=1.0, beta=1.0)
        return out
    with _counted_as_one("add_product"):
        out += a @ b
    return out


def add_column_sums(out, x):
    """``out += x.sum(axis=0)`` in place, for a 2-d ``x`` (m, n) and ``out``
    (n,). Returns ``out``."""
    blas = backend.device_blas()
    if blas is not None and _blas_reads(out, x):
        blas.gemv("T", 1.0, x, _ones_of(x.shape[0], x.dtype), 1.0, out)
        return out
    with _counted_as_one("add_column_sums"):
        out += x.sum(axis=0)
    return out


def _blas_reads(out, *operands):
    """Whether BLAS can add into ``out`` from ``operands`` with no copies:
    one float dtype, every array laid out in rows or in columns."""
    arrays = (out, *operands)
    return (out.dtype.kind == "f" and all(a.dtype == out.dtype for a in arrays)
            and out.flags.c_contiguous
            and all(a.flags.c_contiguous or a.flags.f_contiguous for a in operands))


def _ones_of(length, dtype):
    """A vector of ``length`` ones, made once for each length and dtype."""
    key = (length, dtype.str)
    if key not in _ones:
        _ones[key] = backend.get_xp().ones(length, dtype=dtype)
    return _ones[key]


def _counted_as_one(name):
    """On the strict backend, the body counts as the one launch it is on a GPU."""
    if backend.backend_name() == "strict":
        return launches.one_launch(name)
    return contextlib.nullcontext()

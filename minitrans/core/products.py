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
``strict``  the equation, counted as the one launch it is on a GPU when
            BLAS can read the arrays as they lie (see below); otherwise
            counted operation by operation, as CuPy would run it.
``cupy``    ``cupy.cublas.gemm`` and ``gemv`` with ``beta = 1``, when BLAS
            can read the arrays as they lie; the equation otherwise.

BLAS reads a float32 or float64 matrix laid out by rows (C order) or by
columns (F order: a transposed view such as ``x.T``), and adds into an
``out`` laid out either way (gemv: a contiguous vector). Anything else (a
strided slice, another dtype) would need copies first, so it takes the
equation, which is no slower.
"""

from minitrans.core import backend, launches

BLAS_DTYPES = "fd"  # numpy's dtype.char of float32 and float64: cuBLAS's sgemm, dgemm
_ones = {}  # (backend, length, dtype) -> a device vector of ones, for gemv's column sums


def add_product(out, a, b):
    """``out += a @ b`` in place, for 2-d ``a`` (m, k), ``b`` (k, n) and
    ``out`` (m, n), ``out`` sharing no memory with ``a`` or ``b``. Returns
    ``out``."""
    if not (backend.on_device() and _blas_reads(out, a, b)):
        out += a @ b  # the equation: on NumPy, or for arrays BLAS cannot read
        return out
    blas = backend.device_blas()
    if blas is None:  # the strict backend: the one launch it is on a GPU
        with launches.one_launch("add_product"):
            out += a @ b
    else:
        blas.gemm("N", "N", a, b, out=out, alpha=1.0, beta=1.0)
    return out


def add_column_sums(out, x):
    """``out += x.sum(axis=0)`` in place, for a 2-d ``x`` (m, n) and ``out``
    (n,), sharing no memory with ``x``. Returns ``out``."""
    if not (backend.on_device() and _blas_reads(out, x)):
        out += x.sum(axis=0)
        return out
    blas = backend.device_blas()
    if blas is None:
        with launches.one_launch("add_column_sums"):
            out += x.sum(axis=0)
    else:
        blas.gemv("T", 1.0, x, _ones_of(x.shape[0], x.dtype), 1.0, out)
    return out


def _blas_reads(out, *operands):
    """Whether BLAS can add into ``out`` from ``operands`` with no copies:
    one dtype, float32 or float64, every array laid out by rows or by
    columns, and none empty (BLAS refuses a leading dimension of 0)."""
    arrays = (out, *operands)
    return (out.dtype.char in BLAS_DTYPES and all(a.dtype == out.dtype for a in arrays)
            and all(a.size and (a.flags.c_contiguous or a.flags.f_contiguous) for a in arrays))


def _ones_of(length, dtype):
    """A vector of ``length`` ones, made once for each length and dtype."""
    key = (backend.backend_name(), length, dtype.str)
    if key not in _ones:
        _ones[key] = backend.get_xp().ones(length, dtype=dtype)
    return _ones[key]


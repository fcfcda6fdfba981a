"""Sums along one axis, written as matrix-vector products.

    sum_last(x)    == x.sum(axis=-1, keepdims=True)     x @ ones
    mean_last(x)   == x.mean(axis=-1, keepdims=True)
    sum_leading(x) == x.sum over every axis but the last: ones @ x
    sum_along(x, axis) == x.sum(axis=axis, keepdims=True), by sum_last when
                       axis is the last one
    dot_last(a, b)     == (a * b).sum(axis=-1, keepdims=True)   each row's dot product
    dot_leading(a, b)  == (a * b) summed over every axis but the last

Why not just ``x.sum(axis=...)``? It is the same arithmetic, but NumPy runs
its reductions in a loop of its own on one core, while a product with a
vector of ones runs inside BLAS (OpenBLAS, MKL or cuBLAS), vectorised and on
every thread. On the arrays of a training step, (2048, 256) activations or
(2048, 8000) logits, that is 3 to 7 times faster (``benchmarks/README.md``),
and a Transformer takes hundreds of such sums per step: the means of every
layer norm, the denominators of every softmax, the gradient of every bias.
``tests/test_sums.py`` checks each against the plain reduction.

The two dot products go through ``einsum``, which multiplies and adds in one
loop and forms no ``a * b`` array: 4 to 5 times faster than the product and
a sum on (2048, 256) arrays.

Float32 BLAS adds in several partial sums, so results can differ from
NumPy's pairwise summation in the last bits; both are equally accurate for
the lengths used here.
"""

from minitrans.core import backend


def _rows(x):
    """x as a (rows, last axis) matrix: a view when x is contiguous."""
    return x.reshape(-1, x.shape[-1])


def sum_last(x):
    """x.sum(axis=-1, keepdims=True), for x (..., n): x @ ones(n)."""
    ones = backend.get_xp().ones(x.shape[-1], dtype=x.dtype)
    return (_rows(x) @ ones).reshape(*x.shape[:-1], 1)


def mean_last(x):
    """x.mean(axis=-1, keepdims=True): x @ (ones(n) / n)."""
    weights = backend.get_xp().full(x.shape[-1], 1.0 / x.shape[-1], dtype=x.dtype)
    return (_rows(x) @ weights).reshape(*x.shape[:-1], 1)


def sum_along(x, axis):
    """x.sum(axis=axis, keepdims=True): a product for the last axis, NumPy's
    reduction for any other."""
    if axis in (-1, x.ndim - 1):
        return sum_last(x)
    return x.sum(axis=axis, keepdims=True)


def sum_leading(x):
    """The sum over every axis but the last, (n,) for x (..., n): ones @ x.
    The gradient of a bias added at every position."""
    rows = _rows(x)
    return backend.get_xp().ones(rows.shape[0], dtype=x.dtype) @ rows


def dot_last(a, b):
    """(a * b).sum(axis=-1, keepdims=True): the dot product of each pair of
    rows, shape (..., 1), without an a * b array."""
    return backend.get_xp().einsum("...k,...k->...", a, b)[..., None]


def dot_leading(a, b):
    """(a * b) summed over every axis but the last, shape (n,), without an
    a * b array: the gradient of a per-feature scale (layer norm's gamma)."""
    return backend.get_xp().einsum("nk,nk->k", _rows(a), _rows(b))

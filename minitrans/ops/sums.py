"""Sums along one axis: NumPy's reductions, and the same sums as matrix products.

    sum_last(x)        == x.sum(axis=-1, keepdims=True)           fast: x @ ones
    mean_last(x)       == x.mean(axis=-1, keepdims=True)          fast: x @ (ones / n)
    sum_leading(x)     == x summed over every axis but the last   fast: ones @ x
    dot_last(a, b)     == (a * b).sum(axis=-1, keepdims=True)     fast: einsum
    dot_leading(a, b)  == (a * b) summed over every axis but the last

Each is a pair (``minitrans.core.kernels``): the reference, the plain
reduction (the first three's device version too), and the fast version, a
product that runs inside BLAS (OpenBLAS, MKL or cuBLAS), vectorised and
on every thread, where NumPy's reduction is a loop of its own on one core.
A Transformer takes hundreds of such sums per step: the means of every
layer norm, the denominators of every softmax, the gradient of every bias.
The dot products go through ``einsum``, which multiplies and adds in one
loop and forms no ``a * b`` array.

How much faster depends on the machine and on the length n of the summed
axis; ``python benchmarks/kernels.py`` measures it (its results:
benchmarks/results/kernels/). Rows as short as a layer norm's or a bias's
favoured the product on every machine measured. For the long rows of the base config's
logits the winner depends on the machine, but it is one sum a step, a small
part of it either way, so the product stays; that is the length to rerun on
a new machine: ``python benchmarks/kernels.py --kernels sum_last --configs base``.

Float32 BLAS adds in several partial sums, so results can differ from
NumPy's pairwise summation in the last bits; both are equally accurate for
the lengths used here.
"""

from minitrans.core import backend, kernels


def _rows(x):
    """x as a (rows, last axis) matrix: a view when x is contiguous."""
    return x.reshape(-1, x.shape[-1])


def sum_last_reference(x):
    """x.sum(axis=-1, keepdims=True), for x (..., n)."""
    return x.sum(axis=-1, keepdims=True)


def sum_last_fast(x):
    """x @ ones(n)."""
    ones = backend.get_xp().ones(x.shape[-1], dtype=x.dtype)
    return (_rows(x) @ ones).reshape(*x.shape[:-1], 1)


def mean_last_reference(x):
    """x.mean(axis=-1, keepdims=True), for x (..., n)."""
    return x.mean(axis=-1, keepdims=True)


def mean_last_fast(x):
    """x @ (ones(n) / n)."""
    weights = backend.get_xp().full(x.shape[-1], 1.0 / x.shape[-1], dtype=x.dtype)
    return (_rows(x) @ weights).reshape(*x.shape[:-1], 1)


def sum_leading_reference(x):
    """The sum over every axis but the last, (n,) for x (..., n): the gradient
    of a bias added at every position."""
    return _rows(x).sum(axis=0)


def sum_leading_fast(x):
    """ones @ x."""
    rows = _rows(x)
    return backend.get_xp().ones(rows.shape[0], dtype=x.dtype) @ rows


def dot_last_reference(a, b):
    """(a * b).sum(axis=-1, keepdims=True): the dot product of each pair of
    rows, shape (..., 1)."""
    return (a * b).sum(axis=-1, keepdims=True)


def dot_last_fast(a, b):
    """einsum, with no a * b array."""
    return backend.get_xp().einsum("...k,...k->...", a, b)[..., None]


def dot_leading_reference(a, b):
    """(a * b) summed over every axis but the last, shape (n,): the gradient
    of a per-feature scale (layer norm's gamma)."""
    return _rows(a * b).sum(axis=0)


def dot_leading_fast(a, b):
    """einsum, with no a * b array."""
    return backend.get_xp().einsum("nk,nk->k", _rows(a), _rows(b))


# On a device a reduction is one kernel, where the product first fills its
# vector of ones (a second launch): there the plain reductions, the
# references themselves, are the device versions.
sum_last = kernels.pair(sum_last_reference, sum_last_fast, device=sum_last_reference)
mean_last = kernels.pair(mean_last_reference, mean_last_fast, device=mean_last_reference)
sum_leading = kernels.pair(sum_leading_reference, sum_leading_fast, device=sum_leading_reference)
dot_last = kernels.pair(dot_last_reference, dot_last_fast)
dot_leading = kernels.pair(dot_leading_reference, dot_leading_fast)

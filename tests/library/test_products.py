"""Products that add into an array (``minitrans.core.products``): each equals
its equation for operands laid out by rows or by columns, counts as the one
launch it is on a GPU where BLAS reads the arrays as they lie, and as the
equation's launches where it does not; each check is shown catching a
planted wrong version."""

import numpy as np
import pytest

import minitrans
from minitrans.core import backend, products
from minitrans.core.launches import count_launches

TOLERANCE = {"float32": 1e-5, "float64": 1e-12}


def _host(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


def _operand(host, order):
    """``host`` on the backend, laid out by rows ("C") or by columns ("F": a
    transposed view, as ``x.T`` in ``dW += x^T dy``)."""
    if order == "C":
        return backend.from_host(host)
    return backend.from_host(np.ascontiguousarray(host.T)).T


def check_add_product(add_product, out_order="C", a_order="C", b_order="C"):
    """``add_product(out, a, b)`` leaves ``out`` equal to out + a @ b
    (worked out in float64 on the host) and returns it."""
    out0, a0, b0 = _host((3, 5), 0), _host((3, 4), 1), _host((4, 5), 2)
    expected = out0 + a0 @ b0  # first: on NumPy in float64, out may be out0 itself
    out, a, b = _operand(out0, out_order), _operand(a0, a_order), _operand(b0, b_order)
    returned = add_product(out, a, b)
    assert returned is out
    _assert_close(out, expected)


def check_add_column_sums(add_column_sums, x_order="C"):
    """``add_column_sums(out, x)`` leaves ``out`` equal to out + the sum of x's rows."""
    out0, x0 = _host(5, 3), _host((7, 5), 4)
    expected = out0 + x0.sum(axis=0)
    out, x = backend.from_host(out0), _operand(x0, x_order)
    returned = add_column_sums(out, x)
    assert returned is out
    _assert_close(out, expected)


def _assert_close(got, expected):
    got = minitrans.to_numpy(got)
    error = np.abs(got - expected).max() / np.abs(expected).max()
    assert error < TOLERANCE[backend.get_dtype().name], error


# -- the planted wrong versions ---------------------------------------------

def forgets_out(out, a, b):  # BLAS's beta = 0: out = a @ b
    out[...] = a @ b
    return out


def reads_the_memory_as_rows(out, a, b):  # a transposed view taken as its memory
    out += backend.get_xp().ascontiguousarray(a.T).reshape(a.shape) @ b
    return out


def sums_forgetting_out(out, x):
    out[...] = x.sum(axis=0)
    return out


def sums_the_memory_as_rows(out, x):
    out += backend.get_xp().ascontiguousarray(x.T).reshape(x.shape).sum(axis=0)
    return out


def equation_as_written(out, a, b):  # right numbers, two launches on a GPU
    out += a @ b
    return out


def column_sums_as_written(out, x):
    out += x.sum(axis=0)
    return out


# -- the numbers --------------------------------------------------------------

ORDERS = [("C", "C", "C"), ("C", "F", "C"), ("C", "C", "F"), ("F", "F", "F")]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("orders", ORDERS, ids=["".join(o) for o in ORDERS])
def test_add_product_equals_the_equation(backend_name, dtype, orders):
    with minitrans.using(dtype=dtype):
        check_add_product(products.add_product, *orders)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_add_column_sums_equals_the_equation(backend_name, dtype, order):
    with minitrans.using(dtype=dtype):
        check_add_column_sums(products.add_column_sums, order)


@pytest.mark.parametrize("wrong, orders", [(forgets_out, ("C", "C", "C")),
                                           (reads_the_memory_as_rows, ("C", "F", "C"))])
def test_the_product_check_catches_a_planted_wrong_version(backend_name, wrong, orders):
    with pytest.raises(AssertionError):
        check_add_product(wrong, *orders)


@pytest.mark.parametrize("wrong, order", [(sums_forgetting_out, "C"),
                                          (sums_the_memory_as_rows, "F")])
def test_the_sums_check_catches_a_planted_wrong_version(backend_name, wrong, order):
    with pytest.raises(AssertionError):
        check_add_column_sums(wrong, order)


# -- the launches -------------------------------------------------------------

def launches_of(add_product, add_column_sums, out_order="C", a_order="C"):
    """The launches of one product and one column sum on the strict backend."""
    out, a, b = _operand(_host((3, 5), 0), out_order), _operand(_host((3, 4), 1), a_order), \
        _operand(_host((4, 5), 2), "C")
    vector, x = backend.from_host(_host(5, 3)), _operand(_host((7, 5), 4), a_order)
    with count_launches() as product:
        add_product(out, a, b)
    with count_launches() as sums:
        add_column_sums(vector, x)
    return product.places, sums.places


@pytest.mark.parametrize("orders", [("C", "C"), ("C", "F"), ("F", "F")])
def test_each_is_one_launch_on_the_strict_backend(orders):
    with minitrans.using("strict", dtype="float32"):
        places = launches_of(products.add_product, products.add_column_sums, *orders)
    assert places == (["fused add_product"], ["fused add_column_sums"])


def test_the_count_catches_the_equation_as_written():
    with minitrans.using("strict", dtype="float32"):
        places = launches_of(equation_as_written, column_sums_as_written)
    assert places == (["matmul", "add"], ["sum", "add"])


def test_arrays_blas_cannot_read_count_as_the_equation():
    """A strided slice, or another dtype, would need copies before BLAS: CuPy
    runs the equation, and the strict backend counts it as such."""
    with minitrans.using("strict", dtype="float32"):
        xp = backend.get_xp()
        strided, a, b = xp.zeros((6, 5))[::2], xp.ones((3, 4)), xp.ones((4, 5))
        vector, rows = xp.zeros(5, dtype="float32"), xp.ones((7, 5), dtype="float64")
        with count_launches() as sliced:
            products.add_product(strided, a, b)
        with count_launches() as mixed:
            products.add_column_sums(vector, rows)
        assert minitrans.to_numpy(strided).tolist() == [[4.0] * 5] * 3
    assert sliced.places == ["matmul", "add"] and mixed.places == ["sum", "add"]


# -- the calls CuPy's BLAS receives -----------------------------------------

class FakeBlas:
    """``cupy.cublas``'s gemm and gemv as CuPy documents them, in NumPy:
    gemm: out = alpha * op(a) @ op(b) + beta * out; gemv: y = alpha *
    op(a) @ x + beta * y (op: "N" as is, "T" transposed)."""

    calls = []

    @staticmethod
    def _op(trans, a):
        return a if trans == "N" else a.T

    def gemm(self, transa, transb, a, b, out, alpha, beta):
        self.calls.append("gemm")
        out[...] = alpha * (self._op(transa, a) @ self._op(transb, b)) + beta * out

    def gemv(self, transa, alpha, a, x, beta, y):
        self.calls.append("gemv")
        y[...] = alpha * (self._op(transa, a) @ x) + beta * y


def test_the_blas_calls_add_into_out(monkeypatch):
    """The arguments given to gemm and gemv: beta = 1 adds into out, the
    vector of ones sums the columns (checked against CuPy's documented
    semantics, on the strict backend standing in for a device)."""
    monkeypatch.setattr(backend, "device_blas", FakeBlas)
    monkeypatch.setattr(FakeBlas, "calls", [])
    with minitrans.using("strict", dtype="float64"):
        check_add_product(products.add_product, "C", "F", "C")
        check_add_product(products.add_product, "F", "C", "F")
        check_add_column_sums(products.add_column_sums, "F")
    assert FakeBlas.calls == ["gemm", "gemm", "gemv"]

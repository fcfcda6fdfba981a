"""Numerical gradient checking: is a hand-written backward right?

For a layer f and a fixed random upstream gradient G, the scalar

    L(inputs, params) = sum(f(inputs, params) * G)

has dL/dinput = backward(G) and dL/dparam = the accumulated grads. Each of
those is compared with central differences,

    dL/dw ~ (L(w + h) - L(w - h)) / (2h)    for every element w

(in its fourth-order form, see ``numeric_gradient``), in float64, by the
relative error max|analytic - numeric| / max(|analytic|, |numeric|). G is
random, never all ones: with G = 1 the gradient of a layer norm or softmax
output is zero whatever the backward computes, and a wrong backward would
pass. A correct float64 backward typically agrees to 1e-10 or better.
"""

import inspect
import math
from dataclasses import dataclass

import numpy as np

from minitrans.core import backend
from minitrans.layers.dropout import Dropout

TOLERANCE = 1e-6
TINY = 1e-30  # so that two all-zero gradients compare as equal, not 0/0


@dataclass
class TensorCheck:
    """The outcome of checking one tensor of one layer."""

    layer: str
    tensor: str
    shape: tuple
    rel_error: float
    tolerance: float = TOLERANCE

    @property
    def passed(self):
        return self.rel_error < self.tolerance


def relative_error(analytic, numeric):
    """max|a - n| / max(max|a|, max|n|); 0 when both are all zeros."""
    analytic, numeric = np.asarray(analytic), np.asarray(numeric)
    if analytic.shape != numeric.shape:
        raise ValueError(f"gradient shapes differ: {analytic.shape} vs {numeric.shape}")
    if analytic.size == 0:
        return 0.0
    scale = max(np.abs(analytic).max(), np.abs(numeric).max(), TINY)
    return float(np.abs(analytic - numeric).max() / scale)


def numeric_gradient(loss, array, step=1e-4, indices=None):
    """Central differences of ``loss()`` with respect to each element of ``array``.

    ``array`` is perturbed in place (on its device) and restored. Each
    element's derivative comes from ``central_derivative``. ``indices``
    (index tuples) limits the work to those elements, a sample of a large
    array; the others stay 0 in the result.
    """
    grad = np.zeros(array.shape)
    for index in np.ndindex(*array.shape) if indices is None else indices:
        original = float(array[index])

        def loss_at(offset):
            array[index] = original + offset
            return loss()

        grad[index] = central_derivative(loss_at, step)
        array[index] = original
    return grad


def central_derivative(f, step, kink_tolerance=1e-6, attempts=4):
    """f'(0) from central differences with steps h and 2h.

        near = (f(h) - f(-h)) / 2h,   far = (f(2h) - f(-2h)) / 4h

    Their errors are (h^2 / 6) f^(3) and (4 h^2 / 6) f^(3), so (4 near - far) / 3
    cancels them: a fourth-order estimate, accurate with a step large enough
    that rounding errors stay small. The two also tell whether f is smooth
    over [-2h, 2h]: if a ReLU's kink lies in between, near and far disagree,
    and the step is divided by 10 until they agree.
    """
    for _ in range(attempts):
        near = (f(step) - f(-step)) / (2 * step)
        far = (f(2 * step) - f(-2 * step)) / (4 * step)
        if abs(near - far) <= kink_tolerance * max(abs(near), abs(far), 1e-3):
            break
        step /= 10
    return (4 * near - far) / 3


def check_layer(layer, *inputs, label=None, tolerance=TOLERANCE, step=1e-4, seed=0, **options):
    """Check every floating-point input and every parameter of ``layer``.

    ``inputs`` are passed to ``layer.forward`` positionally and ``options``
    (masks, flags) by name; only floating-point inputs are differentiated.
    Everything must be float64: in float32 central differences are dominated
    by rounding error. Returns a list of ``TensorCheck``, one per tensor.
    """
    label = label or type(layer).__name__
    float_inputs = [(i, x) for i, x in enumerate(inputs) if _is_float(x)]
    _require_float64(layer, [x for _, x in float_inputs])
    names = _input_names(layer, len(inputs))

    output = _forward(layer, inputs, options)
    upstream = np.random.default_rng(seed).standard_normal(tuple(output.shape))

    def loss():
        out = backend.to_numpy(_forward(layer, inputs, options))
        return float((out * upstream).sum())

    layer.zero_grad()
    _forward(layer, inputs, options)
    input_grads = _as_tuple(
        layer.backward(backend.to_device(upstream, dtype="float64")), len(float_inputs)
    )
    param_grads = {
        name: backend.to_numpy(grad).copy() for name, _, grad in layer.named_parameters()
    }

    results = []
    for (position, x), analytic in zip(float_inputs, input_grads):
        numeric = numeric_gradient(loss, x, step)
        error = relative_error(backend.to_numpy(analytic), numeric)
        results.append(TensorCheck(label, names[position], tuple(x.shape), error, tolerance))
    for name, value, _ in layer.named_parameters():
        numeric = numeric_gradient(loss, value, step)
        error = relative_error(param_grads[name], numeric)
        results.append(TensorCheck(label, name, tuple(value.shape), error, tolerance))
    return results


def _forward(layer, inputs, options):
    for module in layer.modules():
        if isinstance(module, Dropout):
            module.reset_rng()  # the same dropout mask at every evaluation
    return layer.forward(*inputs, **options)


def _is_float(x):
    return hasattr(x, "dtype") and x.dtype.kind == "f"


def _require_float64(layer, arrays):
    dtypes = {str(x.dtype) for x in arrays}
    dtypes |= {str(value.dtype) for _, value, _ in layer.named_parameters()}
    if dtypes - {"float64"}:
        raise ValueError(
            f"gradient check: expected float64 inputs and parameters, got {sorted(dtypes)}; "
            "build the layer and inputs inside `with minitrans.using(dtype='float64')`"
        )


def _input_names(layer, count):
    """The names of forward's positional parameters, for the report."""
    parameters = list(inspect.signature(layer.forward).parameters.values())
    names = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    variadic = next((p.name for p in parameters if p.kind == p.VAR_POSITIONAL), "input")
    return names[:count] + [f"{variadic}[{i}]" for i in range(count - len(names))]


def _as_tuple(gradients, expected):
    """Backward returns None, one array, or a tuple: make it a tuple."""
    if expected == 0:
        if gradients is not None:
            raise ValueError(
                "backward returned a gradient, but forward had no floating-point input"
            )
        return ()
    if expected == 1:
        gradients = (gradients,)
    if not isinstance(gradients, tuple) or len(gradients) != expected:
        raise ValueError(
            f"backward: expected {expected} input gradient(s), one per floating-point input, "
            f"got {type(gradients).__name__}"
        )
    return gradients


def format_table(results):
    """A plain-text table: layer, tensor, shape, relative error, pass/fail."""
    rows = [("layer", "tensor", "shape", "rel. error", "result")]
    for r in results:
        error = f"{r.rel_error:.2e}" if math.isfinite(r.rel_error) else str(r.rel_error)
        rows.append((r.layer, r.tensor, str(r.shape), error, "pass" if r.passed else "FAIL"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)

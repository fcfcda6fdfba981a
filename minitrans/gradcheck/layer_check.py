"""``check_layer``: every floating-point input and every parameter of a
layer, its hand-written gradient against central differences
(``gradcheck.numerical``), one ``TensorCheck`` per tensor."""

import inspect
from dataclasses import dataclass

import numpy as np

from minitrans.core import backend
from minitrans.gradcheck.numerical import TOLERANCE, numeric_gradient, relative_error
from minitrans.layers.dropout import Dropout


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

    # found once: the tree is the same at each of the thousands of forwards below
    dropouts = [module for module in layer.modules() if isinstance(module, Dropout)]
    output = _forward(layer, dropouts, inputs, options)
    upstream = np.random.default_rng(seed).standard_normal(tuple(output.shape))

    def loss():
        out = backend.to_numpy(_forward(layer, dropouts, inputs, options))
        return float((out * upstream).sum())

    layer.zero_grad()
    _forward(layer, dropouts, inputs, options)
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


def _forward(layer, dropouts, inputs, options):
    for dropout in dropouts:
        dropout.reset_rng()  # the same dropout mask at every evaluation
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

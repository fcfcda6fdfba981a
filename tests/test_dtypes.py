"""float32 stays float32 through every forward and backward.

Under NumPy 2, a float32 array divided by ``np.sqrt(d)`` (a float64 scalar)
becomes float64, silently doubling memory and time. Every layer is run here in
float32 and every output, input gradient and parameter gradient is checked.
"""

import warnings

import numpy as np
import pytest

from minitrans import backend
from minitrans.gradcheck_report import layer_cases


def _cases_in_current_dtype():
    return list(layer_cases(np.random.default_rng(0)))


def _floats(values):
    if values is None:
        return []
    if not isinstance(values, tuple):
        values = (values,)
    return list(values)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_layer_keeps_the_dtype_through_forward_and_backward(backend_name, dtype):
    with backend.using(dtype=dtype):
        xp = backend.get_xp()
        for label, layer, inputs, options in _cases_in_current_dtype():
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # no overflow or invalid-value warning either
                out = layer.forward(*inputs, **options)
                assert out.dtype == dtype, f"{label}: forward gave {out.dtype}"
                grads = layer.backward(xp.ones(out.shape, dtype=dtype))
            for grad in _floats(grads):
                assert grad.dtype == dtype, f"{label}: input gradient is {grad.dtype}"
            for name, value, grad in layer.named_parameters():
                assert value.dtype == dtype, f"{label}: parameter {name} is {value.dtype}"
                assert grad.dtype == dtype, f"{label}: gradient of {name} is {grad.dtype}"


def test_layer_parameters_are_created_in_the_default_dtype(backend_name):
    for label, layer, _, _ in _cases_in_current_dtype():
        for name, value, _ in layer.named_parameters():
            assert value.dtype == np.float32, f"{label}.{name}"

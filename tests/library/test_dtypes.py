"""float32 stays float32 through every forward and backward.

Under NumPy 2, a float32 array divided by ``np.sqrt(d)`` (a float64 scalar)
becomes float64, silently doubling memory and time. Every layer is run here in
float32 and every output, input gradient and parameter gradient is checked.
"""


import numpy as np
import pytest

import minitrans
from minitrans.core import backend
from minitrans.gradcheck import layer_cases
from tests.conftest import warnings_as_errors


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
            with warnings_as_errors():
                out = layer.forward(*inputs, **options)
                assert out.dtype == dtype, f"{label}: forward gave {out.dtype}"
                grads = layer.backward(xp.ones(out.shape, dtype=dtype))
            assert np.isfinite(minitrans.to_numpy(out)).all(), f"{label}: forward is not finite"
            for grad in _floats(grads):
                assert grad.dtype == dtype, f"{label}: input gradient is {grad.dtype}"
                assert np.isfinite(
                    minitrans.to_numpy(grad)
                ).all(), f"{label}: input gradient is not finite"
            for name, value, grad in layer.named_parameters():
                assert value.dtype == dtype, f"{label}: parameter {name} is {value.dtype}"
                assert grad.dtype == dtype, f"{label}: gradient of {name} is {grad.dtype}"
                assert np.isfinite(
                    minitrans.to_numpy(grad)
                ).all(), f"{label}: gradient of {name} is not finite"


def test_layer_parameters_are_created_in_the_default_dtype(backend_name):
    for label, layer, _, _ in _cases_in_current_dtype():
        for name, value, _ in layer.named_parameters():
            assert value.dtype == np.float32, f"{label}.{name}"


@pytest.mark.parametrize("decoder_only", [False, True], ids=["encoder-decoder", "decoder-only"])
def test_a_float32_training_step_and_decoding_never_make_a_float64_array(decoder_only):
    """On the strict backend every array is seen as it is made: a whole
    training step (forward, label-smoothed loss, backward, clipping, Adam)
    and greedy and beam decoding stay float32 throughout, not only at the end."""
    from minitrans import decoding
    from minitrans.core.strict import forbid_float64
    from minitrans.gradcheck import tiny_model
    from minitrans.training.optimisation.adam import Adam
    from minitrans.training.optimisation.clipping import clip_grad_norm

    with minitrans.using("strict", dtype="float32"):
        whole, batch = tiny_model(decoder_only=decoder_only, seed=3)
        optimizer = Adam(whole.model, lr=1e-3)
        with forbid_float64():
            for _ in range(2):
                whole.zero_grad()
                whole.forward(*batch)
                whole.backward()
                clip_grad_norm(whole.model, 1.0)
                optimizer.step()
            whole.model.eval()
            if decoder_only:
                decoding.generate(whole.model, batch[0][:, :2], 3)
            else:
                decoding.greedy(whole.model, batch[0], 4)
                decoding.beam_search(whole.model, batch[0], beam_size=2, max_len=4)


def test_the_float64_sentinel_catches_an_upcast():
    from minitrans.core.strict import forbid_float64

    with minitrans.using("strict", dtype="float32"):
        x = minitrans.get_xp().ones(3, dtype="float32")
        with forbid_float64():
            x / 2.0  # a Python float adapts to the array: float32
            with pytest.raises(TypeError, match="float64"):
                x / np.sqrt(4)  # a NumPy float64 scalar does not: float64 under NumPy 2

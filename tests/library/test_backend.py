"""The backend module: choosing the array library, dtypes, moving arrays."""

import os
import subprocess
import sys
import types

import numpy as np
import pytest

import minitrans
from minitrans.core import backend
from minitrans.layers.linear import Linear
from minitrans.layers.positional import PositionalEncoding


def test_default_is_numpy_float32():
    code = "import minitrans; print(minitrans.core.backend.backend_name(), minitrans.get_dtype())"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINITRANS_")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.split() == ["numpy", "float32"]


def test_environment_variables_choose_backend_and_dtype():
    code = "import minitrans; print(minitrans.core.backend.backend_name(), minitrans.get_dtype())"
    env = dict(os.environ, MINITRANS_BACKEND="strict", MINITRANS_DTYPE="float64")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.split() == ["strict", "float64"]


def test_bad_environment_variable_names_it():
    code = "import minitrans; minitrans.get_xp()"
    env = dict(os.environ, MINITRANS_BACKEND="tpu")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode != 0
    assert "MINITRANS_BACKEND" in out.stderr and "'tpu'" in out.stderr


def test_unknown_backend_name_is_a_clear_error():
    with pytest.raises(ValueError, match=r"backend: expected one of .*got 'torch'"):
        minitrans.use("torch")


def test_unknown_dtype_is_a_clear_error():
    with pytest.raises(ValueError, match=r"dtype: expected one of .*float16"):
        minitrans.set_dtype("float16")
    with pytest.raises(ValueError, match="dtype"):
        minitrans.set_dtype("not a dtype")


def test_using_restores_the_previous_state_even_after_an_error():
    before = (backend.backend_name(), backend.get_dtype())
    with pytest.raises(RuntimeError):
        with minitrans.using("strict", dtype="float64"):
            assert (backend.backend_name(), backend.get_dtype()) == ("strict", np.float64)
            raise RuntimeError("boom")
    assert (backend.backend_name(), backend.get_dtype()) == before


def test_cupy_not_installed_says_so_and_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes `import cupy` fail
    with pytest.raises(backend.BackendUnavailableError) as error:
        minitrans.use("cupy")
    message = str(error.value)
    assert "not installed" in message
    assert 'pip install "minitrans[gpu-cuda12]" or "minitrans[gpu-cuda13]"' in message


def test_cupy_without_a_gpu_says_the_device_is_missing(monkeypatch):
    def no_device():
        raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")

    fake = types.ModuleType("cupy")
    fake.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=no_device))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    with pytest.raises(backend.BackendUnavailableError) as error:
        minitrans.use("cupy")
    message = str(error.value)
    assert "installed but no CUDA device" in message and "cudaErrorNoDevice" in message


def test_to_numpy_and_to_device_round_trip(backend_name):
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    on_device = minitrans.to_device(host)
    assert isinstance(on_device, backend.array_type())
    back = minitrans.to_numpy(on_device)
    assert type(back) is np.ndarray
    np.testing.assert_array_equal(back, host)


def test_to_device_casts_floats_but_keeps_integer_ids(backend_name):
    assert minitrans.to_device(np.ones(3), dtype="float32").dtype == np.float32
    assert minitrans.to_device(np.arange(3), dtype="float32").dtype == np.arange(3).dtype


def test_modules_move_between_host_and_device(backend_name):
    layer = Linear(3, 2, rng=0)
    encoding = PositionalEncoding(4, max_len=5)
    minitrans.to_numpy(layer)
    minitrans.to_numpy(encoding)
    assert all(type(v) is np.ndarray for v in layer.params.values())
    assert all(type(v) is np.ndarray for v in layer.grads.values())
    assert type(encoding.buffers["PE"]) is np.ndarray
    minitrans.to_device(layer)
    assert all(isinstance(v, backend.array_type()) for v in layer.params.values())
    x = minitrans.to_device(np.ones((2, 3), dtype=np.float32))
    assert layer.forward(x).shape == (2, 2)


def test_module_astype_casts_parameters_and_gradients(backend_name):
    layer = Linear(3, 2, rng=0)
    layer.astype("float64")
    assert {v.dtype for v in layer.params.values()} == {np.dtype("float64")}
    assert {v.dtype for v in layer.grads.values()} == {np.dtype("float64")}


def test_same_seed_gives_the_same_weights_on_every_backend():
    weights = {}
    for name in backend.available_backends():
        with minitrans.using(name):
            weights[name] = minitrans.to_numpy(Linear(5, 4, rng=42).params["W"])
    assert "strict" in weights
    for name, value in weights.items():
        np.testing.assert_array_equal(value, weights["numpy"], err_msg=name)


def test_different_seeds_give_different_weights():
    a = minitrans.to_numpy(Linear(5, 4, rng=1).params["W"])
    b = minitrans.to_numpy(Linear(5, 4, rng=2).params["W"])
    assert not np.array_equal(a, b)


def test_rng_argument_must_be_a_seed_or_generator():
    with pytest.raises(TypeError, match="rng"):
        Linear(3, 2, rng="seven")

"""Fused kernels (minitrans.core.fusion): one launch each on the strict
backend, a plain call on NumPy, cupy.fuse built once on CuPy; a wrong fused
body is caught by the comparison with the reference; on NumPy the fast set
still runs the fast versions."""

import numpy as np
import pytest

import minitrans
from minitrans.core import backend, fusion, kernels, launches
from minitrans.layers import dropout, feedforward, layernorm, loss_device, rmsnorm, rotary
from minitrans.ops import activations, softmax
from minitrans.training.optimisation import adam
from tests.library.test_kernels import CASES, DEVICE_PAIRS, Draw, fast_vs_reference_error


@fusion.fused("scale_and_shift")
def scale_and_shift(x, gamma, beta):
    """gamma * x + beta"""
    return gamma * x + beta


def test_a_fused_call_counts_as_one_launch_on_strict():
    with minitrans.using("strict"):
        d = Draw(0)
        x, gamma, beta = d.normal(4, 8), d.normal(8), d.normal(8)
        with launches.count_launches() as counted:
            y = scale_and_shift(x, gamma, beta)
        with launches.count_launches() as unfused:  # the plant: the body not fused
            scale_and_shift.body(x, gamma, beta)
    assert counted.places == ["fused scale_and_shift"]
    assert unfused.count != 1
    np.testing.assert_array_equal(minitrans.to_numpy(y), minitrans.to_numpy(gamma * x + beta))


def test_a_fused_call_is_a_plain_call_on_numpy():
    with minitrans.using("numpy"):
        with launches.count_launches() as counted:
            y = scale_and_shift(np.ones(3), 2.0, 1.0)
    assert counted.count == 0 and isinstance(y, np.ndarray)
    np.testing.assert_array_equal(y, [3.0, 3.0, 3.0])


@pytest.mark.parametrize("kernel, args, names", [
    (layernorm.layer_norm_device, lambda d: (d.normal(3, 8), d.normal(8), d.normal(8), 1e-5),
     ["layer_norm_inverse_std", "layer_norm_scale_shift"]),
    (rmsnorm.rms_norm_device, lambda d: (d.normal(3, 8), d.normal(8), 1e-5),
     ["rms_norm_inverse_rms", "rms_norm_scale"]),
    (adam.adam_update_device, lambda d: (d.normal(3, 8), d.normal(3, 8), d.normal(3, 8),
                                         d.normal(3, 8) ** 2, 2, 1e-3, (0.9, 0.98), 1e-9, 0.1),
     ["adam_step", "adam_apply_step"]),
    (softmax.attention_softmax_device, lambda d: (d.normal(2, 5, 6), d.mask(2, 5, 6), 0.5),
     ["softmax_row_max", "softmax_row_total", "softmax_normalise"]),
    (softmax.attention_softmax_device, lambda d: (d.normal(2, 5, 6),),
     ["softmax_row_max", "softmax_row_total", "softmax_normalise"]),
    (softmax.attention_softmax_backward_device,
     lambda d: (d.normal(2, 5, 6), d.normal(2, 5, 6), 0.5),
     ["softmax_backward_row_sums", "softmax_backward"]),
    (dropout.residual_dropout_device, lambda d: (d.normal(3, 8), d.normal(3, 8),
                                                 d.mask(3, 8), 1.25), ["residual_dropout"]),
    (dropout.dropout_scale_device, lambda d: (d.normal(3, 8), d.mask(3, 8), 1.25),
     ["dropout_scale"]),
    (feedforward.bias_relu_device, lambda d: (d.normal(3, 8), d.normal(8)), ["bias_relu"]),
    (feedforward.bias_relu_device, lambda d: (d.normal(3, 8), None), ["bias_relu"]),
    (feedforward.relu_backward_device, lambda d: (d.normal(3, 8), d.normal(3, 8)),
     ["relu_backward"]),
    (feedforward.bias_gelu_device, lambda d: (d.normal(3, 8), d.normal(8)), ["bias_gelu"]),
    (activations.gelu_backward.device,
     lambda d: (d.normal(3, 8), d.normal(3, 8), d.normal(3, 8)), ["gelu_backward"]),
    (loss_device.smoothed_cross_entropy_device,
     lambda d: (d.normal(3, 11), d.ids(11, 3), d.normal(3), 0.1),
     ["cross_entropy_exp_total", "cross_entropy_weighted_logits", "cross_entropy_loss"]),
    (loss_device.smoothed_cross_entropy_backward_device,
     lambda d: (1.0, d.normal(3, 11), d.normal(3, 1), d.ids(11, 3), d.normal(3), 0.1),
     ["cross_entropy_backward_kept"]),
    (loss_device.smoothed_cross_entropy_backward_device,
     lambda d: (1.0, loss_device.ShiftedLogits(d.normal(3, 11), d.normal(3, 1)),
                d.normal(3, 1), d.ids(11, 3), d.normal(3), 0.1),
     ["cross_entropy_backward"]),
    (rotary.rotate_pairs_device, lambda d: (d.normal(2, 5, 8), d.normal(5, 4), d.normal(5, 4)),
     ["rotate_pairs"]),
])
def test_each_device_version_launches_its_fused_kernels_once_each(kernel, args, names):
    with minitrans.using("strict"):
        inputs = args(Draw(0))
        with launches.count_launches() as counted:
            kernel(*inputs)
    assert [place for place in counted.places if place.startswith("fused")] == [
        f"fused {name}" for name in names]


# (the pair, its arguments, the launches of its device version on strict)
FEWER_LAUNCHES = [
    ("attention_softmax", lambda d: (d.normal(2, 5, 6), d.mask(2, 5, 6), 0.5), 3),
    ("attention_softmax_backward", lambda d: (d.normal(2, 5, 6), d.normal(2, 5, 6), 0.5), 2),
    ("residual_dropout", lambda d: (d.normal(3, 8), d.normal(3, 8), d.mask(3, 8), 1.25), 1),
    ("bias_relu", lambda d: (d.normal(3, 8), d.normal(8)), 1),
    ("relu_backward", lambda d: (d.normal(3, 8), d.normal(3, 8)), 1),
    ("smoothed_cross_entropy", lambda d: (d.normal(3, 11), d.ids(11, 3), d.normal(3), 0.1,
                                          d.normal(3, 11)), 4),
    ("smoothed_cross_entropy_backward", lambda d: (1.0, d.normal(3, 11), d.normal(3, 1),
                                                   d.ids(11, 3), d.normal(3), 0.1), 1),
    ("smoothed_cross_entropy_backward", lambda d: (
        1.0, loss_device.ShiftedLogits(d.normal(3, 11), d.normal(3, 1)), d.normal(3, 1),
        d.ids(11, 3), d.normal(3), 0.1), 1),
    ("sum_leading", lambda d: (d.normal(3, 8),), 1),
    ("rotate_pairs", lambda d: (d.normal(2, 5, 8), d.normal(5, 4), d.normal(5, 4)), 2),
    ("bias_gelu", lambda d: (d.normal(3, 8), d.normal(8)), 1),
    ("gelu_backward", lambda d: (d.normal(3, 8), d.normal(3, 8), d.normal(3, 8)), 1),
    ("swiglu_gate", lambda d: (d.normal(3, 8), d.normal(3, 8)), 1),
    ("swiglu_gate_backward", lambda d: (d.normal(3, 8), d.normal(3, 8), d.normal(3, 8),
                                        d.normal(3, 8)), 1),
]


@pytest.mark.parametrize("name, args, launched", FEWER_LAUNCHES)
def test_a_device_version_launches_fewer_kernels_than_the_fast_one(name, args, launched):
    """The count of each device version, and the fast version's on the same
    device as the comparison that shows it is fewer."""
    pair = kernels.PAIRS[name]
    with minitrans.using("strict"):
        pair.device(*args(Draw(0)))  # once first: what a version keeps (a range of ids) is made
        inputs, again = args(Draw(0)), args(Draw(0))  # the fast versions may write into theirs
        with launches.count_launches() as device:
            pair.device(*inputs)
        with launches.count_launches() as fast:
            pair.fast(*again)
    assert device.count == launched < fast.count, (device.summary(), fast.summary())


class FakeCupy:
    """Stands in for the cupy module: its ``fuse`` records each build."""

    def __init__(self):
        self.built = []

    def fuse(self, kernel_name):
        def build(body):
            self.built.append(kernel_name)
            return lambda *args: ("compiled", body(*args))
        return build


def test_on_cupy_the_body_is_compiled_once_by_cupy_fuse(monkeypatch):
    fake = FakeCupy()

    @fusion.fused("twice")
    def twice(x):
        return 2 * x

    monkeypatch.setattr(backend, "backend_name", lambda: "cupy")
    monkeypatch.setattr(backend, "get_xp", lambda: fake)
    assert twice(3) == ("compiled", 6) and twice(4) == ("compiled", 8)
    assert fake.built == ["twice"]  # built on the first call, then reused


class RefusingCupy(FakeCupy):
    """A cupy whose fuse cannot trace the body (as for an operation it lacks)."""

    def fuse(self, kernel_name):
        def build(body):
            def refuse(*args):
                raise TypeError(f"{kernel_name}: unsupported in fusion")
            return refuse
        return build


class WideningCupy(FakeCupy):
    """A cupy whose fused kernel gives float64 from float32 inputs."""

    def fuse(self, kernel_name):
        return lambda body: lambda *args: body(*args).astype(np.float64)


@pytest.mark.parametrize("fake, why", [(RefusingCupy(), "refused it: TypeError"),
                                       (WideningCupy(), "gave float64 from float32")])
def test_a_kernel_cupy_cannot_fuse_runs_as_its_body_and_is_named(monkeypatch, fake, why):
    @fusion.fused("halve")
    def halve(x):
        return x * 0.5

    monkeypatch.setattr(backend, "backend_name", lambda: "cupy")
    monkeypatch.setattr(backend, "get_xp", lambda: fake)
    monkeypatch.setattr(fusion, "FELL_BACK", {})
    x = np.arange(4, dtype=np.float32)
    for _ in range(2):  # the first call checks, the second runs the body
        y = halve(x)
        assert y.dtype == np.float32 and np.array_equal(y, x * 0.5)
    assert list(fusion.FELL_BACK) == ["halve"] and why in fusion.FELL_BACK["halve"]


def test_a_kernel_that_keeps_its_dtype_is_kept_compiled(monkeypatch):
    @fusion.fused("halve_kept")
    def halve(x):
        return x * 0.5

    fake = FakeCupy()
    monkeypatch.setattr(backend, "backend_name", lambda: "cupy")
    monkeypatch.setattr(backend, "get_xp", lambda: fake)
    monkeypatch.setattr(fusion, "FELL_BACK", {})
    fake.fuse = lambda kernel_name: (fake.built.append(kernel_name) or (lambda body: body))
    x = np.arange(4, dtype=np.float32)
    halve(x), halve(x)
    assert fake.built == ["halve_kept"] and not fusion.FELL_BACK


@fusion.fused("layer_norm_scale_shift")
def wrong_scale_shift(x, mu, inv_std, gamma, beta):
    """The plant: y off by one part in a million."""
    x_hat = (x - mu) * inv_std
    return (gamma * x_hat + beta) * (1 + 1e-6), x_hat


@pytest.mark.parametrize("name", ["numpy", "strict"])
def test_the_comparison_catches_a_wrong_fused_body(monkeypatch, name):
    with minitrans.using(name, dtype="float64"):
        assert fast_vs_reference_error("layer_norm", "device") < 1e-12
        monkeypatch.setattr(layernorm, "normalise_scale_shift", wrong_scale_shift)
        assert fast_vs_reference_error("layer_norm", "device") > 1e-7


@pytest.mark.parametrize("name", DEVICE_PAIRS)
def test_numpy_fast_set_runs_the_fast_versions_as_before(monkeypatch, name):
    pair = kernels.PAIRS[name]
    assert pair.fast is getattr(pair.fast, "__globals__")[pair.fast.__name__]

    def refuse(*args, **kwargs):
        raise AssertionError("the device version ran on numpy")

    monkeypatch.setattr(pair, "device", refuse)
    with minitrans.using("numpy", kernels="fast"):
        for case in CASES[name]:
            case(pair, Draw(0))
    with minitrans.using("strict", kernels="fast"), pytest.raises(AssertionError):
        CASES[name][0](pair, Draw(0))  # the same patch is seen on a device

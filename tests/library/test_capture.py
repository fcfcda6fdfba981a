"""The capture-safety check (minitrans.core.capture): a stretch recorded on
the strict backend and replayed as a CUDA graph would replay it, on the same
memory with the same Python numbers, compared with running it again."""

import numpy as np
import pytest

import minitrans
from minitrans.core import backend, capture, fusion
from minitrans.gradcheck import tiny_model
from minitrans.training.optimisation.adam import Adam
from minitrans.training.optimisation.adam_device import adam_step_of, apply_adam_step_device


@pytest.fixture
def xp():
    with minitrans.using("strict", dtype="float32"):
        yield backend.get_xp()


def _host(array):
    return minitrans.to_numpy(array)


def _sgd_stretch(xp, lr_on_device):
    """w -= lr * g, with lr halved at every step: read from a device array
    updated in place by prepare, or (the fault) passed as a Python float."""
    w, g = xp.ones(4), xp.asarray(np.arange(4, dtype=np.float32))
    lr_device, lr_number = xp.zeros(()), [0.0]

    def prepare(step):
        lr_number[0] = 0.1 / 2**step
        lr_device[...] = lr_number[0]

    def run():
        w[...] -= (lr_device if lr_on_device else lr_number[0]) * g

    return run, prepare, [w]


def test_a_step_value_read_from_a_device_array_replays_equal_to_eager(xp):
    check = capture.check_capture_safe(*_sgd_stretch(xp, lr_on_device=True), step=3)
    assert check.safe, check.report
    assert check.report == "capture-safe: 3 launches replayed at step 4 equal the eager run"


def test_a_step_value_passed_as_a_python_float_is_caught(xp):
    check = capture.check_capture_safe(*_sgd_stretch(xp, lr_on_device=False), step=3)
    assert not check.safe
    assert check.report == (
        "launch 1 of 3, multiply: replayed with 0.0125 frozen where the eager run at step 4 "
        "passes 0.00625: a Python number that changes with the step; read it from a device "
        "array updated in place")


def test_a_replay_writes_into_the_arrays_recorded_and_reads_inputs_anew(xp):
    x = xp.asarray(np.array([1.0, 2.0], dtype=np.float32))
    with capture.record_stretch() as stretch:
        y = x * 2  # allocated while recorded: the replay writes into this same array
        z = y + 1
    assert [operation.kind for operation in stretch.operations] == ["multiply", "add"]
    x[...] = xp.asarray(np.array([10.0, 20.0], dtype=np.float32))
    stretch.replay()
    np.testing.assert_array_equal(_host(y), [20.0, 40.0])
    np.testing.assert_array_equal(_host(z), [21.0, 41.0])


def test_a_host_sync_inside_makes_a_stretch_not_capturable(xp):
    x = xp.ones(3)

    def run():
        if float(x.sum()) > 0:  # a decision on the host: the CPU waits for the device
            x[...] = x * 2

    check = capture.check_capture_safe(run, lambda step: None, [x])
    assert not check.safe
    assert check.report.startswith("not capturable: it waits for the device at ")
    assert "test_capture.py:" in check.report and check.report.endswith("(float)")
    with capture.record_stretch() as stretch:
        run()
    with pytest.raises(capture.NotCapturable, match="a graph cannot stop for the host"):
        stretch.replay()


def test_a_random_draw_replays_the_numbers_it_drew_when_recorded(xp):
    # a graph freezes the generator's key and offset: a dropout mask drawn
    # inside a stretch would be the same at every replay
    rng, w = xp.random.default_rng(0), xp.zeros(3)

    def run():
        w[...] = rng.random(3, dtype="float32")

    check = capture.check_capture_safe(run, lambda step: None, [w])
    assert not check.safe
    assert check.report == ("launch 1 of 2, random.random: a random draw or a copy from the "
                            "host replays the values it had when recorded")


@fusion.fused("scaled_sum")
def _scaled_sum(a, b, scale):
    return (a + b) * scale


def test_a_fused_kernel_is_recorded_as_one_operation_and_replayed_whole(xp):
    a, b = xp.ones(3), xp.zeros(3)
    with capture.record_stretch() as stretch:
        out = _scaled_sum(a, b, 3.0)
        doubled = out * 2
    assert [operation.kind for operation in stretch.operations] == ["fused scaled_sum",
                                                                    "multiply"]
    assert [label for label, _ in stretch.leaves()] == [
        "fused scaled_sum: add", "fused scaled_sum: multiply", "multiply"]
    b[...] = xp.ones(3)
    stretch.replay()
    np.testing.assert_array_equal(_host(out), [6.0, 6.0, 6.0])  # (1 + 1) * 3, the 3 frozen
    np.testing.assert_array_equal(_host(doubled), [12.0, 12.0, 12.0])


def test_a_shape_that_depends_on_the_data_cannot_be_replayed(xp):
    x = xp.asarray(np.array([1.0, -1.0, 2.0], dtype=np.float32))
    with capture.record_stretch() as stretch:
        x[x > 0]  # as many numbers as are positive: 2 when recorded
    x[...] = xp.ones(3)
    with pytest.raises(capture.NotCapturable, match=r"gather: replayed, it gives shape \(3,\) "
                                                    r"where it was recorded with \(2,\)"):
        stretch.replay()


def _adam_after_one_step():
    """Adam on the tiny model after its first step (which makes m, v and the
    flat state), and every array its next step updates in place."""
    whole, batch = tiny_model(seed=5)
    optimizer = Adam(whole.model, lr=0.01, weight_decay=0.01)
    whole.forward(*batch)
    whole.backward()
    optimizer.step()
    assert optimizer.flat_gradient() is not None
    state = ([param for _, param, _ in optimizer.named_parameters()]
             + list(optimizer.m.values()) + list(optimizer.v.values()))
    return optimizer, state


def _adam_check(run_of):
    """check_capture_safe of ``run_of(optimizer, lr)``'s step, its learning
    rate and step count changed by prepare, as a schedule would change them."""
    optimizer, state = _adam_after_one_step()
    lr = [0.0]

    def prepare(step):
        optimizer.step_count, lr[0] = step, 0.01 / step
        optimizer.write_step_values(lr[0])  # before the graph: a copy from the host

    return optimizer, capture.check_capture_safe(lambda: run_of(optimizer, lr[0]), prepare,
                                                 state, step=2)


def test_adams_device_step_reads_its_step_values_from_device_arrays_and_replays():
    with minitrans.using("strict", dtype="float32", kernels="fast"):
        _, check = _adam_check(lambda optimizer, lr: optimizer.flat_device_step())
    assert check.safe, check.report


def _step_with_python_numbers(optimizer, lr):
    """The flat device step with lr, the bias corrections and the decay
    passed to the kernels as Python numbers: what a graph cannot replay."""
    flat = optimizer._flat
    step = adam_step_of(flat.grad, flat.m, flat.v, optimizer.step_count, lr,
                        (optimizer.beta1, optimizer.beta2), optimizer.eps)
    for param, piece in flat.steps(step):
        apply_adam_step_device(param, piece, lr * optimizer.weight_decay)


def test_adams_step_with_python_numbers_is_caught_at_its_frozen_bias_correction():
    with minitrans.using("strict", dtype="float32", kernels="fast"):
        optimizer, check = _adam_check(_step_with_python_numbers)
    m_hat_scale = [1.0 / (1.0 - optimizer.beta1**t) for t in (2, 3)]
    assert not check.safe
    assert (f", fused adam_step: multiply: replayed with {m_hat_scale[0]!r} frozen where the "
            f"eager run at step 3 passes {m_hat_scale[1]!r}") in check.report, check.report

"""Two families of launches on a device, counted on the strict backend: the
label-smoothed loss's forward in four kernels, each one reduction, with no
gather and no clipping of the targets (layers.loss_device), and gradient
clipping's scale applied inside Adam's one flat kernel rather than as a
pass of its own (optimisation.clipping, Adam.scale_gradients); with the
numbers of the NumPy path."""

import numpy as np
import pytest

import minitrans
from minitrans import LabelSmoothedCrossEntropy
from minitrans.core import backend, capture, launches
from minitrans.gradcheck import tiny_model
from minitrans.training.optimisation.adam import Adam
from minitrans.training.optimisation.adam_device import adam_update_flat_device
from minitrans.training.optimisation.clipping import clip_grad_norm
from minitrans.training.optimisation.optimizer import Optimizer

# the loss's four kernels, and the three around them: the tokens' weights
# (a count and a division) and the check of the targets and the loss
LOSS_FORWARD = ["fused cross_entropy_real_count", "fused cross_entropy_weights_float32",
                "max", "fused cross_entropy_exp_total", "fused cross_entropy_weighted_logits",
                "fused cross_entropy_loss", "fused cross_entropy_bad_values"]


def _loss_inputs(eps=0.1):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 6, 13)).astype(np.float32) * 3.0
    targets = rng.integers(0, 13, size=(4, 6))
    targets[:, -2:] = 0  # padding
    return logits, targets, LabelSmoothedCrossEntropy(eps, pad_id=0)


@pytest.mark.parametrize("eps", [0.1, 0.0])
def test_the_loss_forward_is_four_launches_and_three_around_them_on_a_device(eps):
    logits, targets, loss_fn = _loss_inputs(eps)
    with minitrans.using("strict", dtype="float32", kernels="fast"):
        device_logits, device_targets = backend.to_device(logits), backend.to_device(targets)
        loss_fn(device_logits, device_targets)  # once first: the ids 0..V-1 are made once
        with launches.count_launches() as forward:
            loss = loss_fn(device_logits, device_targets)
        with launches.count_launches() as backward:
            dlogits = loss_fn.backward()
        loss, dlogits = float(loss), minitrans.to_numpy(dlogits)
    assert forward.places == LOSS_FORWARD, forward.summary()
    assert backward.places == ["fused cross_entropy_backward"], backward.summary()
    with minitrans.using("numpy", dtype="float32"):
        host_fn = LabelSmoothedCrossEntropy(eps, pad_id=0)
        assert loss == pytest.approx(float(host_fn(logits, targets)), rel=1e-6)
        np.testing.assert_allclose(dlogits, host_fn.backward(), rtol=1e-5, atol=1e-8)


def test_no_device_kernel_indexes_with_a_target_out_of_range():
    """The layer refuses it, after the loss: until then nothing gathers."""
    logits, targets, loss_fn = _loss_inputs()
    targets[0, 0] = 13
    with minitrans.using("strict", dtype="float32", kernels="fast"):
        with pytest.raises(ValueError, match="targets"):
            loss_fn(backend.to_device(logits), backend.to_device(targets))


def _after_a_flat_adam_step():
    """Adam (AdamW) on the tiny model after its first step, which makes the
    flat state, and the gradients of a second batch, ready to clip."""
    whole, batch = tiny_model(seed=5)
    optimizer = Adam(whole.model, lr=0.01, weight_decay=0.01)
    for _ in range(2):
        optimizer.zero_grad()
        whole.forward(*batch)
        whole.backward()
        if optimizer.step_count == 0:
            optimizer.step()
    return optimizer


def _clipped_step(optimizer, max_norm):
    norm = clip_grad_norm(optimizer, max_norm)
    optimizer.step(0.01)
    return norm


def test_a_clipped_adam_step_launches_as_many_kernels_as_an_unclipped_one():
    """The norm's reduction is the only launch clipping adds: its scale is
    the fifth step value that Adam's kernel reads, not a pass over the
    gradients (which would be one launch more)."""
    with minitrans.using("strict", dtype="float32", kernels="fast"):
        counts = {}
        for name, max_norm in (("unclipped", None), ("clipped", 1e-3)):
            optimizer = _after_a_flat_adam_step()
            with launches.count_launches() as counts[name]:
                _clipped_step(optimizer, max_norm)
    assert counts["clipped"].places == counts["unclipped"].places == [
        "vdot", "transfer (set)", "fused adam_flat_update"], counts["clipped"].summary()


def _state_after_a_clipped_step(name, scale_in_memory=False):
    """Parameters, m and v (host copies) after a clipped second step on
    backend ``name``; ``scale_in_memory``: the gradients scaled in place
    before the step, as any optimiser does."""
    with minitrans.using(name, dtype="float32", kernels="fast"), pytest.MonkeyPatch.context() as mp:
        if scale_in_memory:
            mp.setattr(Adam, "scale_gradients", Optimizer.scale_gradients)
        optimizer = _after_a_flat_adam_step()
        norm = _clipped_step(optimizer, 1e-3)
        assert norm > 1e-3  # it did clip
        return [np.array(minitrans.to_numpy(array)) for array in (
            [param for _, param, _ in optimizer.named_parameters()]
            + list(optimizer.m.values()) + list(optimizer.v.values()))]


def test_the_scale_read_inside_the_kernel_gives_the_numbers_of_scaling_in_memory():
    """The same product, g times the scale rounded to float32, formed in
    the kernel instead of stored first: bit for bit on the device, and the
    NumPy path's numbers to float32's rounding."""
    inside = _state_after_a_clipped_step("strict")
    in_memory = _state_after_a_clipped_step("strict", scale_in_memory=True)
    assert all(np.array_equal(a, b) for a, b in zip(inside, in_memory))
    on_numpy = _state_after_a_clipped_step("numpy")
    for ours, theirs in zip(inside, on_numpy):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-6)


def test_the_comparison_catches_a_scale_left_out(monkeypatch):
    monkeypatch.setattr(Adam, "scale_gradients", lambda self, scale: None)
    left_out = _state_after_a_clipped_step("strict")
    monkeypatch.undo()
    assert not all(np.array_equal(a, b) for a, b in zip(left_out,
                                                        _state_after_a_clipped_step("strict")))


def _capture_check(run_of):
    """check_capture_safe of ``run_of(optimizer)``, Adam's device step, with
    the clipping scale changed by prepare from step to step."""
    with minitrans.using("strict", dtype="float32", kernels="fast"):
        optimizer = _after_a_flat_adam_step()
        state = ([param for _, param, _ in optimizer.named_parameters()]
                 + list(optimizer.m.values()) + list(optimizer.v.values()))

        def prepare(step):
            optimizer.step_count, optimizer.gradient_scale = step, 1.0 / (step + 1)
            optimizer.write_step_values(0.01)

        return capture.check_capture_safe(lambda: run_of(optimizer), prepare, state, step=2)


def _scale_as_a_python_number(optimizer):
    """The plant: the flat step with the clipping scale passed as a number."""
    flat = optimizer._flat
    values = [flat.step_values[i:i + 1] for i in range(4)]
    adam_update_flat_device(flat.param, flat.grad, flat.m, flat.v, flat.decay_mask,
                            optimizer.beta1, optimizer.beta2, *values[:3], optimizer.eps,
                            values[3], optimizer.gradient_scale)


def test_the_clipping_scale_is_read_from_device_memory_so_a_graph_replays():
    check = _capture_check(lambda optimizer: optimizer.flat_device_step())
    assert check.safe, check.report
    planted = _capture_check(_scale_as_a_python_number)
    assert not planted.safe and "frozen" in planted.report

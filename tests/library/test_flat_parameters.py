"""Adam's flat update on a device (minitrans.training.optimisation.flat_state and
adam_device): there the parameters become views of a flat array (on NumPy they
stay the model's own arrays), the whole update is one fused kernel, a replaced
parameter is followed, the numbers are those of the NumPy fast path, and the
moving average follows weights that became views."""

import numpy as np
import pytest

import minitrans
from minitrans.core import backend, launches
from minitrans.gradcheck import tiny_model
from minitrans.training.optimisation import flat_state
from minitrans.training.optimisation.adam import Adam
from minitrans.training.optimisation.adam_device import adam_step_device, apply_adam_step_device
from minitrans.training.optimisation.averaging import WeightAverage, decay_at
from tests.library.test_flat_state import assert_same_state, train


def _host(array):
    return np.array(minitrans.to_numpy(array))


def _after_one_step(lr=0.01, weight_decay=0.01):
    """The tiny model, its batch and an Adam optimiser after its first step
    (which makes the flat state)."""
    whole, batch = tiny_model(seed=5)
    optimizer = Adam(whole.model, lr=lr, weight_decay=weight_decay)
    whole.forward(*batch)
    whole.backward()
    optimizer.step()
    return whole, batch, optimizer


def _apply_parameter_by_parameter(optimizer):
    """The plant: the flat device step with one kernel per parameter for
    ``param -= step``, after one kernel for the moments and the step."""
    flat = optimizer._flat
    lr, m_hat_scale, v_hat_scale, decay = (flat.step_values[i:i + 1] for i in range(4))
    step = adam_step_device(flat.grad, flat.m, flat.v, optimizer.beta1, optimizer.beta2, lr,
                            m_hat_scale, v_hat_scale, optimizer.eps)
    for param, piece in flat.steps(step):
        apply_adam_step_device(param, piece, decay)


def test_a_device_adam_step_is_at_most_three_launches(monkeypatch):
    with minitrans.using("strict", dtype="float32", kernels="fast"):
        optimizer = _after_one_step()[2]
        with launches.count_launches() as counted:
            optimizer.step()
        monkeypatch.setattr(Adam, "flat_device_step", _apply_parameter_by_parameter)
        with launches.count_launches() as per_parameter:
            optimizer.step()
    assert counted.count <= 3, counted.places
    assert "fused adam_flat_update" in counted.places
    assert per_parameter.count >= len(optimizer.slots) > 3  # the check catches the plant


def test_on_a_device_the_parameters_become_views_and_on_numpy_stay_the_models(backend_name):
    whole, batch = tiny_model(seed=5)
    before = {name: param for name, param, _ in whole.model.named_parameters()}
    optimizer = Adam(whole.model, lr=0.01)
    whole.forward(*batch)
    whole.backward()
    optimizer.step()
    flat, params = optimizer._flat, dict((n, p) for n, p, _ in whole.model.named_parameters())
    if not backend.on_device():
        assert flat.param is None and flat.decay_mask is None
        assert all(params[name] is before[name] for name in params)
        return
    assert not any(params[name] is before[name] for name in params)
    flat.param.fill(3.0)  # every parameter is a view of the flat array
    assert all((_host(param) == 3.0).all() for param in params.values())
    assert (_host(flat.decay_mask) == 1.0).all()  # every parameter decayed, as on the CPU


def _replace_a_weight(optimizer, model):
    """A new array for a weight, with other values, as a checkpoint load or a
    move to another backend would put there."""
    module = model.output_projection
    module.params["W"] = module.params["W"] + 0.25


def test_a_replaced_parameter_is_followed_and_the_step_stays_right(backend_name):
    flat = train(flat=True, between=_replace_a_weight)
    assert flat[3]._flat is not None
    assert_same_state(flat, train(flat=False, between=_replace_a_weight))
    if backend.on_device():  # the replacement's values now sit in a new flat array
        assert flat[3]._flat.param is not None
        assert flat[3]._flat.current(flat[3].m, flat[3].v)


def test_the_replacement_check_catches_a_replacement_left_unnoticed(monkeypatch):
    """The plant: a flat state that never notices a replaced parameter
    updates the array the model no longer holds."""
    monkeypatch.setattr(flat_state.FlatState, "current", lambda self, m, v: True)
    with minitrans.using("strict", dtype="float32"):
        flat = train(flat=True, between=_replace_a_weight)
        with pytest.raises(AssertionError):
            assert_same_state(flat, train(flat=False, between=_replace_a_weight))


def _after_three_steps(name, weight_decay=0.01):
    """Parameters, m and v (on the host, in that order) after three Adam
    steps of the tiny model on backend ``name`` in float64, from the same
    drawn gradients on every backend."""
    with minitrans.using(name, dtype="float64", kernels="fast"):
        whole = tiny_model(seed=5)[0]
        optimizer = Adam(whole.model, lr=0.01, weight_decay=weight_decay)
        rng = np.random.default_rng(3)
        for _ in range(3):
            for _, _, grad in optimizer.named_parameters():
                grad[...] = backend.to_device(rng.normal(size=grad.shape))
            optimizer.step()
        assert optimizer._flat is not None  # the flat update ran
        return ([_host(param) for _, param, _ in optimizer.named_parameters()]
                + [_host(m) for m in optimizer.m.values()]
                + [_host(v) for v in optimizer.v.values()])


def _worst_relative_error(ours, theirs):
    return max(np.abs(a - b).max() / max(np.abs(b).max(), np.finfo(np.float64).tiny)
               for a, b in zip(ours, theirs))


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_the_flat_device_update_gives_the_numpy_fast_paths_numbers(weight_decay):
    strict = _after_three_steps("strict", weight_decay)
    assert _worst_relative_error(strict, _after_three_steps("numpy", weight_decay)) < 1e-12


def test_the_comparison_catches_a_decay_left_out(monkeypatch):
    """The plant: a device decay mask that decays nothing."""
    monkeypatch.setattr(flat_state.FlatState, "_decay_mask",
                        lambda self, dtype: backend.get_xp().zeros(self.bounds[-1][1], dtype))
    strict = _after_three_steps("strict")
    assert _worst_relative_error(strict, _after_three_steps("numpy")) > 1e-6


def test_the_moving_average_follows_weights_that_became_views(backend_name):
    whole, batch = tiny_model(seed=5)
    optimizer = Adam(whole.model, lr=0.01)
    average = WeightAverage(whole.model, 0.5)  # made before the first step, as a trainer does
    expected = {name: _host(param) for name, param, _ in whole.model.named_parameters()}
    for step in (1, 2):
        optimizer.zero_grad()
        whole.forward(*batch)
        whole.backward()
        optimizer.step()
        average.update(step)
        keep = decay_at(0.5, step)
        expected = {name: keep * expected[name] + (1 - keep) * _host(param)
                    for name, param, _ in whole.model.named_parameters()}
    for name, value, _ in average.model.named_parameters():
        np.testing.assert_allclose(_host(value), expected[name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)

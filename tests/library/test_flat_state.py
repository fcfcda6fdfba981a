"""Adam on flat arrays (minitrans.training.optimisation.flat_state): the same numbers as
the per-parameter update, bit for bit, and every replaced array followed."""

import copy

import numpy as np
import pytest

import minitrans
from minitrans.core import backend
from minitrans.gradcheck import tiny_model
from minitrans.training.optimisation import adam, flat_state
from minitrans.training.optimisation.adam import Adam


def train(flat, steps=3, block_bytes=64, weight_decay=0.01, between=None):
    """Parameters, m and v after ``steps`` Adam steps of the tiny model, on
    flat arrays or parameter by parameter; ``between(optimizer, model)``
    runs after the second step."""
    whole, batch = tiny_model(seed=5)
    optimizer = Adam(whole.model, lr=0.01, weight_decay=weight_decay)
    optimizer.BLOCK_BYTES = block_bytes  # 16 float32 numbers: many blocks
    if not flat:
        optimizer.FLAT_NUMBERS = -1
    for step in range(steps):
        optimizer.zero_grad()
        whole.forward(*batch)
        whole.backward()
        optimizer.step()
        if step == 1 and between:
            between(optimizer, whole.model)
    host = [minitrans.to_numpy(p).copy() for _, p, _ in whole.model.named_parameters()]
    return host, {name: minitrans.to_numpy(m).copy() for name, m in optimizer.m.items()}, \
        {name: minitrans.to_numpy(v).copy() for name, v in optimizer.v.items()}, optimizer


def assert_same_state(ours, theirs):
    params, m, v, _ = ours
    their_params, their_m, their_v, _ = theirs
    assert all(np.array_equal(a, b) for a, b in zip(params, their_params))
    assert m.keys() == their_m.keys() and v.keys() == their_v.keys()
    assert all(np.array_equal(m[name], their_m[name]) for name in m)
    assert all(np.array_equal(v[name], their_v[name]) for name in v)


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_flat_adam_gives_the_per_parameter_numbers_bit_for_bit(backend_name, weight_decay):
    flat = train(flat=True, weight_decay=weight_decay)
    assert flat[3]._flat is not None  # it did run on flat arrays
    assert_same_state(flat, train(flat=False, weight_decay=weight_decay))


def test_the_check_fails_on_a_wrong_update(backend_name):
    """The comparison above catches a flat update that is off by a little."""
    flat = train(flat=True)
    flat[0][0][...] += 1e-6 * np.abs(flat[0][0]).max()
    with pytest.raises(AssertionError):
        assert_same_state(flat, train(flat=False))


def test_replaced_arrays_are_followed(backend_name):
    def load_state_and_replace_a_gradient(optimizer, model):
        optimizer.load_state_dict(copy.deepcopy(optimizer.state_dict()))  # new m and v arrays
        module = model.output_projection
        module.grads["b"] = minitrans.get_xp().zeros_like(module.grads["b"])

    flat = train(flat=True, between=load_state_and_replace_a_gradient)
    assert flat[3]._flat is not None
    assert_same_state(flat, train(flat=False, between=load_state_and_replace_a_gradient))


def test_gradients_become_views(backend_name):
    """(The parameters: tests/library/test_flat_parameters.py.)"""
    whole, batch = tiny_model(seed=5)
    optimizer = Adam(whole.model, lr=0.01)
    whole.forward(*batch)
    whole.backward()
    optimizer.step()
    optimizer._flat.grad.fill(2.0)  # every gradient is a view of the flat array
    for _, _, grad in whole.model.named_parameters():
        assert (minitrans.to_numpy(grad) == 2.0).all()
    optimizer.zero_grad()
    assert not minitrans.to_numpy(optimizer._flat.grad).any()


def test_a_large_model_or_the_reference_kernels_update_parameter_by_parameter(backend_name):
    whole = tiny_model(seed=5)[0]
    optimizer = Adam(whole.model, lr=0.01)
    optimizer.FLAT_NUMBERS = whole.model.num_parameters() - 1
    optimizer.step()
    assert optimizer._flat is None
    optimizer.FLAT_NUMBERS = whole.model.num_parameters()
    with minitrans.using(kernels="reference"):
        optimizer.step()
    assert optimizer._flat is None
    optimizer.step()
    assert optimizer._flat is not None


# ---- decay="matrices": AdamW's decay on matrices only, on every path of the update

# (backend, whether the flat update runs): the flat CPU update, the flat
# device update (one kernel with its decay mask), and the per-parameter update
PATHS = [("numpy", True), ("strict", True), ("numpy", False), ("strict", False)]


def after_drawn_gradients(name, flat, weight_decay, decay):
    """Parameters (on the host, by name) after three Adam steps of the tiny
    model on backend ``name`` in float64, from the same drawn gradients
    whatever the parameters (so that a decay changes only what it decays)."""
    with minitrans.using(name, dtype="float64", kernels="fast"):
        whole = tiny_model(seed=5)[0]
        optimizer = Adam(whole.model, lr=0.01, weight_decay=weight_decay, decay=decay)
        if not flat:
            optimizer.FLAT_NUMBERS = -1
        rng = np.random.default_rng(3)
        for _ in range(3):
            for _, _, grad in optimizer.named_parameters():
                grad[...] = backend.to_device(rng.normal(size=grad.shape))
            optimizer.step()
        assert (optimizer._flat is not None) == flat  # the path asked for ran
        return {key: minitrans.to_numpy(p).copy() for key, p, _ in optimizer.named_parameters()}


def assert_only_matrices_decayed(name, flat):
    """decay="matrices": every matrix as decay="all" leaves it, every vector
    (bias, norm) as no decay at all leaves it, bit for bit."""
    matrices = after_drawn_gradients(name, flat, 0.1, "matrices")
    decayed = after_drawn_gradients(name, flat, 0.1, "all")
    undecayed = after_drawn_gradients(name, flat, 0.0, "all")
    assert {p.ndim >= 2 for p in matrices.values()} == {True, False}  # both kinds
    assert not any(np.array_equal(decayed[key], undecayed[key]) for key in decayed)
    for key, value in matrices.items():
        assert np.array_equal(value, decayed[key] if value.ndim >= 2 else undecayed[key]), key


@pytest.mark.parametrize("name, flat", PATHS)
def test_decay_matrices_leaves_biases_and_norms_undecayed_on_every_path(name, flat):
    assert_only_matrices_decayed(name, flat)


@pytest.mark.parametrize("name, flat", PATHS)
def test_the_decay_check_fails_a_path_that_decays_everything(name, flat, monkeypatch):
    """The plant: the rule read as "all" whatever ``decay`` says."""
    def everything(name, param, decay="all"):
        return True
    monkeypatch.setattr(flat_state, "is_decayed", everything)
    monkeypatch.setattr(adam, "is_decayed", everything)
    with pytest.raises(AssertionError):
        assert_only_matrices_decayed(name, flat)


def test_the_decay_check_fails_a_device_kernel_that_ignores_its_mask(monkeypatch):
    """The plant: the flat device update's mask all ones, the rule itself right."""
    monkeypatch.setattr(flat_state.FlatState, "_decay_mask",
                        lambda self, dtype: backend.get_xp().ones(
                            self.bounds[-1][1], dtype))
    assert_only_matrices_decayed("numpy", True)  # the CPU's flat update does not use it
    with pytest.raises(AssertionError):
        assert_only_matrices_decayed("strict", True)


def test_the_decay_rule():
    matrix, vector = np.zeros((2, 3)), np.zeros(3)
    assert flat_state.is_decayed("W", matrix) and flat_state.is_decayed("b", vector)
    assert flat_state.is_decayed("W", matrix, "matrices")
    assert not flat_state.is_decayed("b", vector, "matrices")

"""Adam, AdamW, SGD, gradient clipping and the paper's schedule, checked
against values computed by hand from the update equations."""

import math

import numpy as np
import pytest

import minitrans
from minitrans.core import launches
from minitrans.gradcheck import tiny_model
from minitrans.layers.module import Module
from minitrans.training.optimisation.adam import Adam
from minitrans.training.optimisation import clipping
from minitrans.training.optimisation.clipping import clip_grad_norm, global_grad_norm
from minitrans.training.optimisation.schedule import cosine_lr, transformer_lr
from minitrans.training.optimisation.sgd import SGD


class Params(Module):
    """A 'model' that is just parameters, with gradients we set by hand."""

    def __init__(self, **values):
        super().__init__()
        for name, value in values.items():
            self.add_param(
                name,
                minitrans.to_device(np.asarray(value, dtype=float), dtype=minitrans.get_dtype()),
            )

    def set_grads(self, **values):
        for name, value in values.items():
            self.grads[name][...] = minitrans.to_device(
                np.asarray(value, dtype=float), dtype=minitrans.get_dtype()
            )


def adam_by_hand(w, grads, lr, beta1=0.9, beta2=0.98, eps=1e-9, weight_decay=0.0):
    m = v = 0.0
    for t, g in enumerate(grads, start=1):
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        m_hat, v_hat = m / (1 - beta1**t), v / (1 - beta2**t)
        w = w - lr * (m_hat / (math.sqrt(v_hat) + eps) + weight_decay * w)
    return w


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_three_adam_steps_match_the_equations(float64, weight_decay):
    model = Params(w=[1.0, -2.0])
    optimizer = Adam(model, lr=0.1, weight_decay=weight_decay)
    gradients = [[0.5, -1.0], [0.25, 3.0], [-0.5, 0.1]]
    for g in gradients:
        model.set_grads(w=g)
        optimizer.step()
    for i, w0 in enumerate([1.0, -2.0]):
        expected = adam_by_hand(w0, [g[i] for g in gradients], lr=0.1, weight_decay=weight_decay)
        assert float(model.params["w"][i]) == pytest.approx(expected, rel=1e-12)


def test_the_first_adam_step_has_size_lr_whatever_the_gradient_scale(float64):
    model = Params(a=[0.0], b=[0.0])
    model.set_grads(a=[1e-3], b=[1e6])
    Adam(model, lr=0.01).step()
    np.testing.assert_allclose(minitrans.to_numpy(model.params["a"]), [-0.01], rtol=1e-5)
    np.testing.assert_allclose(minitrans.to_numpy(model.params["b"]), [-0.01], rtol=1e-12)


def test_adam_keeps_float32(backend_name):
    model = Params(w=[1.0, 2.0])
    model.set_grads(w=[0.1, 0.2])
    Adam(model, lr=0.1).step()
    assert model.params["w"].dtype == np.float32


def test_adam_resumed_from_its_state_continues_exactly(float64):
    straight, resumed = Params(w=[1.0, -1.0]), Params(w=[1.0, -1.0])
    first = Adam(straight, lr=0.1)
    for model, optimizer in ((straight, first), (resumed, Adam(resumed, lr=0.1))):
        model.set_grads(w=[0.3, 0.1])
        optimizer.step()
    copy = Adam(resumed, lr=0.1)
    copy.load_state_dict(first.state_dict())
    for model, optimizer in ((straight, first), (resumed, copy)):
        model.set_grads(w=[-0.2, 0.4])
        optimizer.step()
    np.testing.assert_array_equal(
        minitrans.to_numpy(resumed.params["w"]), minitrans.to_numpy(straight.params["w"])
    )
    assert set(first.state_dict()) == {"step", "m/w", "v/w"}


def test_sgd_with_and_without_momentum(float64):
    model = Params(w=[1.0])
    optimizer = SGD(model, lr=0.5, momentum=0.9)
    for g in ([1.0], [1.0]):
        model.set_grads(w=g)
        optimizer.step()
    # v1 = 1, w = 1 - 0.5; v2 = 0.9 + 1, w = 0.5 - 0.5 * 1.9
    assert float(model.params["w"][0]) == pytest.approx(0.5 - 0.95)
    plain = Params(w=[1.0])
    plain.set_grads(w=[2.0])
    SGD(plain, lr=0.25).step()
    assert float(plain.params["w"][0]) == pytest.approx(0.5)


def test_clipping_scales_to_the_limit_and_keeps_direction(float64):
    model = Params(a=[3.0], b=[0.0])
    model.set_grads(a=[3.0], b=[4.0])  # global norm 5
    assert clip_grad_norm(model, 1.0) == pytest.approx(5.0)
    np.testing.assert_allclose(minitrans.to_numpy(model.grads["a"]), [0.6])
    np.testing.assert_allclose(minitrans.to_numpy(model.grads["b"]), [0.8])
    assert global_grad_norm(model) == pytest.approx(1.0)
    assert clip_grad_norm(model, 10.0) == pytest.approx(1.0)  # below the limit: unchanged
    np.testing.assert_allclose(minitrans.to_numpy(model.grads["b"]), [0.8])


def test_the_paper_schedule():
    d_model, warmup = 512, 4000
    assert transformer_lr(1, d_model, warmup) == pytest.approx(d_model**-0.5 * warmup**-1.5)
    peak = transformer_lr(warmup, d_model, warmup)
    assert peak == pytest.approx((d_model * warmup) ** -0.5)
    assert (
        transformer_lr(warmup - 1, d_model, warmup)
        < peak
        > transformer_lr(warmup + 1, d_model, warmup)
    )
    assert transformer_lr(4 * warmup, d_model, warmup) == pytest.approx(peak / 2)
    assert transformer_lr(10, 64, 100, factor=2.0) == pytest.approx(2 * 64**-0.5 * 10 * 100**-1.5)
    with pytest.raises(ValueError, match="step"):
        transformer_lr(0, d_model, warmup)


def gpt_lr_directly(step, peak=1e-3, min_lr=1e-4, warmup=100, total=2000):
    """GPT's schedule written another way: (1 + cos(pi p)) / 2 = cos(pi p / 2)^2."""
    if step <= warmup:
        return peak * step / warmup
    p = min(1.0, (step - warmup) / (total - warmup))
    return min_lr + (peak - min_lr) * math.cos(math.pi * p / 2) ** 2


def assert_gpt_schedule(schedule):
    """``schedule`` at warm-up, peak, halfway, end and past the end: the direct
    formula's values, and the landmarks' values by name."""
    steps = [1, 50, 99, 100, 101, 1050, 1999, 2000, 2001, 10**6]
    for step in steps:
        assert schedule(step, 1e-3, 1e-4, 100, 2000) == pytest.approx(
            gpt_lr_directly(step), rel=1e-12, abs=0), step
    landmarks = {1: 1e-5, 100: 1e-3, 1050: 5.5e-4, 2000: 1e-4, 2001: 1e-4}
    for step, expected in landmarks.items():
        assert schedule(step, 1e-3, 1e-4, 100, 2000) == pytest.approx(expected, rel=1e-12), step


def test_the_gpt_schedule():
    assert_gpt_schedule(cosine_lr)
    assert cosine_lr(7, 1e-3, 1e-4, 0, 10) < cosine_lr(6, 1e-3, 1e-4, 0, 10)  # no warm-up
    assert cosine_lr(5, 1e-3, 1e-4, 10, 10) == pytest.approx(5e-4)  # warm-up to the end


@pytest.mark.parametrize("wrong", [
    lambda step, peak, min_lr, warmup, total:  # a cosine that starts a step late
        cosine_lr(max(1, step - 1), peak, min_lr, warmup, total) if step > warmup
        else cosine_lr(step, peak, min_lr, warmup, total),
    lambda step, peak, min_lr, warmup, total:  # a full period instead of half
        min_lr + (peak - min_lr) * 0.5 * (1 + math.cos(
            2 * math.pi * min(1, (step - warmup) / (total - warmup))))
        if step > warmup else peak * step / warmup,
    lambda step, peak, min_lr, warmup, total:  # decays to 0, past the end too
        cosine_lr(step, peak, 0.0, warmup, total),
])
def test_the_schedule_check_fails_a_wrong_schedule(wrong):
    with pytest.raises(AssertionError):
        assert_gpt_schedule(wrong)


@pytest.mark.parametrize("arguments, name", [
    ((0, 1e-3, 1e-4, 100, 2000), "step"), ((1, 0.0, 0.0, 100, 2000), "peak"),
    ((1, 1e-3, 2e-3, 100, 2000), "min_lr"), ((1, 1e-3, 1e-4, -1, 2000), "warmup"),
    ((1, 1e-3, 1e-4, 100, 99), "total"), ((1, 1e-3, float("nan"), 100, 2000), "min_lr"),
])
def test_bad_schedule_arguments_are_named(arguments, name):
    with pytest.raises((ValueError, TypeError), match=name):
        cosine_lr(*arguments)


def test_bad_optimiser_arguments(float64):
    model = Params(w=[1.0])
    with pytest.raises(ValueError, match="betas"):
        Adam(model, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="weight_decay"):
        Adam(model, weight_decay=-1.0)
    with pytest.raises(ValueError, match="decay: expected one of .'all', 'matrices'.*'foo'"):
        Adam(model, weight_decay=0.1, decay="foo")
    with pytest.raises(ValueError, match="lr"):
        Adam(model).step(lr=0.0)


@pytest.mark.parametrize("optimizer_type", ["Adam", "SGD"])
def test_updating_on_several_threads_and_in_blocks_gives_the_same_parameters_bit_for_bit(
    backend_name, optimizer_type
):
    from minitrans.gradcheck import tiny_model

    results = []
    # one thread and whole parameters; three threads and blocks of 64 bytes
    # (16 float32 numbers), so that every weight matrix is cut into blocks
    for threads, block_bytes in ((1, 2**30), (3, 64)):
        whole, batch = tiny_model(seed=5)
        options = {"momentum": 0.9} if optimizer_type == "SGD" else {}
        optimizer_class = {"Adam": Adam, "SGD": SGD}[optimizer_type]
        optimizer = optimizer_class(whole.model, lr=0.01, threads=threads, **options)
        optimizer.BLOCK_BYTES = block_bytes
        optimizer.THREADED_NUMBERS = 0  # on the threads, small as the model is
        optimizer.FLAT_NUMBERS = -1  # SGD has no flat update; Adam's is tested on its own
        for _ in range(3):
            whole.zero_grad()
            whole.forward(*batch)
            whole.backward()
            optimizer.step()
        results.append([minitrans.to_numpy(p).copy() for _, p, _ in whole.model.named_parameters()])
    assert all(np.array_equal(a, b) for a, b in zip(*results))


def test_a_small_model_is_updated_on_one_thread_a_large_one_on_all(monkeypatch):
    """Below THREADED_NUMBERS numbers one thread updates everything; from
    there on the pieces are dealt out to every thread, one task each."""
    import threading

    from minitrans.gradcheck import tiny_model

    model = tiny_model(seed=5)[0].model
    ran_on = []
    update = Adam.update

    def spied(self, *args, **kwargs):
        ran_on.append(threading.current_thread().name)
        return update(self, *args, **kwargs)

    monkeypatch.setattr(Adam, "update", spied)
    optimizer = Adam(model, lr=0.01, threads=2)
    optimizer.BLOCK_BYTES = 64
    optimizer.FLAT_NUMBERS = 0  # the per-parameter update, which these threads run
    assert model.num_parameters() < optimizer.THREADED_NUMBERS
    optimizer.step()
    assert set(ran_on) == {threading.current_thread().name}
    ran_on.clear()
    optimizer.THREADED_NUMBERS = model.num_parameters()  # as if it were large enough
    optimizer.step()
    assert threading.current_thread().name in ran_on
    assert any(name.startswith("minitrans-optimizer") for name in ran_on)


def test_threads_must_be_a_positive_integer():
    from minitrans.gradcheck import tiny_model

    with pytest.raises(ValueError, match="threads"):
        Adam(tiny_model()[0].model, threads=0)


def test_a_blocked_update_reaches_every_element_of_a_strided_or_large_parameter():
    """Blocks of a large parameter cover it all; a gradient that is not
    contiguous (so reshape would copy) makes the parameter update whole."""
    from minitrans.layers.module import Module

    model = Module()
    model.add_param("big", np.zeros((10, 7), dtype=np.float32))
    optimizer = SGD(model, lr=1.0, threads=2)
    optimizer.BLOCK_BYTES = 12  # three numbers: 24 blocks, the last one short
    model.grads["big"][...] = 1.0
    optimizer.step()
    np.testing.assert_array_equal(model.params["big"], -1.0)
    model.grads["big"] = np.ones((7, 10), dtype=np.float32).T  # a transposed view
    optimizer.step()
    np.testing.assert_array_equal(model.params["big"], -2.0)


class TwoLayers(Module):
    """Parameters in a child and in a list of children, as a model has them."""

    def __init__(self):
        super().__init__()
        self.first = Params(W=[[1.0, 2.0]], b=[0.5])
        self.layers = [Params(gamma=[1.0, 1.0]), Params(beta=[0.0])]


def test_the_optimiser_walks_the_tree_once_and_follows_replaced_arrays(float64):
    model = TwoLayers()
    optimizer = Adam(model, lr=0.1)
    by_model = [(name, id(param), id(grad)) for name, param, grad in model.named_parameters()]
    by_optimizer = [(name, id(param), id(grad))
                    for name, param, grad in optimizer.named_parameters()]
    assert by_optimizer == by_model and len(by_model) == 4
    for _, _, grad in model.named_parameters():
        grad[...] = 3.0
    model.layers[1].params["beta"] = minitrans.to_device(np.array([7.0]))  # as a load replaces it
    model.layers[1].grads["beta"] = minitrans.to_device(np.array([4.0]))
    assert clip_grad_norm(optimizer, None) == pytest.approx(clip_grad_norm(model, None))
    optimizer.step()
    assert float(model.layers[1].params["beta"][0]) == pytest.approx(7.0 - 0.1)  # the new array
    optimizer.zero_grad()
    assert all(not minitrans.to_numpy(grad).any() for _, _, grad in model.named_parameters())


def test_the_fast_adam_update_overwrites_its_scratch_without_reading_it(float64):
    """The scratch may hold anything: NaN in it changes nothing."""
    from minitrans.training.optimisation.adam import adam_update_fast

    rng = np.random.default_rng(0)
    start = [rng.standard_normal((4, 3)) for _ in range(3)]
    results = []
    for scratch in (None, minitrans.to_device(np.full((4, 3), np.nan))):
        param, grad, m = (minitrans.to_device(a.copy()) for a in start)
        v = m**2
        adam_update_fast(param, grad, m, v, 3, 1e-3, (0.9, 0.98), 1e-9, 0.01, scratch=scratch)
        results.append([minitrans.to_numpy(a) for a in (param, m, v)])
    for fresh, reused in zip(*results):
        np.testing.assert_array_equal(fresh, reused)


def test_each_optimiser_thread_reuses_one_scratch_array_from_step_to_step():
    """The per-parameter update (blocks on threads, on the CPU) works in one
    scratch array per thread, made at the first step and the same ones
    after: no fresh memory per block, and no array shared by two threads."""
    with minitrans.using("numpy", dtype="float64"):
        _check_scratch_reuse()


def _check_scratch_reuse():
    model = Params(a=np.ones(3000), b=np.ones((40, 50)), c=np.ones(7))
    optimizer = Adam(model, lr=0.1, threads=2)
    optimizer.FLAT_NUMBERS = -1  # per parameter, not flat
    optimizer.THREADED_NUMBERS = 0  # on both threads whatever the size
    optimizer.BLOCK_BYTES = 1000 * 8  # blocks of 1000 float64 numbers
    model.set_grads(a=np.full(3000, 0.5), b=np.full((40, 50), -0.5), c=np.full(7, 2.0))
    optimizer.step()
    first = dict(optimizer._scratch)
    assert 1 <= len(first) <= 2 and all(buffer.size == 1000 for buffer in first.values())
    optimizer.step()
    assert optimizer._scratch.keys() == first.keys()
    assert all(optimizer._scratch[thread] is first[thread] for thread in first)
    expected = adam_by_hand(1.0, [0.5, 0.5], lr=0.1)
    np.testing.assert_allclose(minitrans.to_numpy(model.params["a"]), expected, rtol=1e-12)


def _after_a_flat_adam_step():
    whole, batch = tiny_model(seed=5)
    optimizer = Adam(whole.model, lr=0.01)
    for _ in range(2):  # the first step makes the flat arrays
        optimizer.zero_grad()
        whole.forward(*batch)
        whole.backward()
        optimizer.step()  # leaves the gradients, views of the flat one, as they are
    return optimizer


def test_on_a_device_flat_gradients_are_clipped_in_one_launch():
    """The norm over the flat gradient equals the per-gradient norm, and
    clipping is that one launch, where the gradients apart take two each
    (164 for the tiny model): Adam records the scale for its next step's
    kernel, and the norm counts it in until then."""
    with minitrans.using("strict"):
        optimizer = _after_a_flat_adam_step()
        assert optimizer.flat_gradient() is not None
        grads = [g for _, _, g in optimizer.named_parameters()]
        by_gradient = float(np.sqrt(sum(float((g * g).sum()) for g in grads)))
        before = [minitrans.to_numpy(g).copy() for g in grads]
        with launches.count_launches() as counted:
            norm = clip_grad_norm(optimizer, by_gradient / 2)
        assert norm == pytest.approx(by_gradient, rel=1e-5)
        assert counted.places == ["vdot"], counted.summary()
        assert optimizer.gradient_scale == pytest.approx(0.5, rel=1e-5)
        assert global_grad_norm(optimizer) == pytest.approx(by_gradient / 2, rel=1e-5)
        for old, new in zip(before, grads):  # unscaled in memory until the step
            np.testing.assert_array_equal(minitrans.to_numpy(new), old)
        optimizer.zero_grad()  # the scale was for the gradients zeroed
        assert optimizer.gradient_scale == 1.0


def test_on_numpy_clipping_keeps_its_per_gradient_sums():
    """The CPU's norm is added up as it always was, gradient by gradient."""
    with minitrans.using("numpy"):
        optimizer = _after_a_flat_adam_step()
        assert optimizer.flat_gradient() is not None
        assert clipping.flat_gradient(optimizer) is None

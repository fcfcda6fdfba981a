"""Data parallelism: a batch split over worker threads gives the gradient of
the whole batch, on every backend, with its own dropout masks per replica."""

import os

import numpy as np
import pytest

import minitrans
from minitrans.core import backend
from minitrans.core.threads import usable_cores
from minitrans.layers.dropout import Dropout
from minitrans.layers.loss import LabelSmoothedCrossEntropy
from minitrans.model.config import ModelConfig
from minitrans.model.language_model import DecoderOnlyLM
from minitrans.gradcheck import TOLERANCE, numeric_gradient, relative_error, tiny_model
from minitrans.training.optimisation.parallel import DataParallel, replicate, shard_bounds
from minitrans.training.trainer import TrainConfig

VOCAB = 13


@pytest.fixture(params=["numpy"])
def backend_name(request):
    """Worker threads are the CPU's path: CuPy, and the strict backend that
    takes its paths, refuse more than one worker
    (``test_workers_on_a_device_backend_are_refused``), so these tests run on
    NumPy alone."""
    with minitrans.using(request.param, dtype="float32"):
        yield request.param


def make_model(dropout=0.0, decoder_only=False):
    config = ModelConfig(
        vocab_size=VOCAB,
        d_model=8,
        h=2,
        N=1,
        d_ff=16,
        dropout=dropout,
        max_len=12,
        decoder_only=decoder_only,
    )
    return (DecoderOnlyLM if decoder_only else minitrans.Transformer)(config, rng=0)


def make_batch(batch=5, seed=0):
    """(src, tgt_in), tgt_out with padding (id 0) spread unevenly, so that
    the shards hold different numbers of real targets."""
    rng = np.random.default_rng(seed)
    src, tgt_in, tgt_out = (rng.integers(4, VOCAB, size=(batch, length)) for length in (7, 6, 6))
    tgt_out[0, 2:] = 0
    tgt_out[1, 4:] = 0
    return tuple(minitrans.to_device(a) for a in (src, tgt_in)), minitrans.to_device(tgt_out)


def loss_and_grads(model, workers, inputs, targets, loss_fn=None):
    parallel = DataParallel(
        model, loss_fn or LabelSmoothedCrossEntropy(0.1, pad_id=0), workers=workers
    )
    model.zero_grad()
    loss = parallel.forward_backward(inputs, targets)
    return float(loss), {
        name: backend.to_numpy(grad).copy() for name, _, grad in model.named_parameters()
    }


def largest_difference(grads, reference):
    return max(relative_error(grads[name], reference[name]) for name in reference)


@pytest.mark.parametrize("workers", [2, 3, 5, 8])
def test_shards_give_the_whole_batch_gradient(float64, workers):
    inputs, targets = make_batch()
    loss_1, grads_1 = loss_and_grads(make_model(), 1, inputs, targets)
    loss_w, grads_w = loss_and_grads(make_model(), workers, inputs, targets)  # 8 > batch: 5 shards
    assert loss_w == pytest.approx(loss_1, rel=1e-12)
    assert largest_difference(grads_w, grads_1) < 1e-12


def test_decoder_only_model(float64):
    (_, tokens_in), targets = make_batch()
    loss_1, grads_1 = loss_and_grads(make_model(decoder_only=True), 1, (tokens_in,), targets)
    loss_2, grads_2 = loss_and_grads(make_model(decoder_only=True), 2, (tokens_in,), targets)
    assert loss_2 == pytest.approx(loss_1, rel=1e-12)
    assert largest_difference(grads_2, grads_1) < 1e-12


def test_equal_shares_would_be_wrong(float64):
    """The check above can fail: weighing each shard by 1/2 instead of its
    share of the real tokens gives another gradient (the shards here hold
    16 and 23 real targets)."""

    class EqualShares(LabelSmoothedCrossEntropy):
        def num_targets(self, targets):
            return 1

    inputs, targets = make_batch()
    _, grads_1 = loss_and_grads(make_model(), 1, inputs, targets)
    _, grads_wrong = loss_and_grads(make_model(), 2, inputs, targets, EqualShares(0.1, pad_id=0))
    assert largest_difference(grads_wrong, grads_1) > 1e-3


def test_whole_model_by_central_differences():
    """The gradient the workers add up, against central differences of the
    loss they return, at three random entries of every parameter (the
    layers' own gradients are checked whole in test_model.py; here it is
    their weighted sum over the shards)."""
    with minitrans.using("numpy", dtype="float64"):
        inputs, targets = make_batch(batch=3)
        model = make_model()
        parallel = DataParallel(model, LabelSmoothedCrossEntropy(0.1, pad_id=0), workers=2)
        model.zero_grad()
        parallel.forward_backward(inputs, targets)
        analytic = {name: grad.copy() for name, _, grad in model.named_parameters()}
        probe = make_model()  # its gradients absorb the backward of every probe
        probe_parallel = DataParallel(probe, LabelSmoothedCrossEntropy(0.1, pad_id=0), workers=2)
        rng = np.random.default_rng(0)
        def loss():
            return float(probe_parallel.forward_backward(inputs, targets))

        for (name, param, _), (_, twin, _) in zip(
            model.named_parameters(), probe.named_parameters()
        ):
            twin[...] = param
            sample = [np.unravel_index(flat, param.shape)
                      for flat in rng.choice(param.size, size=min(3, param.size), replace=False)]
            numeric = numeric_gradient(loss, twin, indices=sample)
            for index in sample:
                error = relative_error(
                    np.array([analytic[name][index]]), np.array([numeric[index]])
                )
                assert error < TOLERANCE, f"{name}{index}: relative error {error:.2e}"


def test_every_replica_draws_its_own_masks(backend_name):
    model = make_model(dropout=0.5)
    replica = replicate(model, 1)
    ours = [m for m in model.modules() if isinstance(m, Dropout)]
    theirs = [m for m in replica.modules() if isinstance(m, Dropout)]
    assert len(ours) == len(theirs) > 0
    for mine, other in zip(ours, theirs):
        assert mine.seed != other.seed
        shape = (64, 8)
        x = minitrans.to_device(np.ones(shape), dtype=backend.get_dtype())
        assert not np.array_equal(
            minitrans.to_numpy(mine.forward(x)), minitrans.to_numpy(other.forward(x))
        )


def test_a_step_repeats_exactly(backend_name):
    """Same step, same masks: the same loss and gradients, whichever thread
    happened to finish first."""
    inputs, targets = make_batch(batch=8)
    model = make_model(dropout=0.3)
    parallel = DataParallel(model, LabelSmoothedCrossEntropy(0.1, pad_id=0), workers=2)
    results = []
    for _ in range(3):
        for module in parallel.modules():
            if isinstance(module, Dropout):
                module.reset_rng(7)
        model.zero_grad()
        loss = float(parallel.forward_backward(inputs, targets))
        results.append((loss, [backend.to_numpy(g).copy() for _, _, g in model.named_parameters()]))
    for loss, grads in results[1:]:
        assert loss == results[0][0]
        assert all(np.array_equal(a, b) for a, b in zip(grads, results[0][1]))


def test_replicas_share_the_parameters_and_follow_replacements(float64):
    """A checkpoint load or a move may put new arrays in ``params``: the
    next step uses them in every replica."""
    inputs, targets = make_batch()
    model = make_model()
    parallel = DataParallel(model, LabelSmoothedCrossEntropy(0.1, pad_id=0), workers=2)
    replica = parallel.replicas[1]
    assert all(
        a is b for (_, a, _), (_, b, _) in zip(model.named_parameters(), replica.named_parameters())
    )
    other = make_model()
    for module in other.modules():
        for name in module.params:
            module.params[name] = module.params[name] * 1.5
    for mine, theirs in zip(model.modules(), other.modules()):
        mine.params.update({name: value.copy() for name, value in theirs.params.items()})
    model.zero_grad()
    loss = float(parallel.forward_backward(inputs, targets))
    expected, _ = loss_and_grads(other, 1, inputs, targets)
    assert loss == pytest.approx(expected, rel=1e-12)


def test_only_padding_gives_zero(float64):
    inputs, targets = make_batch()
    targets = targets * 0
    loss, grads = loss_and_grads(make_model(), 2, inputs, targets)
    assert loss == 0.0
    assert all(not g.any() for g in grads.values())


def test_an_error_in_a_worker_reaches_the_caller(backend_name):
    inputs, targets = make_batch()
    model = make_model()
    parallel = DataParallel(model, LabelSmoothedCrossEntropy(0.1, pad_id=0), workers=2)
    src = minitrans.to_numpy(inputs[0]).copy()
    src[-1, 0] = VOCAB + 5  # an id out of range, in the worker's half only
    with pytest.raises(ValueError, match="src"):
        parallel.forward_backward((minitrans.to_device(src), inputs[1]), targets)
    tgt_out = minitrans.to_numpy(targets).copy()
    tgt_out[-1, 0] = VOCAB + 5  # the loss, not the model, meets this one
    with pytest.raises(ValueError, match="targets"):
        parallel.forward_backward(inputs, minitrans.to_device(tgt_out))


def test_every_step_gives_the_batch_gradient_even_after_a_failed_sum(float64, monkeypatch):
    """The sum after each step zeroes the replicas' gradients, so a shard
    starts without zeroing; a step whose sum never ran leaves them written,
    and the next step zeroes them first. Each step below must give the
    one-worker gradient: with the replica's old gradients carried over it
    would be off by them."""
    inputs, targets = make_batch()
    _, expected = loss_and_grads(make_model(), 1, inputs, targets)
    model = make_model()
    parallel = DataParallel(model, LabelSmoothedCrossEntropy(0.1, pad_id=0), workers=2)

    def step():
        model.zero_grad()
        parallel.forward_backward(inputs, targets)
        return {name: backend.to_numpy(grad) for name, _, grad in model.named_parameters()}

    def failed_sum(used):
        raise RuntimeError("the sum failed")

    for _ in range(2):
        got = step()
        assert all(np.allclose(got[name], expected[name], rtol=1e-12, atol=1e-14)
                   for name in expected)
    replica_grads = [grad for _, _, grad in parallel.replicas[1].named_parameters()]
    assert not any(backend.to_numpy(grad).any() for grad in replica_grads)  # zeroed by the sum
    monkeypatch.setattr(parallel, "_add_replica_gradients", failed_sum)
    with pytest.raises(RuntimeError, match="the sum failed"):
        step()
    monkeypatch.undo()
    got = step()
    assert all(np.allclose(got[name], expected[name], rtol=1e-12, atol=1e-14) for name in expected)


def test_blas_threads_are_restored(backend_name):
    from threadpoolctl import threadpool_info

    before = [info["num_threads"] for info in threadpool_info()]
    inputs, targets = make_batch()
    DataParallel(
        make_model(), LabelSmoothedCrossEntropy(0.1, pad_id=0), workers=2
    ).forward_backward(inputs, targets)
    assert [info["num_threads"] for info in threadpool_info()] == before


def test_the_cores_counted_are_the_ones_this_process_may_use(monkeypatch):
    """Under ``taskset -c 0`` (one core of many) neither the workers' BLAS
    threads nor Adam's threads should count the machine's other cores."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert usable_cores() == 1
    assert minitrans.Adam(make_model()).threads == 1
    assert DataParallel(make_model(), LabelSmoothedCrossEntropy(), workers=1).blas_threads == 1
    monkeypatch.delattr(os, "sched_getaffinity")  # as on macOS and Windows
    assert usable_cores() == 8


@pytest.mark.parametrize("size,parts,expected", [
    (5, 2, [(0, 2), (2, 5)]),
    (6, 3, [(0, 2), (2, 4), (4, 6)]),
    (2, 4, [(0, 1), (1, 2)]),
    (1, 2, [(0, 1)]),
])
def test_split(size, parts, expected):
    assert shard_bounds(size, parts) == expected


@pytest.mark.parametrize("workers", [0, -1, 1.5, True, "2"])
def test_bad_workers(backend_name, workers):
    with pytest.raises(ValueError, match="workers"):
        DataParallel(make_model(), LabelSmoothedCrossEntropy(), workers=workers)
    with pytest.raises(ValueError, match="workers"):
        TrainConfig(workers=workers)


@pytest.mark.parametrize("name", ["cupy", "strict"])
def test_workers_on_a_device_backend_are_refused(backend_name, monkeypatch, name):
    model = make_model()
    monkeypatch.setattr(backend, "backend_name", lambda: name)
    with pytest.raises(ValueError, match=f"workers: expected 1 on the {name} backend.*got 2"):
        DataParallel(model, LabelSmoothedCrossEntropy(), workers=2)
    assert DataParallel(model, LabelSmoothedCrossEntropy()).workers == 1


def test_on_the_strict_backend_one_worker_is_the_default_and_the_only_choice():
    with minitrans.using("strict"):
        model = make_model()
        assert DataParallel(model, LabelSmoothedCrossEntropy()).workers == 1
        with pytest.raises(ValueError, match="workers: expected 1 on the strict backend"):
            DataParallel(model, LabelSmoothedCrossEntropy(), workers=2)


def test_a_replica_made_after_a_forward_keeps_every_setting(float64):
    """A forward leaves small ints in some caches (an AddNorm keeps its
    sub-layer's index, 0 or 1); the replica must not turn the model's
    other 0s and 1s (pad_id among them) into something else."""
    import dataclasses

    model, batch = tiny_model(seed=3)
    model.model.eval()
    model.forward(*batch)
    assert any(isinstance(module.cache, int) for module in model.model.modules())
    replica = replicate(model.model, 1)
    assert dataclasses.asdict(replica.config) == dataclasses.asdict(model.model.config)
    for (name, mine), (_, theirs) in zip(model.model.named_modules(), replica.named_modules()):
        settings = {key: value for key, value in vars(mine).items()
                    if isinstance(value, (bool, int, float, str)) and key not in ("seed", "cache")}
        assert settings == {key: vars(theirs)[key] for key in settings}, name
    inputs = batch[:-1]
    np.testing.assert_array_equal(minitrans.to_numpy(replica.forward(*inputs)),
                                  minitrans.to_numpy(model.model.forward(*inputs)))

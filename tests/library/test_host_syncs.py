"""Waits for the GPU, counted on the CPU.

On CuPy every conversion of a device array to a host value (``float``,
``int``, ``bool``, ``.item()``, ``.tolist()``, ``.get()``, formatting) makes
the CPU wait until the GPU has run everything queued before it. The strict
backend counts them (``minitrans.core.host_syncs``), so these budgets hold
on a laptop: a handful per training step (the ids' range, the loss, the
gradient norm) and one per decoded token (has every row finished?).
"""

import numpy as np
import pytest

import minitrans
from minitrans.core import backend, checks
from minitrans.core.host_syncs import count_host_syncs
from minitrans.decoding import search
from minitrans.training.optimisation import clipping
from tests.conftest import tiny_trainer

TRAIN_STEP_BUDGET = 5  # src and tgt_in ids, the targets, the loss, the gradient norm
PER_TOKEN_BUDGET = 1  # has every row finished?
PER_CALL_BUDGET = 2  # checking the source or prompt once per call; beam search: its best length


@pytest.fixture
def strict():
    with minitrans.using("strict", dtype="float32"):
        yield backend.get_xp()


def _explain(syncs):
    return f"{syncs.count} host syncs:\n{syncs.summary()}"


def test_every_kind_of_conversion_is_counted_with_its_line(strict):
    x = strict.ones((2, 3))
    with count_host_syncs() as syncs:
        float(x.sum()), int(x[0, 0]), bool(x.all()), x[0].tolist(), x.get(), f"{x.sum():.1f}"
        x.sum().item()
    kinds = [place.rsplit("(", 1)[1].rstrip(")") for place in syncs.places]
    assert kinds == ["float", "int", "bool", "tolist", "get", "format", "item"]
    assert all("test_host_syncs.py:" in place for place in syncs.places), syncs.places


def test_what_stays_on_the_device_is_not_counted(strict):
    x = strict.ones((4, 5))
    with count_host_syncs() as syncs:
        y = (x * 2.0).sum(axis=-1) + x.max()
        strict.where(y > 3, y, 0.0), x.shape, len(x), x[1:3]
    assert syncs.count == 0


def test_counters_nest_and_count_every_thread(strict):
    from concurrent.futures import ThreadPoolExecutor

    x = strict.ones(3)
    with count_host_syncs() as outer:
        float(x[0])
        with count_host_syncs() as inner:
            with ThreadPoolExecutor(2) as pool:
                list(pool.map(lambda _: float(x[1]), range(4)))
    assert (outer.count, inner.count) == (5, 4)


@pytest.mark.parametrize("task", ["copy", "lm"])
def test_a_training_step_waits_a_handful_of_times(strict, tmp_path, task):
    trainer = tiny_trainer(tmp_path, task)
    trainer.train_step()  # the first step makes the optimiser's state
    with count_host_syncs() as syncs:
        trainer.train_step()
    assert syncs.count <= TRAIN_STEP_BUDGET, _explain(syncs)


def test_the_budget_fails_a_layer_that_checks_its_input_every_call(strict, tmp_path, monkeypatch):
    """The budget is not loose: checking every layer's input again, as each
    layer on its own does, blows it many times over."""
    trainer = tiny_trainer(tmp_path)
    trainer.train_step()
    monkeypatch.setattr(checks, "_inside_checked_call", lambda: False)
    with count_host_syncs() as syncs:
        trainer.train_step()
    assert syncs.count > 4 * TRAIN_STEP_BUDGET, _explain(syncs)


def test_the_gradient_norm_waits_once_for_all_parameters(strict, tmp_path):
    trainer = tiny_trainer(tmp_path)
    trainer.train_step()
    parameters = len(list(trainer.model.named_parameters()))
    with count_host_syncs() as syncs:
        norm = clipping.global_grad_norm(trainer.model)
    assert parameters > 10 and syncs.count == 1, _explain(syncs)
    squares = [float((minitrans.to_numpy(g).astype(np.float64) ** 2).sum())
               for _, _, g in trainer.model.named_parameters()]
    assert norm == pytest.approx(np.sqrt(sum(squares)), rel=1e-6)


def _copy_model_and_sources(tmp_path):
    trainer = tiny_trainer(tmp_path)
    rng = np.random.default_rng(0)
    src = minitrans.to_device(rng.integers(4, trainer.model.config.vocab_size, size=(3, 7)))
    return trainer.model, src


@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_decoding_waits_once_per_token(strict, tmp_path, use_cache):
    model, src = _copy_model_and_sources(tmp_path)
    with count_host_syncs() as syncs:
        tokens = search.greedy(model, src, max_len=9, use_cache=use_cache)
    budget = PER_CALL_BUDGET + PER_TOKEN_BUDGET * tokens.shape[1]
    assert syncs.count <= budget, _explain(syncs)


def test_beam_search_waits_once_per_step(strict, tmp_path):
    model, src = _copy_model_and_sources(tmp_path)
    with count_host_syncs() as syncs:
        search.beam_search(model, src, beam_size=3, max_len=9)
    assert syncs.count <= PER_CALL_BUDGET + PER_TOKEN_BUDGET * 9, _explain(syncs)


@pytest.mark.parametrize("strategy", ["greedy", "sample"])
def test_generating_waits_once_per_token(strict, tmp_path, strategy):
    lm = tiny_trainer(tmp_path, task="lm").model
    prompt = minitrans.to_device(np.array([[1, 5, 6, 7, 8]] * 2))
    with count_host_syncs() as syncs:
        tokens = search.generate(lm, prompt, 8, strategy=strategy)
    assert syncs.count <= PER_CALL_BUDGET + PER_TOKEN_BUDGET * tokens.shape[1], _explain(syncs)


def test_the_decoding_budget_fails_when_each_step_checks_its_tokens(strict, tmp_path, monkeypatch):
    model, src = _copy_model_and_sources(tmp_path)
    monkeypatch.setattr(checks, "_inside_checked_call", lambda: False)
    with count_host_syncs() as syncs:
        tokens = search.greedy(model, src, max_len=9)
    assert syncs.count > PER_CALL_BUDGET + 3 * tokens.shape[1], _explain(syncs)


def test_ids_the_caller_gives_are_still_checked_once(strict, tmp_path):
    """Checking once per call, not per layer, still refuses a bad id: on CuPy
    an index out of range is not an error, it wraps around."""
    model, src = _copy_model_and_sources(tmp_path)
    bad = minitrans.to_numpy(src).copy()
    bad[2, 3] = model.config.source_vocab_size
    with pytest.raises(ValueError, match=r"src: expected token ids in \[0, "):
        search.greedy(model, minitrans.to_device(bad), max_len=4)
    with pytest.raises(ValueError, match=r"tokens: expected token ids in \[0, "):
        model.step(model.start(src), strict.full(3, model.config.vocab_size))
    with pytest.raises(ValueError, match="bos_id"):
        search.greedy(model, src, max_len=4, bos_id=model.config.vocab_size)
    lm = tiny_trainer(tmp_path / "lm", task="lm").model
    with pytest.raises(ValueError, match=r"prompt: expected token ids in \[0, "):
        search.generate(lm, strict.full((1, 3), lm.config.vocab_size), 4)

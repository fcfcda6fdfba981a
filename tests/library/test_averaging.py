"""The moving average of the weights: its update, what evaluations and
checkpoints use, and resuming with and without it."""

import dataclasses

import numpy as np
import pytest

import minitrans
from minitrans.core import backend
from minitrans.model.config import ModelConfig
from minitrans.model.language_model import DecoderOnlyLM
from minitrans.training.run_files import checkpoint
from minitrans.training.optimisation import evaluation
from minitrans.training import experiment
from minitrans.training.optimisation.averaging import WeightAverage, decay_at
from minitrans.training.finetune import FinetuneTrainer
from minitrans.training.trainer import TrainConfig, TrainingError
from tests.conftest import tiny_trainer

DECAY = 0.9


@pytest.fixture(autouse=True)
def on_every_backend(backend_name):
    """Every test here runs on NumPy, the strict backend and CuPy where present."""


def _trainer(path, **settings):
    return tiny_trainer(path / "run", "copy", average_decay=DECAY, **settings)


def _host(model):
    """A copy of every parameter, on the host (to_numpy gives NumPy's own array)."""
    return {name: np.array(minitrans.to_numpy(value)) for name, value, _ in
            model.named_parameters()}


def _assert_same(ours, theirs):
    assert ours.keys() == theirs.keys()
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)


def test_the_decay_grows_from_small_to_its_limit():
    assert decay_at(0.999, 0) == pytest.approx(0.1)
    assert decay_at(0.999, 10) == pytest.approx(11 / 20)
    assert decay_at(0.999, 10**6) == 0.999


def _average_by_hand(history, decay):
    """The average that the update rule gives for weights ``history[t]``
    after each step t = 1, 2, ..., starting at ``history[0]``."""
    average = history[0]
    for step, weights in enumerate(history[1:], start=1):
        keep = decay_at(decay, step)
        average = {name: keep * average[name] + (1 - keep) * weights[name] for name in weights}
    return average


def test_the_average_follows_the_update_rule_and_shares_no_array_with_the_model(float64):
    model = DecoderOnlyLM(ModelConfig(vocab_size=9, d_model=8, h=2, N=1, d_ff=16, max_len=8,
                                      decoder_only=True, tie_embeddings=True),
                          rng=backend.host_rng(0))
    average = WeightAverage(model, DECAY)
    rng = np.random.default_rng(1)
    history = [_host(model)]
    for step in (1, 2, 3):
        for _, value, _ in model.named_parameters():
            value += backend.to_device(rng.normal(size=value.shape))
        history.append(_host(model))
        average.update(step)
    expected = _average_by_hand(history, DECAY)
    for name, value in _host(average.model).items():
        np.testing.assert_allclose(value, expected[name], rtol=1e-12, err_msg=name)
    # the same check fails on an average one step behind: it can tell them apart
    behind = _average_by_hand(history[:-1], DECAY)
    name = next(iter(expected))
    assert not np.allclose(behind[name], _host(average.model)[name], rtol=1e-6)
    # its own arrays; a tied matrix stays one array in the average too
    ours = {id(value) for _, value, _ in model.named_parameters()}
    theirs = {id(value) for _, value, _ in average.model.named_parameters()}
    assert not ours & theirs
    table = average.model.embed.embedding.params["W_E"]
    table += 1.0  # the average's output projection reads its own table: W = W_E^T
    np.testing.assert_array_equal(minitrans.to_numpy(average.model.output_projection.W),
                                  minitrans.to_numpy(table).T)


def test_evaluations_measure_the_average_and_the_checkpoint_keeps_both(tmp_path):
    trainer = _trainer(tmp_path)
    result = trainer.fit()
    averaged, weights = _host(trainer.evaluated_model), _host(trainer.model)
    assert trainer.evaluated_model is trainer.average.model
    assert any(not np.array_equal(averaged[n], weights[n]) for n in averaged)  # they differ
    pairs = trainer.held_out_pairs()
    match, _ = evaluation.exact_match(trainer.average.model, trainer.task, pairs)
    assert result["exact_match"] == match
    metrics = evaluation.teacher_forced_metrics(trainer.average.model, trainer.task, pairs,
                                                label_smoothing=trainer.config.label_smoothing)
    assert result["loss"] == metrics["loss"]
    arrays, _ = checkpoint.load_checkpoint(trainer.checkpoint_path)
    _assert_same({k.removeprefix("param/"): v for k, v in arrays.items()
                  if k.startswith("param/")}, averaged)
    _assert_same({k.removeprefix("optim/weights/"): v for k, v in arrays.items()
                  if k.startswith("optim/weights/")}, weights)
    model, _ = experiment.load_trained(trainer.checkpoint_path)  # what translate reads
    _assert_same(_host(model), averaged)


def test_a_resumed_run_repeats_the_weights_and_the_average_of_an_uninterrupted_one(tmp_path):
    straight = _trainer(tmp_path / "a")
    straight.fit()
    interrupted = _trainer(tmp_path / "b", steps=3)
    interrupted.fit()
    resumed = experiment.resume_trainer(interrupted.checkpoint_path, steps=6, progress=False,
                                        log=lambda m: None)
    resumed.fit()
    assert resumed.history["loss"] == straight.history["loss"]
    _assert_same(_host(resumed.model), _host(straight.model))
    _assert_same(_host(resumed.evaluated_model), _host(straight.evaluated_model))


def test_averaging_may_start_or_stop_when_a_run_is_resumed(tmp_path):
    plain = tiny_trainer(tmp_path / "plain", "copy", steps=3)
    plain.fit()
    saved = experiment.read_run(plain.checkpoint_path)
    started = experiment.resume_from(saved, tmp_path / "started", {"average_decay": DECAY},
                                     progress=False, log=lambda m: None)
    # the average starts at the weights the run had
    _assert_same(_host(started.evaluated_model), _host(plain.model))
    averaged = _trainer(tmp_path / "averaged", steps=3)
    averaged.fit()
    saved = experiment.read_run(averaged.checkpoint_path)
    stopped = experiment.resume_from(saved, tmp_path / "stopped", {"average_decay": 0.0},
                                     progress=False, log=lambda m: None)
    # training goes on from the weights, not from their average
    assert stopped.average is None
    _assert_same(_host(stopped.model), _host(averaged.model))


def test_a_checkpoint_saved_before_the_first_step_restores(tmp_path):
    """Before any step the file holds the weights under optim/weights/ and
    no moments of Adam yet: neither is missing."""
    trainer = _trainer(tmp_path)
    trainer.save(trainer.checkpoint_path)
    arrays, records = checkpoint.load_checkpoint(trainer.checkpoint_path)
    assert any(key.startswith("optim/weights/") for key in arrays)
    assert not any(key.startswith("optim/m/") for key in arrays)
    restored = _trainer(tmp_path / "again")
    restored.restore(trainer.checkpoint_path, arrays, records)
    _assert_same(_host(restored.model), _host(trainer.model))
    _assert_same(_host(restored.evaluated_model), _host(trainer.evaluated_model))


def test_a_checkpoint_whose_weights_are_missing_a_parameter_is_refused(tmp_path):
    trainer = _trainer(tmp_path, steps=3)
    trainer.fit()
    arrays, records = checkpoint.load_checkpoint(trainer.checkpoint_path)
    dropped = next(key for key in arrays if key.startswith("optim/weights/"))
    del arrays[dropped]
    with pytest.raises(checkpoint.CheckpointError, match=dropped.replace(".", r"\.")):
        trainer.restore(trainer.checkpoint_path, arrays, records)


@pytest.mark.parametrize("decay", [-0.1, 1.0, float("nan")])
def test_a_decay_outside_zero_to_one_is_refused_by_name(decay):
    with pytest.raises(ValueError, match=r"average_decay: expected .*got"):
        TrainConfig(average_decay=decay)


def test_fine_tuning_refuses_an_average(tmp_path):
    trainer = tiny_trainer(tmp_path / "run", "lm")
    config = dataclasses.replace(trainer.config, average_decay=0.5)
    with pytest.raises(ValueError, match="average_decay: .*expected 0, got 0.5"):
        FinetuneTrainer(trainer.model, trainer.task, config, lr=1e-3)


def test_diverged_weights_are_not_saved_behind_a_sound_average(tmp_path):
    trainer = _trainer(tmp_path, steps=3)
    trainer.fit()
    saved = open(trainer.checkpoint_path, "rb").read()
    trainer.model.output_projection.params["W"][...] *= 1e4  # the average is untouched
    assert trainer.evaluate()["loss"] < 10  # so its evaluation alone looks fine
    with pytest.raises(TrainingError, match=r"step 3: the weights diverged.*not saved"):
        trainer.evaluate_and_save()
    assert open(trainer.checkpoint_path, "rb").read() == saved

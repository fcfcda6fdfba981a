"""The trainer: exact resumption, non-finite stops, early stop, plots."""

import dataclasses
import math
import os

import numpy as np
import pytest

import minitrans
from minitrans.training import experiment
from minitrans.training.trainer import TrainConfig, TrainingError
from tests.conftest import tiny_trainer


@pytest.fixture(autouse=True)
def on_every_backend(backend_name):
    """Every test here runs on each backend (conftest's ``backend_name``):
    NumPy, the strict backend, which takes CuPy's paths (one worker, arrays
    that refuse to mix with the host's), and CuPy where a GPU is present."""


def _trainer(tmp_path, task="copy", **settings):
    return tiny_trainer(tmp_path / "run", task, **settings)


@pytest.mark.parametrize("task", ["copy", "lm"])
def test_resuming_repeats_the_losses_of_an_uninterrupted_run(tmp_path, task):
    straight = _trainer(tmp_path / "a", task)
    straight.fit()
    assert len(straight.history["loss"]) == 6
    interrupted = _trainer(tmp_path / "b", task, steps=3)
    interrupted.fit()
    resumed = experiment.resume_trainer(
        interrupted.checkpoint_path, steps=6, progress=False, log=lambda m: None
    )
    assert resumed.step == 3
    resumed.fit()
    assert resumed.history["loss"] == straight.history["loss"]  # exactly, dropout on
    for (name, value, _), (_, other, _) in zip(
        straight.model.named_parameters(), resumed.model.named_parameters()
    ):
        np.testing.assert_array_equal(
            minitrans.to_numpy(other), minitrans.to_numpy(value), err_msg=name
        )


def test_a_non_finite_loss_stops_training_and_keeps_the_last_good_checkpoint(tmp_path):
    trainer = _trainer(tmp_path, steps=6)
    trainer.config = dataclasses.replace(trainer.config, steps=3)
    trainer.fit()
    saved = open(trainer.checkpoint_path, "rb").read()
    trainer.config = dataclasses.replace(trainer.config, steps=6)
    weight = trainer.model.output_projection.params["W"]
    weight[0, 0] = float("nan")
    with pytest.raises(
        # the loss refuses the NaN logits; the trainer names the weight behind them
        TrainingError, match=r"step 4: inside the model, parameter output_projection.W holds NaN"
                             r".*last good checkpoint is .*checkpoint.npz"
    ):
        trainer.fit()
    assert open(trainer.checkpoint_path, "rb").read() == saved
    assert trainer.step == 3


def test_early_stop_when_the_target_is_reached(tmp_path):
    trainer = _trainer(tmp_path, steps=9, target_exact_match=0.0)
    result = trainer.fit()
    assert trainer.step == 3 and result["step"] == 3
    assert os.path.exists(trainer.checkpoint_path)


def test_history_schedule_and_plots(tmp_path):
    trainer = _trainer(tmp_path)
    result = trainer.fit()
    assert set(result) >= {"loss", "token_accuracy", "exact_match", "pairs", "step"}
    assert trainer.history["step"] == [1, 2, 3, 4, 5, 6]
    assert trainer.history["lr"][3] == pytest.approx(16**-0.5 * 4**-0.5)  # the warm-up peak
    assert all(math.isfinite(loss) for loss in trainer.history["loss"])
    paths = trainer.save_plots()
    assert [os.path.basename(p) for p in paths] == ["loss.png", "lr.png"]
    assert all(open(p, "rb").read(8) == b"\x89PNG\r\n\x1a\n" for p in paths)


def test_the_batches_of_a_step_are_a_function_of_seed_and_step(tmp_path):
    trainer = _trainer(tmp_path)
    assert trainer.batch_pairs(5) == trainer.batch_pairs(5)
    assert trainer.batch_pairs(5) != trainer.batch_pairs(6)
    per_epoch = len(trainer.task.train) // 16
    epoch = [pair for step in range(1, per_epoch + 1) for pair in trainer.batch_pairs(step)]
    assert len(set(epoch)) == len(epoch)  # no example twice within an epoch


def test_bad_train_settings_are_named():
    with pytest.raises(ValueError, match="steps"):
        TrainConfig(steps=0)
    with pytest.raises(ValueError, match="label_smoothing"):
        TrainConfig(label_smoothing=1.0)
    with pytest.raises(ValueError, match="task"):
        experiment.new_trainer(TrainConfig(task="sort"))

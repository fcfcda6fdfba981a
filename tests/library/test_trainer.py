"""The trainer: exact resumption, non-finite stops, early stop, plots; the
recipe it is given, and fine-tuning's."""

import dataclasses
import math
import os

import numpy as np
import pytest

import minitrans
from minitrans.model.config import ModelConfig
from minitrans.model.language_model import DecoderOnlyLM
from minitrans.training import experiment
from minitrans.training.finetune import FinetuneTrainer, FineTuningRecipe, TextBlocks
from minitrans.training.recipe import PaperRecipe
from minitrans.training.run_files import checkpoint
from minitrans.training.trainer import TrainConfig, Trainer, TrainingError
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


# the recipe a trainer is given -----------------------------------------------------------------

class PlantedRecipe(PaperRecipe):
    """The paper's recipe but a constant learning rate, the latest
    evaluation as the best, and a stop at the second evaluation."""

    def learning_rate(self, step, model, config):
        return 0.125

    def describe(self, metrics, task):
        return "planted"

    def best(self, evaluations):
        return evaluations[-1] if evaluations else None

    def stop_reason(self, config, evaluations, minutes):
        return "planted stop" if len(evaluations) == 2 else None


def test_a_trainer_runs_by_the_recipe_it_is_given(tmp_path):
    logs = []
    trainer = tiny_trainer(tmp_path / "run", steps=9, log=logs.append)
    trainer = Trainer(trainer.model, trainer.task, trainer.config, log=logs.append,
                      progress=False, recipe=PlantedRecipe())
    trainer.fit()
    assert trainer.step == 6 and trainer.history["lr"] == [0.125] * 6
    assert [line for line in logs if "planted" in line] == [
        "step 3: planted", "step 6: planted", "step 6: planted stop"]
    _, records = checkpoint.load_checkpoint(trainer.best_checkpoint_path())
    assert records["step"] == 6  # the latest, as this recipe's best says


def test_the_earlier_of_equal_evaluations_is_the_best():
    scores = [{"exact_match": 0.5, "loss": 3.0}, {"exact_match": 0.7, "loss": 2.0},
              {"exact_match": 0.7, "loss": 2.0}]
    assert PaperRecipe().best(scores) is scores[1]
    assert FineTuningRecipe(1e-3).best(scores) is scores[1]
    assert PaperRecipe().best([]) is None and FineTuningRecipe(1e-3).best([]) is None


# fine-tuning -----------------------------------------------------------------------------------

def _finetuner(tmp_path, log=lambda message: None, **settings):
    """A FinetuneTrainer of a tiny random GPT-2-like model on random blocks of 8 tokens."""
    shape = dict(vocab_size=50, d_model=16, h=2, N=1, d_ff=32, max_len=16,
                 positions="learned", activation="gelu", norm="layer", pre_norm=True,
                 tie_embeddings=True, decoder_only=True, dropout=0.0, pad_id=None,
                 output_bias=False, scale_embedding=False, bias=True)
    rng = np.random.default_rng(0)
    blocks = [rng.integers(0, 50, 9) for _ in range(10)]
    task = TextBlocks("pretrained", "pretrained-lm", blocks[:8], blocks[8:], 8, "random")
    values = dict(task="pretrained", steps=4, batch_size=4, warmup=2, eval_every=2, workers=1,
                  out_dir=str(tmp_path / "run"))
    config = TrainConfig(**{**values, **settings})
    return FinetuneTrainer(DecoderOnlyLM(ModelConfig(**shape), rng=0), task, config, lr=0.01,
                           source={"init_from": "/models/gpt2", "architecture": "gpt2"},
                           log=log, progress=False)


def test_fine_tuning_is_the_trainer_given_a_recipe_not_a_subclass_of_its_loop():
    """FinetuneTrainer only builds its Trainer: the loop, the evaluation,
    the checkpoints are the Trainer's own, with FineTuningRecipe's rules."""
    overridden = {name for name in vars(FinetuneTrainer) if hasattr(Trainer, name)}
    assert overridden <= {"__init__", "__doc__", "__module__", "__qualname__"}


def test_fine_tuning_warms_up_to_a_constant_rate_with_its_own_adam(tmp_path):
    trainer = _finetuner(tmp_path, label_smoothing=0.1)
    assert [trainer.learning_rate(step) for step in (1, 2, 50)] == [0.005, 0.01, 0.01]
    optimizer = trainer.optimizer
    assert (optimizer.beta1, optimizer.beta2, optimizer.eps) == (0.9, 0.999, 1e-8)
    assert trainer.config.label_smoothing == 0.0 and trainer.loss_fn.eps == 0.0


def test_a_fine_tuning_checkpoint_records_its_source_and_no_vocabulary(tmp_path):
    logs = []
    trainer = _finetuner(tmp_path, log=logs.append, patience=1)  # patience: not for fine-tuning
    last = trainer.fit()
    assert trainer.step == 4 and list(last) == ["step", "blocks", "loss"]
    assert logs[-1] == f"step 4: held-out loss {last['loss']:.4f} (2 blocks of 8 tokens)"
    _, records = checkpoint.load_checkpoint(trainer.checkpoint_path)
    assert list(records) == ["model_config", "train_config", "task", "step", "optimizer_step",
                             "rng", "history", "evaluations", "format_version"]
    assert list(records["task"].items()) == [  # in this order: the file's bytes stay the same
        ("name", "pretrained"), ("kind", "pretrained-lm"), ("block_size", 8), ("lr", 0.01),
        ("init_from", "/models/gpt2"), ("architecture", "gpt2")]
    assert records["rng"] == {"seed": 0, "step": 4, "rule": "numpy default_rng([seed, epoch])"}
    assert records["evaluations"] == trainer.evaluations and records["optimizer_step"] == 4
    best = trainer.best_evaluation()
    assert best["loss"] == min(e["loss"] for e in trainer.evaluations)
    _, best_records = checkpoint.load_checkpoint(trainer.best_checkpoint_path())
    assert best_records["step"] == best["step"]


def test_fine_tuning_saves_best_npz_at_each_lower_held_out_loss(tmp_path, monkeypatch):
    trainer = _finetuner(tmp_path)
    trainer.history["loss"] = [10.0]  # step 1's loss, which the divergence checks read
    losses = iter([3.0, 2.0, 2.0, 1.0])
    monkeypatch.setattr(trainer, "evaluate", lambda: {"step": 1, "blocks": 2, "loss": next(losses)})
    saved = []
    monkeypatch.setattr(trainer, "save", saved.append)
    for _ in range(4):
        trainer.evaluate_and_save()
    best = [path for path in saved if path.endswith("best.npz")]
    assert len(saved) - len(best) == 4 and len(best) == 3  # not at the tie
    assert trainer.best_evaluation() is trainer.evaluations[3]


def test_fine_tuning_refuses_a_non_finite_held_out_loss_before_saving(tmp_path, monkeypatch):
    trainer = _finetuner(tmp_path)
    trainer.history["loss"] = [10.0]
    monkeypatch.setattr(trainer, "evaluate", lambda: {"step": 0, "blocks": 2, "loss": float("nan")})
    with pytest.raises(TrainingError, match=r"step 0: the held-out loss is nan.*not saved"):
        trainer.evaluate_and_save()
    assert not os.path.exists(trainer.checkpoint_path) and not trainer.evaluations


def test_fine_tuning_stops_early_only_for_its_time_budget(tmp_path):
    logs = []
    trainer = _finetuner(tmp_path, log=logs.append, max_minutes=1e-9)
    trainer.fit()
    assert trainer.step == 2 and "step 2: the time budget of 1e-09 minutes is spent" in logs[-1]

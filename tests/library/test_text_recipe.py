"""Training a GPT on a text (training.text_recipe, training.text_run): the
recipe's settings, the held-out measure, a short run, resuming it, and the
records a text run's checkpoint adds."""

import json
import math

import numpy as np
import pytest

import minitrans

from minitrans.data import BPE
from minitrans.data import byte_bpe_learning as learning
from minitrans.data.tasks import TEXT
from minitrans.data.vocab import DataError
from minitrans.files.rules import FileError
from minitrans.layers.loss import LabelSmoothedCrossEntropy
from minitrans.training import experiment, text_run
from minitrans.training.optimisation.schedule import cosine_lr
from minitrans.training.run_files import checkpoint, records
from minitrans.training.text_recipe import GPTRecipe, bits_per_character, text_loss

TINY = dict(d_model=16, h=2, N=1)
WORDS = "the quick brown fox jumps over a lazy dog and runs home".split()


def write_text(folder, name="input.txt", lines=300, seed=0):
    rng = np.random.default_rng(seed)
    text = "\n".join(" ".join(rng.choice(WORDS, size=6)) for _ in range(lines)) + "\n"
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def config(tmp_path, out="run", **overrides):
    settings = dict(data=str(write_text(tmp_path)), out_dir=str(tmp_path / out), steps=20,
                    warmup=2, eval_every=10, block_size=16, batch_size=4, eval_windows=8,
                    workers=1)
    return text_run.text_train_config(**{**settings, **overrides})


def quiet_trainer(train_config):
    return text_run.new_text_trainer(train_config, TINY, progress=False, log=lambda line: None)


def test_the_recipe_is_adamw_on_matrices_with_a_cosine_schedule(tmp_path):
    trainer = quiet_trainer(config(tmp_path, weight_decay=0.1, peak_lr=2e-3, min_lr=2e-4))
    adam, recipe = trainer.optimizer, trainer.recipe
    assert (adam.beta1, adam.beta2, adam.eps) == (0.9, 0.99, 1e-8)
    assert (adam.weight_decay, adam.decay) == (0.1, "matrices")
    assert recipe.learning_rate(1, trainer.model, trainer.config) == pytest.approx(1e-3)
    assert recipe.learning_rate(20, trainer.model, trainer.config) == pytest.approx(2e-4)
    assert recipe.learning_rate(11, trainer.model, trainer.config) == cosine_lr(11, 2e-3, 2e-4,
                                                                                2, 20)
    assert trainer.model.config.init == "gpt" and trainer.model.config.max_len == 16
    assert trainer.config.label_smoothing == 0.0


def test_bits_per_character_is_nats_over_ln_2_scaled_by_tokens_per_character():
    assert bits_per_character(math.log(2), 100, 100) == pytest.approx(1.0)
    assert bits_per_character(math.log(2), 50, 100) == pytest.approx(0.5)  # 2 characters a token


def test_the_held_out_loss_is_the_mean_over_every_full_window(tmp_path):
    trainer = quiet_trainer(config(tmp_path))
    tokens = np.asarray(trainer.task.valid[:16 * 40 + 5])  # 40 windows and 4 ids left out
    loss, windows = text_loss(trainer.model, tokens, 16)
    window_losses = []
    for start in range(0, 40 * 16, 16):
        ids = tokens[start:start + 17].astype(np.int64)[None]
        logits = trainer.model.forward(ids[:, :-1])
        window_losses.append(float(LabelSmoothedCrossEntropy(0.0, None).forward(logits,
                                                                                ids[:, 1:])))
    assert windows == 40
    assert loss == pytest.approx(np.mean(window_losses), rel=1e-5)
    assert text_loss(trainer.model, tokens, 16, windows=3)[1] == 3


def test_a_short_run_lowers_the_held_out_loss_and_keeps_the_best(tmp_path):
    trainer = quiet_trainer(config(tmp_path, steps=30))
    trainer.fit()
    losses = [evaluation["loss"] for evaluation in trainer.evaluations]
    assert len(losses) == 3 and losses[-1] < losses[0]
    assert trainer.best_evaluation()["loss"] == min(losses)
    _, stored = checkpoint.load_checkpoint(trainer.best_checkpoint_path())
    assert stored["task"] == {"name": TEXT, "kind": "lm", "level": "char"}
    assert {"windows", "loss", "bits_per_character"} <= set(stored["evaluations"][0])
    model, task = experiment.load_trained(trainer.best_checkpoint_path())
    assert task.vocab == trainer.task.vocab and model.config.decoder_only


def test_a_resumed_run_draws_the_same_next_windows(tmp_path):
    first = quiet_trainer(config(tmp_path, steps=10))
    first.fit()
    expected = first.windows.batch()  # the 11th batch of the uninterrupted stream
    saved = experiment.read_run(first.checkpoint_path)
    resumed = text_run.resume_text(saved, tmp_path / "run", {"steps": 20}, progress=False,
                                   log=lambda line: None)
    assert resumed.step == 10
    np.testing.assert_array_equal(resumed.windows.batch().tgt_in, expected.tgt_in)


def test_resuming_refuses_changes_that_make_another_run(tmp_path):
    trainer = quiet_trainer(config(tmp_path, steps=10))
    trainer.fit()
    saved = experiment.read_run(trainer.checkpoint_path)
    with pytest.raises(ValueError, match="block_size: cannot change"):
        text_run.resume_text(saved, tmp_path / "run", {"block_size": 8})


def test_a_refused_text_leaves_no_folder_behind(tmp_path):
    one = tmp_path / "one.txt"
    one.write_text("aaaa", encoding="utf-8")
    with pytest.raises(DataError, match="single distinct character"):
        text_run.prepared_task(text_run.text_train_config(data=str(one),
                                                          out_dir=str(tmp_path / "a" / "b")))
    assert not (tmp_path / "a").exists()


def bpe_trainer(tmp_path, out="bpe", **overrides):
    settings = dict(out=out, level="bpe", merges=40, steps=10, **overrides)
    trainer = quiet_trainer(config(tmp_path, **settings))
    trainer.fit()
    return trainer


def test_merges_are_learned_at_level_bpe_alone_and_the_description_says_so(tmp_path):
    assert text_run.text_train_config(level="bpe").merges == text_run.BPE_MERGES
    assert text_run.text_train_config(level="char").merges == 0  # none at level char
    assert text_run.text_train_config(level="bpe", merges=7).merges == 7
    task = text_run.prepared_task(config(tmp_path, level="bpe", merges=40))
    assert task.tokenizer.level == "bpe" and len(task.tokenizer.merges) == 40
    assert task.description.startswith("text at level bpe: ")
    assert "40 merges learned from the whole text" in task.description
    assert text_run.prepared_task(config(tmp_path)).description.startswith("text at level char")


def test_bits_per_character_count_the_held_out_characters_not_its_tokens(tmp_path):
    """Byte-level tokens hold several characters each: the held-out part's
    tokens per character scale the loss (the plant, a token a character,
    gives more bits than there are)."""
    trainer = bpe_trainer(tmp_path)
    task, last = trainer.task, trainer.evaluations[-1]
    assert task.valid_characters > 2 * len(task.valid)  # words, not characters
    expected = last["loss"] / math.log(2) * len(task.valid) / task.valid_characters
    assert last["bits_per_character"] == pytest.approx(expected, rel=1e-12)
    assert last["bits_per_character"] < 0.5 * last["loss"] / math.log(2)


def test_the_checkpoint_keeps_the_runs_tokenizer_and_a_resume_learns_none(tmp_path, monkeypatch):
    """generate, evaluate and --resume rebuild the run's merges from the
    checkpoint; the plant, merges learned again from another sample, is
    refused (the vocabulary is not theirs), and a resumed run never learns."""
    trainer = bpe_trainer(tmp_path)
    arrays, stored = checkpoint.load_checkpoint(trainer.checkpoint_path)
    assert stored["task"] == {"name": TEXT, "kind": "lm", "level": "bpe"}
    assert stored["byte_bpe"] == json.loads(json.dumps(trainer.task.tokenizer.to_records()))
    rebuilt = experiment.load_trained(trainer.checkpoint_path)[1].tokenizer
    assert rebuilt.merges == trainer.task.tokenizer.merges and rebuilt.vocab == trainer.task.vocab
    model, task = experiment.load_trained(trainer.best_checkpoint_path())
    assert task.vocab == trainer.task.vocab and model.config.vocab_size == len(task.vocab)

    other = learning.learn_byte_merges([write_text(tmp_path, "other.txt", seed=1).read_text()],
                                       40)
    assert other != trainer.task.tokenizer.merges
    relearned = {**stored, "byte_bpe": {**stored["byte_bpe"], "merges": other}}
    with pytest.raises(FileError, match="vocab: .* not the 256 bytes and the products"):
        records.check_records("relearned.npz", json.loads(json.dumps(relearned)), arrays)

    def refuse(*args, **kwargs):
        raise AssertionError("merges learned again on resume")
    monkeypatch.setattr(learning, "learn_byte_merges", refuse)
    expected = trainer.windows.batch()
    resumed = text_run.resume_text(experiment.read_run(trainer.checkpoint_path), tmp_path / "bpe",
                                   {"steps": 20}, progress=False, log=lambda line: None)
    assert resumed.task.tokenizer.merges == trainer.task.tokenizer.merges
    assert "40 merges given, none learned" in resumed.task.description
    np.testing.assert_array_equal(resumed.windows.batch().tgt_in, expected.tgt_in)


@pytest.mark.parametrize("spoil, field", [
    (lambda r: r.pop("byte_bpe"), "byte_bpe: a record of merges is missing"),
    (lambda r: r["byte_bpe"].update(pattern="gpt3"), "byte_bpe.pattern"),
    (lambda r: r["byte_bpe"]["merges"].append(["a"]), "byte_bpe.merges.40."),
    (lambda r: r.update(bpe=BPE([]).to_json()), "bpe: the text task keeps its merges"),
    (lambda r: r["task"].update(level="char"), "byte_bpe: a record of merges is there"),
])
def test_a_bpe_text_checkpoints_merges_are_checked(tmp_path, spoil, field):
    trainer = bpe_trainer(tmp_path)
    arrays, stored = checkpoint.load_checkpoint(trainer.checkpoint_path)
    stored = json.loads(json.dumps(stored))
    records.check_records("ok.npz", stored, arrays)  # the records as written pass
    spoil(stored)
    with pytest.raises(FileError, match=rf"malformed checkpoint, {field.replace('[', '.')}"):
        records.check_records("bad.npz", stored, arrays)


def text_records(tmp_path):
    trainer = quiet_trainer(config(tmp_path, steps=10))
    trainer.fit()
    arrays, stored = checkpoint.load_checkpoint(trainer.checkpoint_path)
    return arrays, json.loads(json.dumps(stored))


@pytest.mark.parametrize("spoil, field", [
    (lambda r: r["windows"].update(bit_generator="MT19937"), "windows.bit_generator"),
    (lambda r: r["windows"]["state"].update(inc=-1), "windows.state.inc"),
    (lambda r: r["evaluations"][0].pop("bits_per_character"), "evaluations[0]"),
    (lambda r: r["train_config"].update(block_size=2**21), "train_config.block_size"),
    (lambda r: r.update(byte_bpe={"pattern": "standard", "merges": []}),
     "byte_bpe: a record of merges is there while the task's level is 'char'"),
    (lambda r: r.update(vocab=r["vocab"].replace('"e"', '"ee"')),
     "vocab: expected one character a token at level 'char', got 'ee'"),
])
def test_a_text_checkpoints_records_are_checked(tmp_path, spoil, field):
    arrays, stored = text_records(tmp_path)
    records.check_records("ok.npz", stored, arrays)  # the records as written pass
    spoil(stored)
    with pytest.raises(FileError, match=rf"malformed checkpoint, {field.replace('[', '.')}"):
        records.check_records("bad.npz", stored, arrays)


def test_the_strict_backend_trains_a_text_as_numpy_does(tmp_path):
    """The device's code path (the strict backend stands for CuPy) gives the
    same held-out losses as NumPy."""
    losses = {}
    for name in ("numpy", "strict"):
        with minitrans.using(name, dtype="float64"):
            trainer = quiet_trainer(config(tmp_path, out=name, steps=10, eval_every=5))
            trainer.fit()
        losses[name] = [evaluation["loss"] for evaluation in trainer.evaluations]
    assert losses["strict"] == pytest.approx(losses["numpy"], rel=1e-9)

"""With --data and no other flag, the run is sized from
the corpus (merges, width, max_len, said in one line with the reasons) and
stops on the held-out measure (patience, within a step and time budget
that the first line reports), not after a fixed number of steps."""

import dataclasses
import math
import subprocess
import sys

import pytest

from minitrans.data import write_tsv
from minitrans.data.corpus import MERGE_SHARE_PAIRS, merge_floor
from minitrans.data.tasks import task_from_tsv
from minitrans.training import corpus_defaults, experiment
from minitrans.training.optimisation import stopping
from minitrans.training.run_files.checkpoint import load_checkpoint
from minitrans.training.trainer import TrainConfig
from tests.conftest import tiny_trainer


def scores(*matches):
    return [{"step": 100 * (i + 1), "exact_match": m} for i, m in enumerate(matches)]


def test_patience_counts_the_evaluations_since_the_best():
    config = TrainConfig(patience=2, target_exact_match=1.0)
    assert stopping.evaluations_since_best(scores(0.5, 0.7, 0.6)) == 1
    assert stopping.stop_reason(config, scores(0.5, 0.7, 0.6), minutes=0) is None
    reason = stopping.stop_reason(config, scores(0.5, 0.7, 0.6, 0.7), minutes=0)  # a tie: no gain
    assert reason.startswith("held-out exact match has not improved for 2 evaluations")
    assert "(best 70.0% at step 200)" in reason
    assert stopping.stop_reason(config, scores(0.5, 1.0), 0).startswith("reached exact match")
    never = TrainConfig(target_exact_match=1.0)  # no patience: a fixed number of steps
    assert stopping.stop_reason(never, scores(0.9, 0.1, 0.1, 0.1, 0.1), 0) is None


def test_the_time_budget_stops_at_an_evaluation():
    config = TrainConfig(max_minutes=1.5)
    assert stopping.stop_reason(config, scores(0.1), minutes=1.4) is None
    assert stopping.stop_reason(config, scores(0.1), minutes=1.5) == (
        "the time budget of 1.5 minutes is spent, stopping")


def test_the_rules_are_described_in_one_line():
    text = stopping.describe(TrainConfig(**{**corpus_defaults.training_settings(), "merges": 9}))
    assert text == ("training for at most 20000 steps or 15 minutes, evaluating every 250; "
                    "stops early once held-out exact match reaches 100% or once it has not "
                    "improved for 4 evaluations (1000 steps)")
    assert stopping.describe(TrainConfig(steps=9, eval_every=3, target_exact_match=2.0)) == (
        "training for at most 9 steps, evaluating every 3")


def test_a_trainer_with_patience_stops_once_exact_match_stops_improving(tmp_path):
    trainer = tiny_trainer(tmp_path, steps=60, eval_every=3, patience=2)  # learns nothing
    trainer.fit()
    assert trainer.step < 60 and stopping.evaluations_since_best(trainer.evaluations) == 2
    trainer = tiny_trainer(tmp_path / "b", steps=60, eval_every=3, max_minutes=1e-9)
    trainer.fit()
    assert trainer.step == 3  # the first evaluation, then the budget is spent


def test_merges_follow_what_the_corpus_repeats():
    assert merge_floor(50) == 2 and merge_floor(18_000) == 180 == 18_000 // MERGE_SHARE_PAIRS
    assert merge_floor(18_001) == 181


def corpus(path, pairs):
    write_tsv(path, [(f"the cat {i} sat", f"die katze {i}") for i in range(pairs)])
    return path


@pytest.mark.parametrize("pairs, width", [(300, 64), (2300, 128)])
def test_the_model_is_sized_from_the_corpus_and_says_why(tmp_path, pairs, width):
    task = task_from_tsv(corpus(tmp_path / "c.tsv", pairs))
    sizes = corpus_defaults.model_sizes(task)
    assert sizes["d_model"] == width and sizes["d_ff"] == 4 * width
    model_config = experiment.model_config_for(task)
    train_config = TrainConfig(merges=len(task.tokenizer.bpe.merges))
    line = corpus_defaults.explain(task, train_config, model_config, given=set())
    assert line.startswith(f"chosen for this corpus: {len(task.tokenizer.bpe.merges)} merges "
                           f"(every pair of symbols seen at least {merge_floor(len(task.train))}"
                           " times, once in every 100 training pairs")
    assert f"d_model {width} ({len(task.train):,} training pairs" in line
    assert "max_len 64 (the longest pair has" in line
    assert "merges" not in corpus_defaults.explain(task, train_config, model_config, {"merges"})
    assert corpus_defaults.corpus_size(100_001) == "large"


def test_the_train_command_on_a_corpus_reports_its_budget_first_and_records_merges(tmp_path):
    data = corpus(tmp_path / "c.tsv", 300)
    result = subprocess.run(
        [sys.executable, "-m", "minitrans", "train", "translate", "--data", str(data),
         "--steps", "2", "--out", str(tmp_path / "run"), "--no-progress"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("training for at most 2 steps or 15 minutes, evaluating every")
    assert lines[1].startswith("evaluating and saving a moving average of the weights (decay "
                               "0.999; --average-decay 0: the weights themselves)")
    assert lines[4].startswith("chosen for this corpus: ") and "d_model 64 (270" in lines[4]
    arrays, records = load_checkpoint(tmp_path / "run" / "checkpoint.npz")
    assert any(name.startswith("optim/weights/") for name in arrays)  # the average in param/
    saved = experiment.read_run(tmp_path / "run" / "checkpoint.npz")
    learned = len(experiment.stored_tokenizer(records).bpe.merges)
    assert saved.train_config.merges == learned > 0  # the number learned, not None
    assert saved.train_config.patience == 4 and saved.model_config.d_model == 64
    resumed = experiment.resume_from(saved, tmp_path / "run")  # the same merges again
    assert resumed.task.vocab == experiment.build_task(
        dataclasses.replace(saved.train_config, merges=None)).vocab
    assert not math.isnan(resumed.evaluate()["loss"])

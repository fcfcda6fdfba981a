"""A corpus of one's own (``minitrans train translate --data FILE``) is read,
split into tokens and measured once, and goes by one name, "corpus", in the
TrainConfig, the Task, TASK_DEFAULTS and the checkpoint; a checkpoint that
calls it by its older names ("tsv", and "translate" in train_config) still
loads, resumes and translates."""

import collections
import json

import numpy as np
import pytest

from minitrans.data import Tokenizer, write_tsv
from minitrans.data.tasks import CORPUS, task_from_tsv
from minitrans.training import experiment
from minitrans.training.optimisation import evaluation
from minitrans.training.run_files import records
from minitrans.training.run_files.checkpoint import load_checkpoint

TINY = {"d_model": 16, "h": 2, "N": 1, "d_ff": 32, "dropout": 0.0}
WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
QUIET = {"progress": False, "log": lambda message: None}


def corpus_file(path, count=60):
    """Numbers spelled out -> their digits; no text appears twice, so a
    count of splits per text is a count per side of a pair."""
    write_tsv(path, [(" ".join(WORDS[int(d)] for d in str(n)), str(n))
                     for n in range(10, 10 + count)])
    return path


def counting_splits(monkeypatch):
    """A Counter of the texts Tokenizer.split is given from here on."""
    calls = collections.Counter()
    split = Tokenizer.split

    def counted(self, text):
        calls[text] += 1
        return split(self, text)

    monkeypatch.setattr(Tokenizer, "split", counted)
    return calls


def sides(task):
    return [text for pair in task.train + task.valid for text in pair]


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory):
    """A two-step run on a corpus: (its checkpoint, its folder)."""
    folder = tmp_path_factory.mktemp("corpus")
    config = experiment.train_config_for(
        "translate", data=str(corpus_file(folder / "numbers.tsv")), steps=2, batch_size=8,
        warmup=1, eval_every=2, eval_pairs=4, out_dir=str(folder / "run"))
    experiment.new_trainer(config, TINY, **QUIET).fit()
    return folder / "run" / "checkpoint.npz", folder


def with_old_names(path, out):
    """The checkpoint at ``path`` as older files name the corpus task."""
    with np.load(path) as stored:
        entries = {key: stored[key] for key in stored.files}
    task = json.loads(str(entries["json/task"]))
    train_config = json.loads(str(entries["json/train_config"]))
    assert (task["name"], train_config["task"]) == (CORPUS, CORPUS)
    entries["json/task"] = np.array(json.dumps({**task, "name": "tsv"}))
    entries["json/train_config"] = np.array(json.dumps({**train_config, "task": "translate"}))
    np.savez(out, **entries)
    return out


# ------------------------------------------------------------------ once


@pytest.mark.parametrize("level", ["bpe", "word"])
def test_building_a_data_run_splits_each_side_of_each_pair_once(tmp_path, monkeypatch, level):
    """Reading, skipping, the vocabulary, max_len and the memory check all
    use one split of each side (the old code split each side five times)."""
    config = experiment.train_config_for(
        "translate", data=str(corpus_file(tmp_path / "c.tsv")), level=level,
        out_dir=str(tmp_path / "run"))
    calls = counting_splits(monkeypatch)
    trainer = experiment.new_trainer(config, TINY, **QUIET)
    assert len(set(sides(trainer.task))) == len(sides(trainer.task)) == 120
    assert calls == collections.Counter(sides(trainer.task))


def test_resuming_a_data_run_splits_each_side_of_each_pair_once(corpus_run, tmp_path,
                                                                monkeypatch):
    path, _ = corpus_run
    saved = experiment.read_run(path)
    calls = counting_splits(monkeypatch)
    trainer = experiment.resume_from(saved, tmp_path, {"steps": 3}, **QUIET)
    assert calls == collections.Counter(sides(trainer.task))


def test_a_corpus_task_knows_its_longest_pair_without_splitting_again(tmp_path, monkeypatch):
    task = task_from_tsv(corpus_file(tmp_path / "c.tsv"), level="word")
    longest = max(len(src.split()) + len(tgt.split()) + 2 for src, tgt in task.train + task.valid)
    calls = counting_splits(monkeypatch)
    assert task.max_length == longest
    assert experiment.model_config_for(task).max_len == 64  # max(64, longest + 8)
    assert not calls


# -------------------------------------------------------------- one name


def test_the_corpus_task_has_one_name_in_config_task_and_defaults(tmp_path):
    config = experiment.train_config_for("translate", data=str(corpus_file(tmp_path / "c.tsv")))
    task = experiment.build_task(config)
    assert config.task == task.name == CORPUS == "corpus"
    assert CORPUS in experiment.TASK_DEFAULTS and "tsv" not in experiment.TASK_DEFAULTS
    assert task.description.startswith("corpus: translation pairs from c.tsv")
    assert experiment.train_config_for("translate").task == "translate"  # the toy task


def test_the_corpus_task_without_data_is_refused():
    config = experiment.train_config_for(CORPUS)
    with pytest.raises(ValueError, match="data: the corpus task reads a TSV file, got None"):
        experiment.build_task(config)


def test_a_corpus_checkpoint_records_the_one_name(corpus_run):
    _, saved = load_checkpoint(corpus_run[0])
    assert saved["task"]["name"] == saved["train_config"]["task"] == CORPUS


def test_reading_older_names_renames_the_corpus_task_only():
    toy = {"task": {"name": "translate", "kind": "seq2seq", "level": "word"},
           "train_config": {"task": "translate", "data": None}}
    assert records.read_task_names(toy) == toy
    old = {"task": {"name": "tsv", "kind": "seq2seq", "level": "bpe"},
           "train_config": {"task": "translate", "data": "c.tsv"}}
    read = records.read_task_names(old)
    assert (read["task"]["name"], read["train_config"]["task"]) == (CORPUS, CORPUS)
    assert old["task"]["name"] == "tsv"  # the records given are left as they are


def test_a_checkpoint_calling_the_corpus_tsv_loads_translates_and_resumes(corpus_run,
                                                                         tmp_path):
    path, folder = corpus_run
    old = with_old_names(path, tmp_path / "old.npz")
    model, task = experiment.load_trained(old)
    new_model, new_task = experiment.load_trained(path)
    assert task.name == CORPUS
    sources = ["four two", "nine nine", "one zero"]
    assert (evaluation.predict(model, task, sources)
            == evaluation.predict(new_model, new_task, sources))
    saved = experiment.read_run(old)
    assert saved.train_config.task == CORPUS
    trainer = experiment.resume_from(saved, tmp_path / "more", {"steps": 4}, **QUIET)
    trainer.fit()
    _, resumed = load_checkpoint(tmp_path / "more" / "checkpoint.npz")
    assert resumed["step"] == 4
    assert resumed["task"]["name"] == resumed["train_config"]["task"] == CORPUS

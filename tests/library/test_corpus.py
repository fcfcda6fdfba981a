"""A user's corpus at sub-word level: byte-pair tokens learned from
the training pairs, long pairs skipped, the unknown share reported, and the
merges kept in the checkpoint, checked field by field when it is read."""

import json

import numpy as np
import pytest

from minitrans.data import BPE, UNK_ID, DataError, Tokenizer, learn_subwords, write_tsv
from minitrans.data import corpus
from minitrans.data.tasks import task_from_tsv
from minitrans.training import experiment
from minitrans.training.run_files import records
from minitrans.training.run_files.checkpoint import CheckpointError
from minitrans.training.trainer import TrainConfig
from tests.library.conftest import assert_names

TINY = {"d_model": 16, "h": 2, "N": 1, "d_ff": 32, "dropout": 0.0}
NUMBERS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def spelled(n):
    return " ".join(NUMBERS[int(d)] for d in str(n))


def numbers_corpus(path, count=200, extra=()):
    """Digits spelled out -> the digits: "four two" -> "42" (every target a
    word that word level cannot know unless it saw it)."""
    write_tsv(path, [(spelled(n), str(n)) for n in range(10, 10 + count)] + list(extra))
    return path


# --------------------------------------------------------------- tokenizer


def test_bpe_tokenizer_splits_and_joins_as_its_merges_do():
    tokenizer = Tokenizer("bpe", BPE.learn(["low low lower"], 2))
    assert tokenizer.split("lowest  low") == ["lo", "w", "e", "s", "t</w>", "low</w>"]
    assert tokenizer.join(tokenizer.split("lowest  low")) == "lowest low"
    assert tokenizer.symbols() == ["lo", "low</w>"] and Tokenizer("word").symbols() == []


def test_bpe_tokenizer_needs_its_merges_and_other_levels_refuse_them():
    with pytest.raises(DataError) as info:
        Tokenizer("bpe")
    assert_names(info, "bpe", "a BPE of learned merges")
    with pytest.raises(DataError):
        Tokenizer("word", BPE([]))


def test_learned_subwords_never_merge_digits():
    """Numbers are written digit by digit: a merge of digits would give a
    token for each chunk of a number, most seen a few times only."""
    tokenizer = learn_subwords(["twenty one\t21", "twenty two\t22"] * 50, 100)
    assert tokenizer.split("21") == ["2", "1</w>"]
    assert tokenizer.split("twenty") == ["twenty</w>"]
    assert all(not any(c.isdigit() for c in a + b) for a, b in tokenizer.bpe.merges)


# ---------------------------------------------------------------- corpora


def test_bpe_is_the_default_and_leaves_no_held_out_token_unknown(tmp_path):
    """At word level (the old default) every held-out target is a number
    never seen in training: 100% unknown, exact match 0 for ever."""
    path = numbers_corpus(tmp_path / "numbers.tsv")
    task = task_from_tsv(path)
    assert task.tokenizer.level == "bpe" and "(bpe level)" in task.description
    assert corpus.unknown_shares(task) == {"source": 0.0, "target": 0.0}
    words = task_from_tsv(path, level="word")
    assert corpus.unknown_shares(words)["target"] == 1.0
    line, warnings = corpus.coverage_report(words)
    assert "source 0.0%, target 100.0%" in line
    assert warnings == [
        "100.0% of the held-out target tokens are unknown at word level; "
        "try --level bpe (sub-words: unseen words are made of known pieces)"
    ]
    assert corpus.coverage_report(task)[1] == []


def test_the_bpe_vocabulary_holds_every_merge_and_character(tmp_path):
    task = task_from_tsv(numbers_corpus(tmp_path / "numbers.tsv"), merges=30)
    assert all(a + b in task.vocab for a, b in task.tokenizer.bpe.merges)
    for digit in "0123456789":  # each one both inside a word and ending it
        assert digit in task.vocab and digit + "</w>" in task.vocab
    assert UNK_ID not in task.vocab.encode(task.tokenizer.split("nine zero 9090 onenine"))


def test_unknown_pieces_name_what_the_user_wrote(tmp_path):
    task = task_from_tsv(numbers_corpus(tmp_path / "numbers.tsv"))
    assert corpus.unknown_pieces(task, "one €two ¥") == ["€", "¥"]
    words = task_from_tsv(tmp_path / "numbers.tsv", level="word")
    assert corpus.unknown_pieces(words, "one eleven 7 one") == ["eleven", "7"]


def test_pairs_too_long_are_skipped_and_counted(tmp_path):
    """A megabyte line once set max_len to about a million and crashed; it is
    skipped before merges are learned, and max_len follows the pairs kept."""
    huge = ("one " * 250_000).strip()
    long_in_tokens = " ".join(["9"] * 300)  # 300 characters, 300 tokens
    path = numbers_corpus(tmp_path / "long.tsv", extra=[(huge, "1"), (long_in_tokens, "9")])
    task = task_from_tsv(path)
    assert "skipped 1 pair longer than 1000 characters a side" in task.description
    assert "skipped 1 pair longer than 256 tokens a side" in task.description
    assert task.max_length < 20
    assert experiment.model_config_for(task).max_len == 64


def test_a_corpus_of_pairs_all_too_long_is_refused(tmp_path):
    path = tmp_path / "long.tsv"
    write_tsv(path, [("x" * 2000, "y"), ("a", "b" * 1001)])
    with pytest.raises(DataError) as info:
        task_from_tsv(path)
    assert_names(info, "long.tsv", "1000 characters", "nothing is left to train on")


def test_merges_are_learned_from_the_training_pairs_only(tmp_path):
    path = numbers_corpus(tmp_path / "numbers.tsv", count=50)
    task = task_from_tsv(path, merges=1000)
    trained = {w for pair in task.train for text in pair for w in text.split()}
    held_only = {w for pair in task.valid for w in pair[0].split()} - trained
    assert all(a + b != w + "</w>" for a, b in task.tokenizer.bpe.merges for w in held_only)
    assert task_from_tsv(path, merges=1000).tokenizer == task.tokenizer  # the same merges


# ------------------------------------------------------------- checkpoints


@pytest.fixture(scope="module")
def bpe_checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bpe")
    data = numbers_corpus(folder / "numbers.tsv")
    config = TrainConfig(
        task="translate",
        data=str(data),
        merges=40,
        steps=2,
        batch_size=8,
        warmup=1,
        eval_every=1,
        eval_pairs=4,
        out_dir=str(folder / "run"),
    )
    trainer = experiment.new_trainer(config, TINY, progress=False, log=lambda message: None)
    trainer.fit()
    return trainer, folder


def test_the_merges_are_saved_and_loaded_back(bpe_checkpoint):
    trainer, folder = bpe_checkpoint
    model, task = experiment.load_trained(folder / "run" / "checkpoint.npz")
    assert task.tokenizer == trainer.task.tokenizer and task.vocab == trainer.task.vocab
    resumed = experiment.resume_trainer(
        folder / "run" / "checkpoint.npz", steps=3, progress=False, log=lambda message: None
    )
    assert resumed.task.tokenizer == trainer.task.tokenizer


def test_best_checkpoint_is_kept_beside_the_last(bpe_checkpoint, monkeypatch):
    """best.npz holds the highest held-out exact match; a tie keeps the earlier."""
    trainer, folder = bpe_checkpoint
    assert (folder / "run" / "best.npz").exists()
    scores = iter([0.5, 0.25, 0.5, 0.75])
    monkeypatch.setattr(
        trainer,
        "evaluate",
        lambda: {
            "step": trainer.step,
            "pairs": 4,
            "loss": 1.0,
            "token_accuracy": 0.5,
            "exact_match": next(scores),
        },
    )
    trainer.evaluations = []
    saved = []
    monkeypatch.setattr(trainer, "save", saved.append)
    for step in range(1, 5):
        trainer.step = step
        trainer.evaluate_and_save(log=lambda message: None)
    best = trainer.best_checkpoint_path()
    assert saved.count(best) == 2 and saved.index(best) == 1  # steps 1 and 4
    assert trainer.best_evaluation()["exact_match"] == 0.75


def test_a_resumed_run_whose_data_changed_is_refused(bpe_checkpoint, tmp_path):
    trainer, folder = bpe_checkpoint
    data = folder / "numbers.tsv"
    original = data.read_bytes()
    try:
        data.write_text("".join(f"{spelled(n)} ten\t{n}0\n" for n in range(10, 60)))
        with pytest.raises(CheckpointError) as info:
            experiment.resume_trainer(folder / "run" / "checkpoint.npz", steps=3, progress=False)
        assert_names(info, "checkpoint.npz", "another vocabulary")
    finally:
        data.write_bytes(original)


def spoilt(folder, tmp_path, name="odd.npz", **changes):
    """The bpe checkpoint with records replaced (value None: removed)."""
    with np.load(folder / "run" / "checkpoint.npz") as stored:
        entries = {key: stored[key] for key in stored.files}
    for record, value in changes.items():
        del entries[f"json/{record}"]
        if value is not None:
            entries[f"json/{record}"] = np.array(json.dumps(value))
    np.savez(tmp_path / name, **entries)
    return tmp_path / name


def merges_text(merges, **fields):
    return json.dumps({"kind": "bpe", "end_of_word": "</w>", "merges": merges, **fields})


@pytest.mark.parametrize(
    "bpe, fragment",
    [
        ("{not json", "not valid JSON"),
        ({"merges": []}, "not a JSON text"),  # the record itself must be a text
        (json.dumps([]), "bpe: expected a JSON object"),
        (json.dumps({"kind": "bpe", "merges": []}), "bpe: expected the fields"),
        (merges_text([], kind="wordpiece"), "bpe.kind: expected 'bpe'"),
        (merges_text([], end_of_word="@@"), "bpe.end_of_word"),
        (merges_text({"a": "b"}), "bpe.merges: expected a list"),
        (merges_text([["o", "n", "e"]]), "bpe.merges[0]: expected a list of two symbols"),
        (merges_text([["o", "n"], ["", "e"]]), "bpe.merges[1]: expected symbols of 1 to"),
        (merges_text([["o", 1]]), "bpe.merges[0]: expected symbols"),
        (merges_text([["o n", "e"]]), "bpe.merges[0]: expected symbols"),
        (merges_text([["x" * 5000, "e"]]), "bpe.merges[0]: expected symbols of 1 to 4096"),
        (merges_text([["q", "z</w>"]]), "make symbols the vocabulary lacks"),
        (None, "bpe: a record of merges is missing while the task's level is 'bpe'"),
    ],
)
def test_a_malformed_bpe_record_is_refused_naming_the_field(
    bpe_checkpoint, tmp_path, bpe, fragment
):
    _, folder = bpe_checkpoint
    path = spoilt(folder, tmp_path, bpe=bpe)
    for load in (
        experiment.load_trained,
        lambda p: experiment.resume_trainer(p, steps=3, progress=False),
    ):
        with pytest.raises(CheckpointError) as info:
            load(path)
        assert fragment in str(info.value) and "odd.npz" in str(info.value), str(info.value)


def test_too_many_merges_are_refused_before_they_are_used(bpe_checkpoint, tmp_path, monkeypatch):
    _, folder = bpe_checkpoint
    monkeypatch.setattr(records, "MAX_MERGES", 3)
    path = spoilt(folder, tmp_path, bpe=merges_text([["o", "n"]] * 4))
    with pytest.raises(CheckpointError) as info:
        experiment.load_trained(path)
    assert "bpe.merges: expected a list of at most 3 merges, got 4" in str(info.value)


def test_merges_beside_a_word_level_task_are_refused(bpe_checkpoint, tmp_path):
    _, folder = bpe_checkpoint
    task = {"name": "corpus", "kind": "seq2seq", "level": "word"}
    with pytest.raises(CheckpointError) as info:
        experiment.load_trained(spoilt(folder, tmp_path, task=task))
    assert "a record of merges is there while the task's level is 'word'" in str(info.value)


def test_data_gets_the_defaults_tuned_for_a_user_s_corpus():
    """With --data: bpe level, merges chosen from the corpus (None until
    learned) and the corpus task's schedule (half the translate task's
    learning rate, patience); a built-in task keeps its own."""
    with_data = experiment.train_config_for("translate", data="pairs.tsv")
    assert (with_data.level, with_data.merges, with_data.lr_factor) == ("bpe", None, 0.5)
    assert (with_data.patience, with_data.max_minutes) == (4, 15.0)
    assert experiment.train_config_for("translate").lr_factor == 1.0
    assert (with_data.task, experiment.train_config_for("translate").task) == (
        "corpus", "translate")

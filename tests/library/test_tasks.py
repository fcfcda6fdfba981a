"""The built-in toy tasks and tasks from TSV files (minitrans.data.tasks)."""

import functools

import pytest

from minitrans.core import backend
from minitrans.data import BOS_ID, UNK_ID, DataError, Tokenizer, Vocab, toy_language, write_tsv
from minitrans.data.tasks import TASKS, Task, load_task, task_from_tsv
from minitrans.data.toy_language import Clause, NounPhrase
from minitrans.model.config import ModelConfig
from minitrans.model.language_model import DecoderOnlyLM
from minitrans.model.transformer import Transformer
from tests.library.conftest import assert_names

NAMES = ["copy", "reverse", "translate", "lm"]
# The language tasks need num2words and babel: tests/library/test_language_tasks.py
LANGUAGE_NAMES = ["numbers", "dates"]
SMALL = dict(num_train=300, num_valid=40)


@functools.lru_cache(maxsize=None)
def small_task(name, seed=0):
    return load_task(name, seed=seed, **SMALL)


@functools.lru_cache(maxsize=None)
def default_task(name):
    return load_task(name)


def sources(pairs):
    return {src for src, _ in pairs}


# ------------------------------------------------------------ every task


def test_the_registry_lists_every_task():
    assert sorted(TASKS) == sorted(NAMES + LANGUAGE_NAMES)
    assert all(TASKS[name].description.startswith(name + ":") for name in TASKS)


@pytest.mark.parametrize("name", NAMES)
def test_a_task_is_the_same_for_a_seed_and_different_for_another(name):
    again = load_task(name, seed=0, **SMALL)
    assert again.train == small_task(name).train and again.valid == small_task(name).valid
    assert again.vocab == small_task(name).vocab
    assert small_task(name, seed=1).train != small_task(name).train


@pytest.mark.parametrize("name", NAMES)
def test_validation_sources_are_never_in_the_training_data(name):
    task = default_task(name)
    assert not sources(task.valid) & sources(task.train)
    assert len(sources(task.valid)) == len(task.valid)  # no repeats inside either
    assert len(sources(task.train)) == len(task.train)


@pytest.mark.parametrize("name, train, valid", [("copy", 20000, 1000), ("reverse", 20000, 1000),
                                                ("translate", 20000, 1000), ("lm", 9000, 1000)])
def test_default_sizes(name, train, valid):
    task = default_task(name)
    assert (len(task.train), len(task.valid)) == (train, valid)
    assert task.name == name and task.description == TASKS[name].description


@pytest.mark.parametrize("name", NAMES)
def test_chosen_sizes(name):
    assert (len(small_task(name).train), len(small_task(name).valid)) == (300, 40)


@pytest.mark.parametrize("name", NAMES)
def test_validation_pairs_use_only_known_tokens(name):
    task = small_task(name)
    for src, tgt in task.valid:
        assert UNK_ID not in sum(task.encode_pair(src, tgt), [])


@pytest.mark.parametrize("name", NAMES)
def test_max_length_is_the_longest_pair_with_its_specials(name):
    task = small_task(name)
    tokens = [
        len(task.tokenizer.split(s)) + len(task.tokenizer.split(t)) + 2
        for s, t in task.train + task.valid
    ]
    assert task.max_length == max(tokens)
    batch = task.make_batch(task.train + task.valid)
    assert batch.tgt_in.shape[1] + 1 <= task.max_length


@pytest.mark.parametrize("name", NAMES)
def test_make_batch_gives_device_arrays_a_model_accepts(backend_name, name):
    task = small_task(name)
    batch = task.make_batch(task.train[:5])
    assert backend.is_array(batch.tgt_in) and backend.is_array(batch.tgt_out)
    assert batch.tgt_in.shape == batch.tgt_out.shape and batch.tgt_in.shape[0] == 5
    assert (backend.to_numpy(batch.tgt_in)[:, 0] == BOS_ID).all()
    config = ModelConfig.preset("tiny", vocab_size=len(task.vocab), max_len=task.max_length,
                                tie_embeddings=True, decoder_only=task.kind == "lm")
    if task.kind == "lm":
        assert batch.src is None
        logits = DecoderOnlyLM(config, rng=0).forward(batch.tgt_in)
    else:
        assert backend.is_array(batch.src) and batch.src.shape[0] == 5
        logits = Transformer(config, rng=0).forward(batch.src, batch.tgt_in)
    assert logits.shape == (*batch.tgt_in.shape, len(task.vocab))


def test_encode_pair_and_decode():
    task = small_task("translate")
    src_ids, tgt_ids = task.encode_pair("the dog sees a cat", "lo vesko ka un mirra ro miru")
    assert len(src_ids) == 5 and len(tgt_ids) == 7
    assert task.decode([BOS_ID] + tgt_ids + [2, 7]) == "lo vesko ka un mirra ro miru"


def test_unknown_task_name():
    with pytest.raises(ValueError) as info:
        load_task("summarise")
    assert_names(info, "task", "summarise", *NAMES)


@pytest.mark.parametrize(
    "sizes, name",
    [
        ({"num_train": 0}, "num_train"),
        ({"num_valid": 2.5}, "num_valid"),
        ({"num_train": 9500, "num_valid": 1000}, "num_train"),
    ],
)
def test_bad_sizes(sizes, name):
    with pytest.raises(ValueError) as info:
        load_task("lm", **sizes)
    assert_names(info, name)


def test_a_task_kind_must_be_known():
    with pytest.raises(ValueError) as info:
        Task("x", "classify", Tokenizer("char"), Vocab([]), [], [])
    assert_names(info, "kind", "seq2seq", "lm")


# ------------------------------------------------------------ copy, reverse


def test_copy_targets_are_their_sources():
    task = small_task("copy")
    assert task.kind == "seq2seq" and task.tokenizer.level == "char"
    for src, tgt in task.train + task.valid:
        assert tgt == src and len(src) == 10 and src.isdigit()
    assert sorted(task.vocab.tokens[4:]) == list("0123456789")


def test_reverse_targets_are_reversed_copies():
    task = small_task("reverse")
    assert all(tgt == src[::-1] for src, tgt in task.train + task.valid)
    assert task.train[0][1] != task.train[0][0]
    assert sources(task.train) == sources(small_task("copy").train)


# ------------------------------------------------------------ translate


SENTENCES = [
    (
        Clause(NounPhrase("the", "dog", "big"), "see", NounPhrase("a", "cat", "small")),
        "the big dog sees a small cat",
        "lo vesko gran ka un mirra piki ro miru",
    ),
    (
        Clause(
            NounPhrase("the", "cat", plural=True),
            "chase",
            NounPhrase("the", "bird", "red"),
            past=True,
            negated=True,
        ),
        "the cats did not chase the red bird",
        "lo mirran ka lo pilu rua ro nai kasuta",
    ),
    (
        Clause(NounPhrase("a", "wolf", "tired", plural=True), "bite", NounPhrase("a", "child")),
        "some tired wolves bite a child",
        "sen ulfan lasu ka un tiko ro moru",
    ),
    (
        Clause(
            NounPhrase("a", "king"), "fear", NounPhrase("the", "fox", plural=True), negated=True
        ),
        "a king does not fear the foxes",
        "un rega ka lo renkan ro nai timo",
    ),
]


@pytest.mark.parametrize("clause, english, target", SENTENCES)
def test_the_grammar_renders_both_languages(clause, english, target):
    assert toy_language.english(clause) == english
    assert toy_language.target(clause) == target


def test_translation_reorders_words():
    nouns = {row[2] + suffix for row in toy_language.NOUNS for suffix in ("", "n")}
    adjectives = {row[1] for row in toy_language.ADJECTIVES}
    verbs = {row[3] + suffix for row in toy_language.VERBS for suffix in ("", "ta")}
    reordered = 0
    for src, tgt in small_task("translate").train:
        words = tgt.split()
        assert words[-1] in verbs  # subject-object-verb
        assert src.split()[-1] not in {row[0] for row in toy_language.VERBS}
        for before, word in zip(words, words[1:]):
            if word in adjectives:
                assert before in nouns  # adjectives follow their noun
                reordered += 1
    assert reordered > 100


def test_translate_is_word_level_with_one_shared_vocabulary():
    task = small_task("translate")
    assert task.kind == "seq2seq" and task.tokenizer.level == "word"
    assert set(toy_language.all_words()) == set(task.vocab.tokens[4:])


def test_every_word_form_is_distinct_and_the_languages_share_none():
    tl = toy_language
    english = [w for row in tl.NOUNS for w in row[:2]] + [row[0] for row in tl.ADJECTIVES]
    english += [w for row in tl.VERBS for w in row[:3]] + [
        "the",
        "a",
        "some",
        "do",
        "does",
        "did",
        "not",
    ]
    target = [row[2] + suffix for row in tl.NOUNS for suffix in ("", "n")] + [
        row[1] for row in tl.ADJECTIVES
    ]
    target += [row[3] + suffix for row in tl.VERBS for suffix in ("", "ta")] + [
        "lo",
        "un",
        "sen",
        "ka",
        "ro",
        "nai",
    ]
    assert len(set(english)) == len(english) and len(set(target)) == len(target)
    assert not set(english) & set(target)
    assert set(tl.all_words()) == set(english) | set(target)
    assert tl.NUM_SENTENCES > 100_000


# ------------------------------------------------------------ lm


def test_addition_sums_are_correct():
    task = default_task("lm")
    assert task.kind == "lm" and task.tokenizer.level == "char"
    for src, tgt in task.train + task.valid:
        a, b = src.removesuffix("=").split("+")
        assert int(a) + int(b) == int(tgt) and str(int(tgt)) == tgt
        assert 0 <= int(a) < 100 and 0 <= int(b) < 100
    assert len(sources(task.train + task.valid)) == 10000


def test_the_lm_reads_the_prompt_and_its_answer_as_one_sequence():
    task = small_task("lm")
    batch = task.make_batch([("12+34=", "46")])
    vocab = task.vocab
    assert vocab.decode(backend.to_numpy(batch.tgt_out)[0]) == list("12+34=46")
    assert backend.to_numpy(batch.tgt_in)[0, 0] == BOS_ID


# ------------------------------------------------------------ TSV tasks


def _corpus(tmp_path, count, name="corpus.tsv"):
    path = tmp_path / name
    write_tsv(path, [(f"word{i} shared", f"mot{i} commun") for i in range(count)])
    return path


def test_task_from_tsv_holds_out_a_seeded_slice(tmp_path):
    path = _corpus(tmp_path, 20)
    task = task_from_tsv(path)
    assert (len(task.train), len(task.valid)) == (18, 2)
    assert "held out 2 of 20 pairs for validation" in task.description
    assert not sources(task.valid) & sources(task.train)
    assert task_from_tsv(path).valid == task.valid
    assert any(task_from_tsv(path, seed=seed).valid != task.valid for seed in range(1, 5))


def test_task_from_tsv_builds_the_vocabulary_from_training_pairs_only(tmp_path):
    task = task_from_tsv(_corpus(tmp_path, 20), level="word", valid_fraction=0.25)
    assert len(task.valid) == 5
    src, tgt = task.valid[0]
    src_ids, tgt_ids = task.encode_pair(src, tgt)
    assert (
        src_ids[0] == UNK_ID and tgt_ids[0] == UNK_ID
    )  # "word<i>", "mot<i>": seen only in validation
    assert "shared" in task.vocab.tokens and "commun" in task.vocab.tokens


def test_task_from_tsv_keeps_at_least_one_pair_on_each_side(tmp_path):
    task = task_from_tsv(_corpus(tmp_path, 2), valid_fraction=0.01)
    assert (len(task.train), len(task.valid)) == (1, 1)
    task = task_from_tsv(_corpus(tmp_path, 2), valid_fraction=0.99)
    assert (len(task.train), len(task.valid)) == (1, 1)


def test_a_one_pair_file_is_too_small_to_hold_out_from(tmp_path):
    path = _corpus(tmp_path, 1)
    with pytest.raises(DataError) as info:
        task_from_tsv(path)
    assert str(path) in str(info.value) and "too small" in str(info.value)


def test_task_from_tsv_with_a_validation_file(tmp_path):
    task = task_from_tsv(_corpus(tmp_path, 5), _corpus(tmp_path, 3, "valid.tsv"), level="char")
    assert (len(task.train), len(task.valid)) == (5, 3)
    assert task.tokenizer.level == "char" and "valid.tsv" in task.description
    assert task.make_batch(task.valid).src.shape[0] == 3


def test_task_from_tsv_drops_training_repeats_of_validation_sources(tmp_path):
    path = tmp_path / "repeats.tsv"
    write_tsv(path, [(source, f"target{i}") for source in ("one", "two") for i in range(3)])
    task = task_from_tsv(path, valid_fraction=0.2)  # holds out 1 of 6; its source has 2 repeats
    assert not sources(task.valid) & sources(task.train)
    assert (len(task.train), len(task.valid)) == (3, 1)
    assert "held out 1 of 6 pairs" in task.description and "dropped 2" in task.description


def test_task_from_tsv_checks_the_fraction():
    with pytest.raises(ValueError) as info:
        task_from_tsv("unused.tsv", valid_fraction=1.0)
    assert_names(info, "valid_fraction")

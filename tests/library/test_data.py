"""Vocabulary, tokenisers, padding, batches and TSV files (minitrans.data)."""

import itertools

import numpy as np
import pytest

from minitrans.core import backend
from minitrans.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SPECIAL_TOKENS,
    UNK_ID,
    DataError,
    Tokenizer,
    Vocab,
    iterate_batches,
    make_lm_batch,
    make_seq2seq_batch,
    pad,
    read_tsv,
    write_tsv,
)
from minitrans.files.rules import FileError
from tests.library.conftest import assert_names

# ----------------------------------------------------------------- vocabulary


def test_special_tokens_have_fixed_ids():
    vocab = Vocab(["a", "b"])
    assert SPECIAL_TOKENS == ("<pad>", "<bos>", "<eos>", "<unk>")
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    assert vocab.tokens == ["<pad>", "<bos>", "<eos>", "<unk>", "a", "b"]
    assert len(vocab) == 6


def test_build_orders_by_frequency_then_alphabetically():
    vocab = Vocab.build([["b", "c", "a"], ["c", "b", "d"], ["c"]])
    assert vocab.tokens[4:] == ["c", "b", "a", "d"]  # c:3, b:2, then a and d tied at 1


def test_build_does_not_depend_on_the_order_of_the_data():
    lists = [["x", "y"], ["y", "z"], ["w"]]
    assert Vocab.build(lists) == Vocab.build(lists[::-1])


def test_build_drops_rare_tokens_and_does_not_count_special_ones():
    vocab = Vocab.build([["a", "a", "b", "<unk>"]], min_freq=2)
    assert vocab.tokens[4:] == ["a"]
    assert vocab.encode(["b", "<unk>"]) == [UNK_ID, UNK_ID]


@pytest.mark.parametrize("tokens", [["a", "b", "a"], ["a", "<eos>"], ["a", ""]])
def test_constructor_rejects_repeated_special_or_empty_tokens(tokens):
    with pytest.raises(DataError) as info:
        Vocab(tokens)
    assert_names(info, "tokens")


def test_unknown_tokens_encode_to_unk():
    vocab = Vocab(["the", "cat"])
    assert vocab.encode(["the", "dog", "cat"]) == [4, UNK_ID, 5]


def test_decode_stops_at_the_first_eos_and_drops_pad_and_bos():
    vocab = Vocab(["a", "b"])
    ids = [BOS_ID, 4, UNK_ID, 5, EOS_ID, 4, PAD_ID]
    assert vocab.decode(ids) == ["a", "<unk>", "b"]
    assert vocab.decode(ids, strip_special=False) == [
        "<bos>",
        "a",
        "<unk>",
        "b",
        "<eos>",
        "a",
        "<pad>",
    ]
    assert vocab.decode(np.array([4, PAD_ID, 5])) == ["a", "b"]


def test_decode_rejects_ids_outside_the_vocabulary():
    with pytest.raises(DataError) as info:
        Vocab(["a"]).decode([4, 5])
    assert_names(info, "ids", "5")


def test_json_round_trip():
    vocab = Vocab.build([["hello", "wörld", "\t", '"quoted"']])
    again = Vocab.from_json(vocab.to_json())
    assert again == vocab and again.tokens == vocab.tokens
    assert again.encode(["wörld"]) == vocab.encode(["wörld"])


@pytest.mark.parametrize(
    "text", ["not json", "[1, 2]", '{"tokens": ["a"]}', '{"specials": ["<pad>"], "tokens": []}']
)
def test_from_json_rejects_bad_input(text):
    with pytest.raises(DataError):
        Vocab.from_json(text)


# ----------------------------------------------------------------- tokenisers


def test_char_tokenizer_splits_every_character():
    tokenizer = Tokenizer("char")
    assert tokenizer.level == "char"
    assert tokenizer.split("12+3=") == ["1", "2", "+", "3", "="]
    assert tokenizer.join(["4", "6"]) == "46"


def test_word_tokenizer_splits_on_whitespace():
    tokenizer = Tokenizer("word")
    assert tokenizer.split("  the dog\tsees  a cat ") == ["the", "dog", "sees", "a", "cat"]
    assert tokenizer.join(["the", "dog"]) == "the dog"


def test_unknown_tokenizer_level():
    with pytest.raises(ValueError) as info:
        Tokenizer("byte")
    assert_names(info, "level", "char", "word", "bpe", "'byte'")


# -------------------------------------------------------------------- batches


def test_pad_fills_short_sequences_on_the_right():
    padded = pad([[5, 6, 7], [8], []])
    assert isinstance(padded, np.ndarray) and padded.dtype == np.int64
    np.testing.assert_array_equal(padded, [[5, 6, 7], [8, 0, 0], [0, 0, 0]])
    np.testing.assert_array_equal(pad([[5], [6, 7]], pad_id=9), [[5, 9], [6, 7]])


def test_pad_rejects_an_empty_list():
    with pytest.raises(DataError) as info:
        pad([])
    assert_names(info, "sequences")


PAIRS = [([4, 5, 6], [7, 8]), ([9], [10, 11, 12, 13]), ([4, 4], [5])]


def test_seq2seq_batch_shifts_the_target_right(backend_name):
    batch = make_seq2seq_batch(PAIRS)
    for array in (batch.src, batch.tgt_in, batch.tgt_out):
        assert backend.is_array(array)
    src, tgt_in, tgt_out = (backend.to_numpy(a) for a in (batch.src, batch.tgt_in, batch.tgt_out))
    assert src.shape == (3, 3) and tgt_in.shape == tgt_out.shape == (3, 5)
    np.testing.assert_array_equal(src[1], [9, PAD_ID, PAD_ID])
    assert (tgt_in[:, 0] == BOS_ID).all()
    real = tgt_in[:, 1:] != PAD_ID  # the target tokens; tgt_out's extra entry is <eos>
    np.testing.assert_array_equal(tgt_in[:, 1:][real], tgt_out[:, :-1][real])
    np.testing.assert_array_equal(tgt_out[0], [7, 8, EOS_ID, PAD_ID, PAD_ID])
    assert batch.num_tokens == 3 + 5 + 2 and isinstance(batch.num_tokens, int)


def test_lm_batch_predicts_each_next_token(backend_name):
    batch = make_lm_batch([[4, 5, 6], [7]])
    assert batch.src is None
    tgt_in, tgt_out = backend.to_numpy(batch.tgt_in), backend.to_numpy(batch.tgt_out)
    np.testing.assert_array_equal(tgt_in, [[BOS_ID, 4, 5, 6], [BOS_ID, 7, PAD_ID, PAD_ID]])
    np.testing.assert_array_equal(tgt_out, [[4, 5, 6, EOS_ID], [7, EOS_ID, PAD_ID, PAD_ID]])
    assert batch.num_tokens == 4 + 2


@pytest.mark.parametrize("make", [make_seq2seq_batch, make_lm_batch])
def test_an_empty_batch_is_an_error(make):
    with pytest.raises(DataError):
        make([])


def _epochs(examples, batch_size, seed, batches):
    return list(
        itertools.islice(
            iterate_batches(examples, batch_size, np.random.default_rng(seed)), batches
        )
    )


def test_batches_are_the_same_for_a_seed_and_differ_for_another():
    examples = list(range(20))
    assert _epochs(examples, 4, seed=0, batches=10) == _epochs(examples, 4, seed=0, batches=10)
    assert _epochs(examples, 4, seed=0, batches=10) != _epochs(examples, 4, seed=1, batches=10)


def test_each_epoch_visits_every_example_once_in_a_new_order():
    first, second = (
        _epochs(list(range(12)), 4, seed=3, batches=3),
        _epochs(list(range(12)), 4, seed=3, batches=6)[3:],
    )
    for epoch in (first, second):
        assert all(len(batch) == 4 for batch in epoch)
        assert sorted(sum(epoch, [])) == list(range(12))
    assert first != second


def test_the_last_partial_batch_of_an_epoch_is_dropped():
    batches = _epochs(list(range(10)), 4, seed=0, batches=4)  # two epochs of two batches
    assert [len(b) for b in batches] == [4, 4, 4, 4]
    for epoch in (batches[:2], batches[2:]):
        assert len(set(sum(epoch, []))) == 8


def test_a_dataset_smaller_than_a_batch_is_one_batch():
    batches = _epochs(["a", "b", "c"], 8, seed=0, batches=2)
    assert [sorted(b) for b in batches] == [["a", "b", "c"]] * 2


def test_restoring_the_generator_state_resumes_the_same_batches():
    examples, rng = list(range(10)), np.random.default_rng(5)
    state = rng.bit_generator.state
    uninterrupted = list(itertools.islice(iterate_batches(examples, 3, rng), 7))
    rng.bit_generator.state = state
    resumed = list(itertools.islice(iterate_batches(examples, 3, rng), 4, 7))
    assert resumed == uninterrupted[4:]


def test_iterate_batches_checks_its_arguments():
    with pytest.raises(ValueError) as info:
        next(iterate_batches([1], 0, np.random.default_rng(0)))
    assert_names(info, "batch_size")
    with pytest.raises(DataError):
        next(iterate_batches([], 2, np.random.default_rng(0)))


# ------------------------------------------------------------------ TSV files


def test_tsv_round_trip(tmp_path):
    pairs = [("the dog", "lo vesko"), ("ünïcode ✓", "日本語"), ("a", "b c")]
    write_tsv(tmp_path / "corpus.tsv", pairs)
    assert read_tsv(tmp_path / "corpus.tsv") == pairs


def test_read_tsv_strips_sides_and_skips_blank_lines(tmp_path):
    path = tmp_path / "corpus.tsv"
    path.write_bytes(b"\xef\xbb\xbf a b \t c \r\n\n   \nd\te\n")
    assert read_tsv(str(path)) == [("a b", "c"), ("d", "e")]


def test_write_tsv_refuses_text_it_could_not_read_back(tmp_path):
    with pytest.raises(FileError) as info:
        write_tsv(tmp_path / "bad.tsv", [("a", "b"), ("c\td", "e")])
    assert_names(info, "pairs[1]", "source")


TSV_ERRORS = [
    pytest.param(b"a\tb\nc d\n", 2, "no tab", id="no-tab"),
    pytest.param(b"a\tb\nc\td\te\n", 2, "2 tabs", id="two-tabs"),
    pytest.param(b"a\tb\n\n \tb\n", 3, "empty source", id="empty-source"),
    pytest.param(b"a\tb\n\t\n", 2, "empty source", id="only-a-tab"),
    pytest.param(b"a\t  \n", 1, "empty target", id="empty-target"),
    pytest.param(b"a\tb\nc\td\ne\t\xff\xfe\n", 3, "invalid UTF-8", id="invalid-utf8"),
    pytest.param(b"a\t\xc3", 1, "invalid UTF-8", id="truncated-utf8"),
]


@pytest.mark.parametrize("content, line, problem", TSV_ERRORS)
def test_tsv_errors_name_the_file_and_line(tmp_path, content, line, problem):
    path = tmp_path / "corpus.tsv"
    path.write_bytes(content)
    with pytest.raises(FileError) as info:
        read_tsv(path)
    message = str(info.value)
    assert str(path) in message and f"line {line}:" in message and problem in message, message


@pytest.mark.parametrize("content", [b"", b"\n  \n\n"])
def test_a_tsv_file_without_pairs_is_an_error(tmp_path, content):
    path = tmp_path / "empty.tsv"
    path.write_bytes(content)
    with pytest.raises(FileError) as info:
        read_tsv(path)
    assert str(path) in str(info.value) and "no source<TAB>target pairs" in str(info.value)


def test_a_missing_tsv_file_or_a_directory_is_an_error(tmp_path):
    with pytest.raises(FileError) as info:
        read_tsv(tmp_path / "missing.tsv")
    assert str(tmp_path / "missing.tsv") in str(info.value) and "not found" in str(info.value)
    with pytest.raises(FileError) as info:
        read_tsv(tmp_path)
    assert str(tmp_path) in str(info.value) and "directory" in str(info.value)

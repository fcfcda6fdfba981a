"""A plain text made into token files and windows (data/text_corpus.py,
files/text_stream.py, files/token_file.py): the character vocabulary,
ids that decode back to the text, chunk edges inside a character, the
90/10 split by characters, a held-out file, and the windows a batch
gathers. Texts are written in tmp_path; the hostile ones are in
test_hostile_text.py."""

import numpy as np
import pytest

import minitrans
from minitrans.core import backend
from minitrans.core.launches import count_launches
from minitrans.data import text_corpus
from minitrans.data.text_corpus import CharacterTable, TextWindows, every_window, prepare_text
from minitrans.data.vocab import SPECIAL_TOKENS
from minitrans.files import text_stream, token_file

# ASCII, two-, three- and four-byte characters, and a newline
MIXED = "Thou art ünïcödé — ☃ and 𝄞 clefs.\nSo be it: 42 times!\n"


def write(tmp_path, text, name="text.txt"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def decoded(corpus, ids):
    return CharacterTable(corpus.vocab).decode(ids)


# ---- vocabulary and ids ---------------------------------------------------------------------

@pytest.mark.parametrize("chunk_bytes", [text_stream.CHUNK_BYTES, 2])
def test_the_vocabulary_is_the_specials_then_characters_frequent_first_ties_by_code_point(
        tmp_path, monkeypatch, chunk_bytes):
    monkeypatch.setattr(text_stream, "CHUNK_BYTES", chunk_bytes)  # 2: each chunk's counts added
    counts = text_corpus.character_counts(write(tmp_path, "bcaab\nccc"))
    assert counts.codes.tolist() == sorted(map(ord, "abc\n"))
    assert counts.counts.tolist() == [1, 2, 2, 4]  # "\n", "a", "b", "c"
    vocab = text_corpus.character_vocab(counts)
    assert vocab.tokens == [*SPECIAL_TOKENS, "c", "a", "b", "\n"]


@pytest.mark.parametrize("chunk_bytes", [text_stream.CHUNK_BYTES, 1])
def test_ids_decode_back_to_the_text_and_the_byte_order_mark_is_dropped(
        tmp_path, monkeypatch, chunk_bytes):
    monkeypatch.setattr(text_stream, "CHUNK_BYTES", chunk_bytes)  # 1: the mark cut in three
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf" + (MIXED * 3).encode("utf-8"))
    corpus = prepare_text(path, tmp_path / "run", block_size=4)
    text = MIXED * 3
    assert decoded(corpus, corpus.train) + decoded(corpus, corpus.valid) == text
    table = CharacterTable(corpus.vocab)
    ids = table.encode(text)
    assert ids.min() >= len(SPECIAL_TOKENS) and table.decode(ids) == text


def test_a_character_unknown_to_the_table_is_marked_not_given_an_id(tmp_path):
    table = CharacterTable(text_corpus.character_vocab(
        text_corpus.character_counts(write(tmp_path, "abc"))))
    assert table.encode("a\u2603c\U0010ffff").tolist() == [table.encode("a")[0], 0,
                                                            table.encode("c")[0], 0]


# ---- chunk edges ----------------------------------------------------------------------------

@pytest.mark.parametrize("chunk_bytes", [1, 2, 3, 5, 7])
def test_a_character_cut_by_a_chunk_s_edge_is_read_whole(tmp_path, chunk_bytes):
    path = write(tmp_path, MIXED * 2)
    chunks = list(text_stream.text_chunks(path, chunk_bytes=chunk_bytes))
    assert "".join(chunks) == MIXED * 2
    assert len(chunks) > 10  # the file was read in many chunks
    # the plant: each chunk decoded by itself breaks a multi-byte character
    raw = path.read_bytes()
    with pytest.raises(UnicodeDecodeError):
        for start in range(0, len(raw), chunk_bytes):
            raw[start:start + chunk_bytes].decode("utf-8")


def test_tiny_chunks_give_the_same_token_files_as_large_ones(tmp_path, monkeypatch):
    path = write(tmp_path, MIXED * 20)
    whole = prepare_text(path, tmp_path / "whole", block_size=8)
    monkeypatch.setattr(text_stream, "CHUNK_BYTES", 3)
    chunked = prepare_text(path, tmp_path / "chunked", block_size=8)
    assert chunked.vocab == whole.vocab
    assert np.array_equal(chunked.train, whole.train)
    assert np.array_equal(chunked.valid, whole.valid)


# ---- the held-out part ----------------------------------------------------------------------

def test_the_last_tenth_by_characters_is_held_out(tmp_path):
    # the first 90 characters are ASCII, the last 10 three bytes each: a tenth of
    # the bytes would be 40 bytes (14 characters) of the end, not 10 characters
    text = "ab" * 45 + "☃€" * 5
    corpus = prepare_text(write(tmp_path, text), tmp_path / "run", block_size=4)
    assert len(corpus.train) == 90 and len(corpus.valid) == 10
    assert decoded(corpus, corpus.train) == text[:90]
    assert decoded(corpus, corpus.valid) == text[90:]
    assert (tmp_path / "run" / "train.npy").is_file() and "10 held out" in corpus.description


def test_a_held_out_file_is_encoded_with_the_training_vocabulary(tmp_path):
    train, valid = write(tmp_path, MIXED * 4), write(tmp_path, "So be it: 42.\n", "valid.txt")
    corpus = prepare_text(train, tmp_path / "run", block_size=4, valid_path=valid)
    assert decoded(corpus, corpus.train) == MIXED * 4  # all of it trains
    assert decoded(corpus, corpus.valid) == "So be it: 42.\n"
    again = text_corpus.read_token_files(tmp_path / "run", corpus.vocab)
    assert all(np.array_equal(a, b) for a, b in zip(again, corpus[1:3]))


# ---- token files ----------------------------------------------------------------------------

@pytest.mark.parametrize("vocab_size, dtype", [(65, np.uint16), (2**16, np.uint16),
                                               (2**16 + 1, np.uint32)])
def test_token_files_hold_ids_in_the_smallest_type_and_read_back_mapped(
        tmp_path, vocab_size, dtype):
    ids = np.array([4, 5, vocab_size - 1, 7], dtype=np.int64)
    path = tmp_path / "ids.npy"
    token_file.write_tokens(path, ids, vocab_size)
    tokens = token_file.read_tokens(path, vocab_size, length=4)
    assert isinstance(tokens, np.memmap) and tokens.dtype == dtype
    assert tokens.tolist() == ids.tolist()
    assert [p.name for p in tmp_path.iterdir()] == ["ids.npy"]  # no temporary file left


def test_a_token_file_left_short_is_not_written(tmp_path):
    path = tmp_path / "ids.npy"
    with pytest.raises(ValueError, match="2 ids written, expected 3"):
        with token_file.token_writer(path, 3, 10) as writer:
            writer.write(np.array([4, 5]))
    assert list(tmp_path.iterdir()) == []


# ---- windows --------------------------------------------------------------------------------

def counting_tokens(length):
    """Ids 0, 1, 2, ...: a window's ids say where in the array it lies."""
    return np.arange(length, dtype=np.uint16)


def test_a_window_s_targets_are_its_inputs_one_place_further():
    windows = TextWindows(counting_tokens(50), block_size=6, batch_size=8, rng=3)
    batch = windows.batch()
    x, y = minitrans.to_numpy(batch.tgt_in), minitrans.to_numpy(batch.tgt_out)
    assert batch.src is None and x.shape == y.shape == (8, 6) and x.dtype == np.int64
    assert np.array_equal(y, x + 1)  # tokens[s+1:s+T+1]
    assert np.array_equal(x, x[:, :1] + np.arange(6))  # tokens[s:s+T], in one piece
    assert batch.num_tokens == 48


@pytest.mark.parametrize("length, starts", [(7, {0}), (8, {0, 1})])
def test_every_start_keeps_the_window_and_its_targets_inside_the_array(length, starts):
    windows = TextWindows(counting_tokens(length), block_size=6, batch_size=64, rng=0)
    seen = {int(row[0]) for _ in range(3) for row in minitrans.to_numpy(windows.batch().tgt_in)}
    assert seen == starts  # the last start is drawn too, and none past it


def test_windows_are_reproducible_by_seed_and_resume_from_their_state():
    tokens = counting_tokens(1000)

    def starts(windows):
        return minitrans.to_numpy(windows.batch().tgt_in)[:, 0].tolist()
    first, same, other = (TextWindows(tokens, 8, 4, rng=seed) for seed in (5, 5, 6))
    assert starts(first) == starts(same) and starts(first) != starts(other)
    state = first.state()
    expected = starts(first)
    resumed = TextWindows(tokens, 8, 4, rng=99)
    resumed.restore(state)
    assert starts(resumed) == expected


def test_every_window_tiles_the_array_in_order():
    tokens = counting_tokens(30)  # (30 - 1) // 4 = 7 windows, two ids left out
    batches = list(every_window(tokens, block_size=4, batch_size=3))
    assert [b.num_tokens for b in batches] == [12, 12, 4]
    x = np.concatenate([minitrans.to_numpy(b.tgt_in) for b in batches])
    y = np.concatenate([minitrans.to_numpy(b.tgt_out) for b in batches])
    assert np.array_equal(x.ravel(), np.arange(28)) and np.array_equal(y.ravel(), np.arange(1, 29))


def test_a_batch_of_windows_travels_to_the_device_in_one_copy(monkeypatch):
    tokens = counting_tokens(100)
    with minitrans.using("strict", dtype="float32"):
        windows = TextWindows(tokens, 8, 4, rng=1)
        with count_launches() as launches:
            batch = windows.batch()
        assert launches.places == ["transfer (asarray)"]
        assert np.array_equal(minitrans.to_numpy(batch.tgt_out), minitrans.to_numpy(batch.tgt_in)
                              + 1)
        with count_launches() as launches:
            next(every_window(tokens, 8, 4))
        assert launches.places == ["transfer (asarray)"]
        monkeypatch.setattr(backend, "on_device", lambda: False)  # the plant: a copy each
        with count_launches() as launches:
            windows.batch()
        assert launches.places == ["transfer (asarray)"] * 2

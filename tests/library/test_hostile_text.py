"""A plain text to train on that cannot be used, and token files tampered
with: each refused in one line that names the file, what is wrong, and
what was expected. Texts are written in tmp_path; a FIFO is tried in a
process of its own, stopped after a few seconds, since a read that waits
on one would hang the suite."""

import os
import subprocess
import sys

import numpy as np
import pytest

from minitrans.data import text_corpus
from minitrans.data.text_corpus import prepare_text
from minitrans.data.vocab import DataError
from minitrans.files import text_stream, token_file
from minitrans.files.rules import FileError


def refused(call, path, *parts, error=ValueError):
    """``call()`` raises one line of ``error`` that starts with ``path``,
    says what was expected, and holds each of ``parts``; returns it."""
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: "), message
    assert "expected" in message, message
    for part in parts:
        assert part in message, (part, message)
    return message


def write(tmp_path, raw, name="text.txt"):
    path = tmp_path / name
    path.write_bytes(raw)
    return path


def read_all(path, chunk_bytes=None):
    return "".join(text_stream.text_chunks(path, chunk_bytes=chunk_bytes))


# ---- bytes that are not UTF-8 text ----------------------------------------------------------

@pytest.mark.parametrize("chunk_bytes", [None, 1, 4])
def test_invalid_utf8_is_refused_naming_its_line_and_byte_in_any_chunk(tmp_path, chunk_bytes):
    # the bad byte is on line 4 at byte 13, after newlines and a two-byte
    # character that small chunks cut
    path = write(tmp_path, "ab\ncd\n\u00e9\u00e9\nxy".encode() + b"\xff z\n")
    refused(lambda: read_all(path, chunk_bytes), path, "line 4 (byte 13)", "invalid UTF-8",
            "0xff", error=FileError)


def test_a_character_cut_short_at_the_end_is_refused(tmp_path):
    path = write(tmp_path, "abc\n\u2603".encode()[:-1])
    refused(lambda: read_all(path, 2), path, "line 2 (byte 4)", "cut short at the end",
            error=FileError)


@pytest.mark.parametrize("chunk_bytes", [None, 2])
def test_a_nul_byte_is_refused_naming_its_line(tmp_path, chunk_bytes):
    path = write(tmp_path, b"ab\ncd\nef\0gh")
    refused(lambda: read_all(path, chunk_bytes), path, "line 3 (byte 8)", "NUL",
            error=FileError)


@pytest.mark.parametrize("encoding, named", [("utf-16", "UTF-16"), ("utf-32", "UTF-32"),
                                             ("utf-32-be", "UTF-32")])
def test_utf16_or_utf32_with_a_byte_order_mark_is_refused(tmp_path, encoding, named):
    raw = ("\ufeff" if encoding == "utf-32-be" else "") + "To be, or not to be"
    path = write(tmp_path, raw.encode(encoding))
    message = refused(lambda: read_all(path), path, f"{named} (it starts with", error=FileError)
    assert {"UTF-16": "UTF-32", "UTF-32": "UTF-16"}[named] not in message


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_without_a_byte_order_mark_is_refused_as_utf16_not_as_a_nul(tmp_path, encoding):
    path = write(tmp_path, "To be, or not to be\n".encode(encoding) * 3)
    refused(lambda: read_all(path, 3), path, "UTF-16 without a byte-order mark",
            error=FileError)


@pytest.mark.parametrize("raw, said", [(b"", "empty (0 bytes)"),
                                       (b"\xef\xbb\xbf", "only a byte-order mark")])
def test_a_file_without_text_is_refused(tmp_path, raw, said):
    path = write(tmp_path, raw)
    refused(lambda: prepare_text(path, tmp_path / "run", 4), path, said, error=FileError)


# ---- paths that are no regular file, and one too large ----------------------------------------

def test_a_directory_is_refused_by_name_before_anything_is_read(tmp_path):
    refused(lambda: text_stream.text_chunks(tmp_path), tmp_path, "is a directory",
            error=FileError)


def test_a_device_that_never_ends_is_refused_unread():
    refused(lambda: prepare_text("/dev/zero", "/nonexistent", 4), "/dev/zero",
            "is a character device", error=FileError)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "text.fifo"
    os.mkfifo(fifo)
    script = ("import sys\nfrom minitrans.data.text_corpus import prepare_text\n"
              "try:\n    prepare_text(sys.argv[1], sys.argv[2], 4)\n"
              "except ValueError as error:\n    print(error)\n")
    result = subprocess.run([sys.executable, "-c", script, str(fifo), str(tmp_path / "run")],
                            capture_output=True, text=True, timeout=15)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (f"{fifo}: is a named pipe (FIFO), "
                                     f"expected {text_stream.WHAT}")


def test_a_file_over_the_limit_is_refused_unread(tmp_path, monkeypatch):
    path = write(tmp_path, b"To be, or not")  # 13 bytes
    monkeypatch.setattr(text_stream, "MAX_TEXT_FILE_BYTES", 12)

    def planted_open(*args, **kwargs):
        raise AssertionError("opened a file over the limit")
    monkeypatch.setattr(text_stream, "open", planted_open, raising=False)
    refused(lambda: prepare_text(path, tmp_path / "run", 4), path, "13 bytes",
            "expected at most 12 bytes", error=FileError)
    monkeypatch.setattr(text_stream, "MAX_TEXT_FILE_BYTES", 13)  # at the limit: read, so
    with pytest.raises(AssertionError, match="opened a file"):  # the plant is reached
        prepare_text(path, tmp_path / "run", 4)


# ---- texts that cannot train a model --------------------------------------------------------

def test_a_single_distinct_character_is_refused(tmp_path):
    path = write(tmp_path, b"aaaaaaaaaaaaaaaaaaaa")
    refused(lambda: prepare_text(path, tmp_path / "run", 4), path, "single distinct character",
            "'a'", error=DataError)


@pytest.mark.parametrize("block_size, part, holds", [
    (4, "the held-out part (the last 10%)", 4),  # 36 train, 4 held out: a window needs 5
    (36, "the training part (the first 90%)", 36),  # a window needs 37
])
def test_a_part_shorter_than_a_window_plus_one_is_refused_with_both_numbers(
        tmp_path, block_size, part, holds):
    path = write(tmp_path, b"ab" * 20)
    refused(lambda: prepare_text(path, tmp_path / "run", block_size), path,
            f"{part} holds {holds} characters", f"at least {block_size + 1}", error=DataError)
    assert not (tmp_path / "run").exists()  # refused before anything was written
    if block_size == 4:
        prepare_text(path, tmp_path / "run", 3)  # one shorter window fits


def test_a_training_text_shorter_than_a_window_plus_one_is_refused(tmp_path):
    train, valid = write(tmp_path, b"abcde" * 2), write(tmp_path, b"abcde" * 4, "valid.txt")
    refused(lambda: prepare_text(train, tmp_path / "run", 10, valid), train,
            "the training text holds 10 characters", "at least 11", error=DataError)
    prepare_text(train, tmp_path / "run", 9, valid)


def test_a_held_out_file_shorter_than_a_window_plus_one_is_refused(tmp_path):
    train, valid = write(tmp_path, b"abcd" * 10), write(tmp_path, b"abcd", "valid.txt")
    refused(lambda: prepare_text(train, tmp_path / "run", 4, valid), valid,
            "holds 4 characters", "at least 5", error=DataError)


def test_a_held_out_file_with_unseen_characters_is_refused_counting_them(tmp_path):
    train = write(tmp_path, b"abcd" * 10)
    valid = write(tmp_path, "abXcdYXd\u00e9ab".encode(), "valid.txt")
    refused(lambda: prepare_text(train, tmp_path / "run", 4, valid), valid,
            f"training text {train} lacks: 4 (3 distinct, such as 'X', 'Y', '\u00e9')",
            error=DataError)


def test_a_text_that_changes_between_its_two_readings_is_refused(tmp_path, monkeypatch):
    path = write(tmp_path, b"abcd" * 10)
    readings = []

    def changing(path, *args, **kwargs):  # the second reading finds one more character
        readings.append(path)
        yield from text_stream.text_chunks(path, *args, **kwargs)
        if len(readings) == 2:
            yield extra
    monkeypatch.setattr(text_corpus, "text_chunks", changing)
    for extra, error, said in [("a", FileError, "5 ids written, expected 4"),
                               ("z", DataError, "a character its first reading did not")]:
        readings.clear()
        named = tmp_path / "run" / "valid.npy" if error is FileError else path
        refused(lambda: prepare_text(path, tmp_path / "run", 3), named, said, error=error)
        assert not (tmp_path / "run").exists() or not list((tmp_path / "run").iterdir())


# ---- token files tampered with --------------------------------------------------------------

def tampered(tmp_path, array):
    path = tmp_path / "train.npy"
    np.save(path, array, allow_pickle=True)
    return path


@pytest.mark.parametrize("array, said", [
    (np.array([4, 5, 6], dtype=np.uint32), "1-d uint32 array, expected a 1-d uint16"),
    (np.array([4, 5, 6], dtype=">u2"), "expected a 1-d uint16"),  # big-endian
    (np.array([[4, 5, 6]], dtype=np.uint16), "2-d uint16 array"),
    (np.array([4, 5, 6, 7], dtype=np.uint16), "holds 4 ids, expected 3"),
    (np.array([4, 10, 6], dtype=np.uint16), "holds id 10, expected ids from 4 to 9"),
    (np.array([4, 3, 6], dtype=np.uint16), "holds id 3, expected ids from 4 to 9"),
    (np.array([4, "x", None], dtype=object), "Python objects"),
])
def test_a_tampered_token_file_is_refused(tmp_path, array, said):
    path = tampered(tmp_path, array)
    refused(lambda: token_file.read_tokens(path, 10, length=3, low=4), path, said,
            error=FileError)


def test_a_bad_id_far_into_a_token_file_is_found(tmp_path, monkeypatch):
    monkeypatch.setattr(token_file, "CHECK_IDS", 4)  # checked four ids at a time
    path = tampered(tmp_path, np.array([4] * 9 + [12], dtype=np.uint16))
    refused(lambda: token_file.read_tokens(path, 10), path, "holds id 12", error=FileError)


@pytest.mark.parametrize("cut", ["garbage", "truncated", "npz"])
def test_a_token_file_that_is_no_npy_array_is_refused(tmp_path, cut):
    path = tampered(tmp_path, np.arange(4, 10, dtype=np.uint16))
    if cut == "garbage":
        path.write_bytes(b"\x93NUMPY but not really")
    elif cut == "truncated":
        path.write_bytes(path.read_bytes()[:-3])
    else:
        np.savez(tmp_path / "ids.npz", ids=np.arange(4, 10, dtype=np.uint16))
        (tmp_path / "ids.npz").rename(path)
    refused(lambda: token_file.read_tokens(path, 10), path, "not a readable .npy array",
            error=FileError)

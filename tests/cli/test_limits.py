"""Inputs bounded by what the machine can hold: the
memory a model needs against the machine's, the sizes' limits shared by
ModelConfig and the checkpoint's records, and text read from files and
standard input. The one-line errors themselves are in the catalogue of
``test_bad_inputs.py``."""

import io
import sys

import pytest

from minitrans.core import memory_budget
from minitrans.data import DataError, read_tsv
from minitrans.files.rules import FileError
from minitrans.model import config as model_config
from minitrans.model.config import ModelConfig
from minitrans.cli.text_input import input_lines
from minitrans.training.run_files import records

BASE = ModelConfig.preset("base", vocab_size=37000)


def test_a_model_too_big_for_the_machine_is_refused_with_both_numbers():
    needed = memory_budget.training_bytes(BASE, batch_size=64, length=50)
    with pytest.raises(ValueError) as info:
        memory_budget.check_fits(BASE, needed, "training", available=10**9)
    message = str(info.value)
    assert message.startswith("d_model=512, h=8, N=6, d_ff=2048, vocab_size=37000, max_len=512:")
    assert f"training needs about {memory_budget.format_bytes(needed)}" in message
    assert "this machine has 1 GB; choose smaller sizes" in message
    memory_budget.check_fits(BASE, needed, "training", available=needed)  # fits exactly: no error


def test_no_check_where_the_machine_does_not_say(monkeypatch):
    monkeypatch.setattr(memory_budget, "machine_memory", lambda: None)
    memory_budget.check_fits(BASE, 10**30, "training")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="os.sysconf on Linux")
def test_the_machine_memory_is_read_on_linux():
    with open("/proc/meminfo") as file:
        total_kb = int(file.readline().split()[1])  # "MemTotal:  24683896 kB"
    assert memory_budget.machine_memory() == pytest.approx(total_kb * 1024, rel=0.01)


def test_the_estimate_counts_adam_the_workers_and_the_batch():
    """Parameters: weights, one gradient per worker and Adam's m and v, 4
    bytes each in float32; the positional tables and the activations on top."""
    P = BASE.parameter_count()
    alone = memory_budget.model_bytes(BASE, itemsize=4)
    assert alone == 4 * (P + 2 * 512 * 512)  # two stacks' (max_len, d_model) tables
    one = memory_budget.training_bytes(BASE, 1, 50, workers=1, itemsize=4)
    two = memory_budget.training_bytes(BASE, 1, 50, workers=2, itemsize=4)
    assert two - one == 4 * P
    assert one > alone + 3 * 4 * P
    double = memory_budget.training_bytes(BASE, 2, 50, workers=1, itemsize=4)
    assert double - one == one - (alone + 3 * 4 * P)  # activations grow with the batch
    assert memory_budget.training_bytes(BASE, 1, 50, workers=1, itemsize=8) == 2 * one


def test_bytes_in_words():
    assert memory_budget.format_bytes(999) == "999 bytes"
    assert memory_budget.format_bytes(25_276_510_208) == "25.3 GB"
    assert memory_budget.format_bytes(1.06e15) == "1.06 PB"


def test_model_config_and_checkpoint_records_share_one_table_of_limits():
    assert records.LIMITS is model_config.LIMITS
    ModelConfig(vocab_size=2**24, d_model=2**16, h=2**10, N=1)  # the limits themselves pass
    with pytest.raises(ValueError, match="max_len: expected at most 1048576"):
        ModelConfig(vocab_size=7, max_len=2**20 + 1)
    with pytest.raises(ValueError, match="src_vocab_size: expected at most 16777216"):
        ModelConfig(vocab_size=7, src_vocab_size=2**24 + 1)


def test_text_in_utf8_reads_as_before(tmp_path):
    """NUL bytes and byte-order marks are looked for in the bytes; text in
    UTF-8, any script, with or without its own mark, reads as it did."""
    path = tmp_path / "pairs.tsv"
    path.write_bytes("\ufeffle chat\t猫\nυδωρ\tвода\r\n".encode("utf-8"))
    assert read_tsv(path) == [("le chat", "猫"), ("υδωρ", "вода")]


def test_utf16_big_endian_and_utf32_are_named(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_bytes("a b\tc d\n".encode("utf-16-be"))
    with pytest.raises(FileError, match="looks like UTF-16 without a byte-order mark"):
        read_tsv(path)
    path.write_bytes("a b\tc d\n".encode("utf-32"))
    with pytest.raises(FileError, match="UTF-32 byte-order mark"):
        read_tsv(path)


def test_standard_input_is_read_line_by_line():
    """Each line is given as it comes, without its line ending; the first
    bad line is an error after the good ones before it. The old command read
    sys.stdin, which turned the byte 0xff into the text '\\udcff'."""
    lines = input_lines(io.BytesIO(b"\xef\xbb\xbfone\r\ntwo\n\nthree\xff\n"))
    assert [next(lines), next(lines), next(lines)] == ["one", "two", ""]
    with pytest.raises(DataError, match=r"^standard input, line 4: invalid UTF-8 \(byte 0xff\)"):
        next(lines)
    assert list(input_lines(io.BytesIO(b"last line without a newline"))) == [
        "last line without a newline"
    ]

"""Tokenizer files written to hurt: a Split pattern that backtracks for ever,
ids with a gap, a line or a key of megabytes. Each is refused in one short
line that names the file and the field, in bounded time."""

import json
import subprocess
import sys
import textwrap

import pytest

from minitrans.data.gpt2_tokenizer import GPT2Tokenizer
from minitrans.data.hf_tokenizer import HFTokenizer
from minitrans.files.tokenizer_files import TokenizerFileError

pytest.importorskip("regex", reason="the regex package is not installed")

# (a|aa)+$ on "aaa...ab" tries every way to cut the a's into ones and twos
# (Fibonacci many) before it gives up: years for 40 a's.
BACKTRACKING = "(a|aa)+$"
LONG = 10 * 2**20  # 10 MiB of one line, one key
LINE_LIMIT = 400  # an error line a person can read


def tokenizer_json(pre_tokenizer=None, vocab=None, added=()):
    """A small valid tokenizer.json as a dict: a BPE model without merges."""
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": token_id, "content": content, "single_word": False,
                              "lstrip": False, "rstrip": False, "normalized": False,
                              "special": True} for content, token_id in added],
            "normalizer": None, "pre_tokenizer": pre_tokenizer, "post_processor": None,
            "decoder": None,
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": None, "end_of_word_suffix": None,
                      "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": vocab or {"a": 0, "b": 1}, "merges": []}}


def write_json(path, data):
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def refused(call, *parts):
    with pytest.raises(TokenizerFileError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message and len(message) < LINE_LIMIT, message[:LINE_LIMIT]
    for part in parts:
        assert part in message, message
    return message


# ------------------------------------------------------------ backtracking


def test_a_backtracking_split_pattern_fails_in_bounded_time(tmp_path):
    """Run in a child process, so that a regression fails the test rather
    than hanging the suite; the bound is lowered there to keep the test quick."""
    split = {"type": "Split", "pattern": {"Regex": BACKTRACKING}, "behavior": "Isolated",
             "invert": False}
    path = write_json(tmp_path / "tokenizer.json", tokenizer_json(
        {"type": "Sequence", "pretokenizers": [split]}))
    script = textwrap.dedent(f"""
        from minitrans.data import byte_level_bpe
        from minitrans.data.hf_tokenizer import HFTokenizer
        from minitrans.files.rules import FileError
        byte_level_bpe.MATCH_SECONDS = 0.2
        tokenizer = HFTokenizer.from_file({str(path)!r})
        assert tokenizer.encode("aab") == [0, 0, 1]  # a text it matches quickly is encoded
        try:
            tokenizer.encode("a" * 40 + "b")
        except FileError as error:
            print(error)
    """)
    try:
        run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("encoding with a backtracking pattern did not end within 10 s")
    assert run.returncode == 0, run.stderr
    line = run.stdout.strip()
    assert "\n" not in line and line.startswith(f"{path}: pre_tokenizer.pretokenizers[0]"
                                                ".pattern.Regex: "), line
    assert "41 characters" in line, line


# -------------------------------------------------------------- gaps in ids


def test_ids_with_a_gap_are_refused_when_the_files_are_read(tmp_path):
    """A sample that drew the missing id failed after others were printed."""
    vocab = write_json(tmp_path / "vocab.json", {"a": 0, "b": 1, "c": 3})
    merges = tmp_path / "merges.txt"
    merges.write_text("#version: 0.2\n", encoding="utf-8")
    refused(lambda: GPT2Tokenizer.from_files(vocab, merges), str(vocab), "id 2",
            "0 to 2")
    gap_in_vocab = write_json(tmp_path / "gap.json", tokenizer_json(vocab={"a": 0, "b": 2}))
    refused(lambda: HFTokenizer.from_file(gap_in_vocab), "gap.json", "model.vocab", "id 1")
    gap_after = write_json(tmp_path / "after.json", tokenizer_json(added=[("<s>", 5)]))
    refused(lambda: HFTokenizer.from_file(gap_after), "after.json", "added_tokens", "id 2")
    fine = write_json(tmp_path / "fine.json", tokenizer_json(added=[("<s>", 2), ("a", 0)]))
    assert len(HFTokenizer.from_file(fine)) == 3  # an added token may repeat a vocab entry


# --------------------------------------------------------- megabyte echoes


def test_a_line_of_megabytes_is_cut_in_the_error(tmp_path):
    vocab = write_json(tmp_path / "vocab.json", {"a": 0, "b": 1})
    merges = tmp_path / "merges.txt"
    merges.write_text("#version: 0.2\n" + "x" * LONG + " " + "y" * LONG + "\n", encoding="utf-8")
    refused(lambda: GPT2Tokenizer.from_files(vocab, merges), "merges.txt", "line 2",
            "vocab.json")
    merges.write_text("z" * LONG + "\n", encoding="utf-8")
    refused(lambda: GPT2Tokenizer.from_files(vocab, merges), "line 1", "two tokens")


@pytest.mark.parametrize("spoil, field", [
    (lambda data: data["model"].update({"k" * LONG: 1}), "not supported"),
    (lambda data: data["model"]["vocab"].update({"v" * LONG: 0}), "model.vocab['vvvv"),
    (lambda data: data["model"].update(unk_token="u" * LONG), "model.unk_token"),
    (lambda data: data["model"]["merges"].append(["a", "q" * LONG]), "model.merges[0]"),
    (lambda data: data.update(pre_tokenizer={"type": "t" * LONG}), "pre_tokenizer.type"),
    (lambda data: data.update(normalizer={"type": "Replace", "pattern": {"p" * LONG: "x"},
                                          "content": ""}), "normalizer.pattern"),
], ids=["unknown-key", "repeated-id", "unk-token", "merge", "type", "pattern-key"])
def test_a_key_or_value_of_megabytes_is_cut_in_the_error(tmp_path, spoil, field):
    data = tokenizer_json()
    spoil(data)
    path = write_json(tmp_path / "tokenizer.json", data)
    refused(lambda: HFTokenizer.from_file(path), "tokenizer.json", field)


def test_a_key_given_twice_is_named_in_a_short_line(tmp_path):
    path = tmp_path / "vocab.json"
    key = json.dumps("w" * LONG)
    path.write_text("{" + f"{key}: 0, {key}: 1" + "}", encoding="utf-8")
    merges = tmp_path / "merges.txt"
    merges.write_text("", encoding="utf-8")
    refused(lambda: GPT2Tokenizer.from_files(path, merges), "vocab.json", "given twice")

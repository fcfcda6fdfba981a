"""The household of files a user hands us (``minitrans.files``): one set of
rules, kept by every reader and writer.

Each rule is tried on every kind of file it applies to: a path that is no
regular file, a file over its limit, text that is not UTF-8, JSON that is
not strict, a name that leaves its folder, a write killed halfway. Then the
pretrained folder's own cases: written whole or not at all, NaN weights,
config.json's names in its errors, one check of memory, one list of a
tokenizer's files."""

import contextlib
import os
import signal
import socket

import numpy as np
import pytest

from minitrans.core import memory_budget
from minitrans.files import folder_swap, model_folder, rules
from minitrans.files.checkpoint_file import read_members
from minitrans.files.rules import FileError
from minitrans.files.safetensors_file import read_header, read_safetensors, save_safetensors
from minitrans.files.tsv import read_regular_file, read_tsv, write_tsv

safetensors = pytest.importorskip("safetensors", reason="safetensors is not installed")

from minitrans.model.language_model import DecoderOnlyLM  # noqa: E402
from minitrans.pretrained import GPT2, LLAMA, load_pretrained, save_pretrained  # noqa: E402
from minitrans.pretrained import load as pretrained_load  # noqa: E402
from minitrans.pretrained.architectures import model_config  # noqa: E402


@contextlib.contextmanager
def deadline(seconds=3):
    """Fail instead of hanging: a read that waits on a FIFO is interrupted."""
    def expired(signum, frame):
        raise TimeoutError(f"still reading after {seconds} s")
    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def refused(call, path, *parts):
    """``call()`` raises a one-line FileError that starts with ``path`` and
    names each of ``parts``; returns the message."""
    with deadline(), pytest.raises(FileError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: "), message
    for part in parts:
        assert part in message, (part, message)
    return message


# ---- the file itself: a regular file, bounded ---------------------------------------------------

READERS = {
    "text": lambda path: rules.read_text(path, "a text"),
    "json": lambda path: rules.read_json_file(path, "the model's config"),
    "tsv": read_tsv,
    "safetensors": read_header,
    "checkpoint": read_members,
}


def make_missing(path):
    return path


def make_directory(path):
    path.mkdir()
    return path


def make_fifo(path):
    os.mkfifo(path)
    return path


def make_socket(path):
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()
    return path


KINDS = {"missing": (make_missing, "not found"), "directory": (make_directory, "a directory"),
         "fifo": (make_fifo, "a named pipe (FIFO)"), "socket": (make_socket, "a socket"),
         "device": (lambda path: "/dev/null", "a character device")}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("reader", READERS)
def test_only_a_regular_file_is_read(tmp_path, reader, kind):
    make, words = KINDS[kind]
    path = make(tmp_path / "file")
    refused(lambda: READERS[reader](path), path, words)


@pytest.mark.parametrize("read", [
    pytest.param(lambda path: rules.read_bytes(path, "a text", limit=16), id="bytes"),
    pytest.param(lambda path: rules.read_text(path, "a text", limit=16), id="text"),
    pytest.param(lambda path: read_regular_file(path, limit=16), id="tsv"),
])
def test_a_file_over_its_limit_is_refused_unread(tmp_path, read):
    path = tmp_path / "big"
    path.write_text("a\tb\n" * 10)
    refused(lambda: read(path), path, "40 bytes", "more than the limit of 16 bytes")


def test_a_json_file_over_its_limit_is_refused_unread(tmp_path):
    path = tmp_path / "config.json"
    with open(path, "wb") as file:
        file.truncate(rules.MAX_JSON_BYTES + 1)  # sparse: no time spent writing it
    refused(lambda: rules.read_json_file(path, "the model's config"), path,
            "more than the limit of")


# ---- text: UTF-8 ---------------------------------------------------------------------------------

TEXT_READERS = {
    "text": lambda path: rules.read_text(path, "a text"),
    "json": lambda path: rules.read_json_file(path, "the model's config"),
    "tsv": read_tsv,
}
GOOD = '{"a":\t"b"}\n'  # a JSON object, and a line of TSV too
BAD_TEXT = {
    "nul": (b'{"a": 1}\n\x00\n', ["line 2", "NUL byte"]),
    "utf16-with-mark": (GOOD.encode("utf-16"), ["UTF-16", "byte-order mark"]),
    "utf16-without-mark": (GOOD.encode("utf-16-le"), ["UTF-16 without a byte-order mark"]),
    "utf32": (GOOD.encode("utf-32"), ["UTF-32"]),
    "latin-1": ('{"a": "\xe9"}'.encode("latin-1"), ["line 1", "invalid UTF-8", "0xe9"]),
}


@pytest.mark.parametrize("bad", BAD_TEXT)
@pytest.mark.parametrize("reader", TEXT_READERS)
def test_text_must_be_utf8(tmp_path, reader, bad):
    content, parts = BAD_TEXT[bad]
    path = tmp_path / "file"
    path.write_bytes(content)
    refused(lambda: TEXT_READERS[reader](path), path, *parts)


@pytest.mark.parametrize("reader", TEXT_READERS)
def test_a_utf8_byte_order_mark_is_dropped(tmp_path, reader):
    path = tmp_path / "file"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    plain = tmp_path / "plain"
    plain.write_bytes(GOOD.encode())
    assert TEXT_READERS[reader](path) == TEXT_READERS[reader](plain)


# ---- JSON: strict, bounded, each key once --------------------------------------------------------

def config_file(tmp_path, text):
    (tmp_path / "config.json").write_text(text)
    return lambda: rules.read_json_file(tmp_path / "config.json", "the model's config")


def index_file(tmp_path, text):
    (tmp_path / model_folder.INDEX_NAME).write_text(text)
    return lambda: model_folder.read_index(str(tmp_path / model_folder.INDEX_NAME))


def header_file(tmp_path, text):
    raw = text.encode()
    (tmp_path / "m.safetensors").write_bytes(len(raw).to_bytes(8, "little") + raw)
    return lambda: read_header(tmp_path / "m.safetensors")


BAD_JSON = {"twice": ('{"weight_map": {}, "weight_map": {}}', "'weight_map' twice"),
            "nan": ('{"weight_map": NaN}', "NaN"),
            "deep": ('{"weight_map": ' + "[" * 20 + "]" * 20 + "}", "nests deeper"),
            "not-json": ('{"weight_map": ', "not valid JSON")}


@pytest.mark.parametrize("bad", BAD_JSON)
@pytest.mark.parametrize("kind", [config_file, index_file, header_file],
                         ids=["config.json", "index", "safetensors-header"])
def test_json_is_strict(tmp_path, kind, bad):
    text, words = BAD_JSON[bad]
    call = kind(tmp_path, text)
    with pytest.raises(FileError) as info:
        call()
    assert str(tmp_path) in str(info.value) and words in str(info.value), str(info.value)


# ---- names inside a folder stay inside it ------------------------------------------------------

@pytest.mark.parametrize("name", ["..", "../x.safetensors", "/etc/passwd", "a/b", "a\\b", "C:x",
                                  "", "x\0y", 3, None])
def test_a_name_that_leaves_its_folder_is_refused(tmp_path, name):
    refused(lambda: rules.inside_folder(tmp_path, name, "index.json: weight_map puts 'w' in"),
            "index.json", "no '..'")


def test_a_plain_name_is_the_file_in_the_folder(tmp_path):
    assert rules.inside_folder(tmp_path, "m.safetensors", "x") == os.path.join(tmp_path,
                                                                               "m.safetensors")


# ---- writes: a file atomically, a folder swapped in whole ----------------------------------------

class Killed(BaseException):
    """A kill -9 at this point: nothing after it runs, no ``except Exception``."""


def kill_at(monkeypatch, module, name, call=1):
    """``module.name`` raises Killed at its ``call``-th call, instead of running."""
    original, calls = getattr(module, name), []

    def wrapped(*args, **kwargs):
        calls.append(args)
        if len(calls) == call:
            raise Killed(name)
        return original(*args, **kwargs)
    monkeypatch.setattr(module, name, wrapped)


def test_a_tsv_write_killed_before_its_rename_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "pairs.tsv"
    write_tsv(path, [("old", "pair")])
    kill_at(monkeypatch, os, "replace")
    with pytest.raises(Killed):
        write_tsv(path, [("new", "pair")] * 1000)
    monkeypatch.undo()
    assert read_tsv(path) == [("old", "pair")] and os.listdir(tmp_path) == ["pairs.tsv"]


def folder_of(path, text):
    path.mkdir(parents=True, exist_ok=True)
    (path / "a.txt").write_text(text)
    (path / "b.txt").write_text(text)
    return path


def contents(path):
    return {name: (path / name).read_text() for name in sorted(os.listdir(path))}


def write_folder(path, text, killed_halfway=False):
    with folder_swap.swapped_folder(path) as staging:
        for name in ("a.txt", "b.txt"):
            with open(os.path.join(staging, name), "w") as file:
                file.write(text)
            if killed_halfway:
                raise Killed(name)


def test_a_folder_is_swapped_in_whole(tmp_path):
    target = folder_of(tmp_path / "model", "old")
    write_folder(target, "new")
    assert contents(target) == {"a.txt": "new", "b.txt": "new"}
    assert os.listdir(tmp_path) == ["model"]  # nothing beside it


@pytest.mark.parametrize("module, name, call, expected", [
    (None, None, None, "old"),  # in the body: the new folder half written
    (os, "fsync", 2, "old"),  # flushing the new folder's files
    (os, "rename", 1, "old"),  # before the old folder is set aside
    (os, "rename", 2, "old"),  # between the two renames: no folder at its place
    (folder_swap.shutil, "rmtree", 1, "new"),  # after both, before the old one is removed
], ids=["writing", "flushing", "before-renames", "between-renames", "after-renames"])
def test_a_folder_swap_killed_anywhere_leaves_one_whole_folder(tmp_path, monkeypatch, module,
                                                               name, call, expected):
    target = folder_of(tmp_path / "model", "old")
    if module is not None:
        kill_at(monkeypatch, module, name, call)
    with pytest.raises(Killed):
        write_folder(target, "new", killed_halfway=module is None)
    monkeypatch.undo()
    folder_swap.settle(target)  # what the next write does first
    assert contents(target) == {"a.txt": expected, "b.txt": expected}
    assert os.listdir(tmp_path) == ["model"]
    write_folder(target, "newer")  # and the next write succeeds
    assert contents(target) == {"a.txt": "newer", "b.txt": "newer"}


def test_a_folder_is_not_written_over_a_file(tmp_path):
    path = tmp_path / "model"
    path.write_text("a file")
    refused(lambda: write_folder(path, "new"), path, "is a file")
    assert path.read_text() == "a file"


# ---- a pretrained folder -------------------------------------------------------------------------

HUB = {"architectures": [GPT2], "model_type": "gpt2", "n_embd": 8, "n_head": 2, "n_layer": 1,
       "n_positions": 16, "vocab_size": 40}


def tiny_model(seed=0):
    return DecoderOnlyLM(model_config("config.json", HUB, GPT2), rng=seed)


def weights(path):
    return read_safetensors(path / "model.safetensors")


def test_save_pretrained_onto_a_file_names_the_path(tmp_path):
    path = tmp_path / "model"
    path.write_text("a file")
    refused(lambda: save_pretrained(tiny_model(), path, GPT2), path, "is a file")


def test_save_pretrained_keeps_a_folder_of_other_files(tmp_path):
    path = tmp_path / "notes"
    path.mkdir()
    (path / "todo.md").write_text("mine")
    refused(lambda: save_pretrained(tiny_model(), path, GPT2), path, "'todo.md'")
    assert os.listdir(path) == ["todo.md"]


@pytest.mark.parametrize("written", ["model.safetensors", "config.json"])
def test_save_pretrained_killed_after_a_file_leaves_the_old_model(tmp_path, monkeypatch,
                                                                  written):
    path = tmp_path / "model"
    save_pretrained(tiny_model(seed=1), path, GPT2)
    before = weights(path)
    replace = os.replace

    def replaced(source, target):
        replace(source, target)
        if os.path.basename(target) == written:
            raise Killed(written)
    monkeypatch.setattr(os, "replace", replaced)
    with pytest.raises(Killed):
        save_pretrained(tiny_model(seed=2), path, GPT2)
    monkeypatch.undo()
    load_pretrained(path)
    after = weights(path)
    assert all(np.array_equal(before[name], after[name]) for name in before)


def test_save_pretrained_copies_the_tokenizer_in_the_same_swap(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for name in ("vocab.json", "merges.txt", "notes.md"):
        (source / name).write_text(name)
    save_pretrained(tiny_model(), tmp_path / "model", GPT2, copy_from=source)
    assert sorted(os.listdir(tmp_path / "model")) == ["config.json", "merges.txt",
                                                        "model.safetensors", "vocab.json"]


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_weights_that_are_not_finite_are_refused_naming_the_tensor(tmp_path, value):
    path = tmp_path / "model"
    save_pretrained(tiny_model(), path, GPT2)
    arrays = weights(path)
    name = "transformer.h.0.attn.c_proj.weight"
    arrays[name] = arrays[name].copy()
    arrays[name][1, 2] = value
    save_safetensors(path / "model.safetensors", arrays, {"format": "pt"})
    refused(lambda: load_pretrained(path), path / "model.safetensors", f"tensor '{name}'",
            "NaN or infinite", "[1, 2]")
    assert not np.isfinite(read_safetensors(path / "model.safetensors")[name]).all()  # the format


@pytest.mark.parametrize("architecture, fields, named", [
    (GPT2, {"n_layer": 2**11}, "n_layer: expected at most 1024"),
    (GPT2, {"n_positions": 2**21}, "n_positions: expected at most"),
    (LLAMA, {"num_hidden_layers": 2**11}, "num_hidden_layers: expected at most"),
    (LLAMA, {"head_dim": 3}, "head_dim: positions='rope'"),
    (LLAMA, {"hidden_size": 2**17, "num_attention_heads": 2}, "hidden_size: expected at most"),
])
def test_a_config_limit_is_named_by_config_json_s_field(architecture, fields, named):
    hub = {"hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 1,
           "intermediate_size": 16, "vocab_size": 40} if architecture == LLAMA else dict(HUB)
    hub.update(fields)
    refused(lambda: model_config("x/config.json", hub, architecture), "x/config.json", named)


def test_memory_is_checked_once_on_the_pretrained_path(tmp_path, monkeypatch):
    save_pretrained(tiny_model(), tmp_path / "model", GPT2)
    asked = []
    monkeypatch.setattr(memory_budget, "machine_memory", lambda: asked.append(1) or 2**40)
    load_pretrained(tmp_path / "model")
    assert len(asked) == 1


def test_the_tokenizer_s_files_are_named_once():
    from minitrans.cli import pretrained_folder
    for module in (pretrained_load, pretrained_folder):
        assert not hasattr(module, "TOKENIZER_FILES"), module.__name__
    assert set(model_folder.TOKENIZER_MARKERS) <= set(model_folder.TOKENIZER_FILES)
    assert set(model_folder.TOKENIZER_FILES) <= set(model_folder.COPIED_FILES)

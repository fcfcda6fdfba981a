"""More bad inputs, each met by a clear error: hostile checkpoint archives,
a checkpoint whose task disagrees with its model, a file given as ``--out``.

The catalogue style of ``test_bad_inputs.py``: every ``case(...)`` must
raise its error with a message that names every fragment as a whole word;
every ``cli(...)`` must fail with one line on stderr, a non-zero exit and no
traceback. To add a case, append a line with an id.
"""

import io
import re
import zipfile

import numpy as np
import pytest
from tests.cli.conftest import Files, case, checkpoint_bytes, cli, record, run_cli, train

from minitrans.training import experiment
from minitrans.training.run_files.checkpoint import CheckpointError, load_checkpoint
from tests.library.conftest import assert_names

# ------------------------------------------------------------ hostile archives


def rewritten(name, member, raw=None, **fields):
    """A real checkpoint, written again with ``member``'s bytes replaced by
    ``raw`` and ``fields`` of its zip entry (flag_bits, CRC, ...) set in the
    central directory, where zipfile reads them from."""

    def make(files):
        out = io.BytesIO()
        with zipfile.ZipFile(io.BytesIO(checkpoint_bytes())) as old, \
                zipfile.ZipFile(out, "w") as new:
            for info in old.infolist():
                content = old.read(info)
                if info.filename != member:
                    new.writestr(info, content)
                    continue
                new.writestr(info, content if raw is None else raw)
                for field, value in fields.items():
                    setattr(info, field, value)  # written into the directory on close
        return files.write(name, out.getvalue())

    return make


def npy_header(text):
    """A .npy file of format 1.0 whose header is ``text`` (no array data)."""
    header = text.encode("latin1")
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header


def record_with_code_point(code_point):
    """The .npy bytes of the task record with one character replaced by a
    code point that no Unicode text holds."""
    buffer = io.BytesIO()
    np.save(buffer, np.array('{"name": "copy", "kind": "seq2seq", "level": "word"}'))
    raw = buffer.getvalue()
    return raw.replace("c".encode("utf-32-le"), code_point.to_bytes(4, "little"), 1)


def load(make):
    return lambda files: load_checkpoint(make(files))


# ------------------------------------------------------------ task and model


def task_kind(kind, lm=False):
    """A real checkpoint (``lm``: a decoder-only one) whose task record says ``kind``."""
    task = {"name": "lm" if lm else "copy", "kind": kind, "level": "char" if lm else "word"}

    def make(files):
        path = files.write("task.npz", checkpoint_bytes("lm" if lm else "copy"))
        with np.load(path) as stored:
            entries = {key: stored[key] for key in stored.files}
        record("task", task)(entries)
        np.savez(path, **entries)
        return path

    return make


ENCRYPTED = rewritten("encrypted.npz", "json/step.npy", flag_bits=0x1)

CATALOGUE = [
    case(load(ENCRYPTED), CheckpointError, "encrypted.npz", "json/step.npy", "encrypted",
         id="member-encrypted"),
    case(load(rewritten("patch.npz", "format.npy", flag_bits=0x20)), CheckpointError,
         "patch.npz", "format.npy", "compressed patched data", id="member-compressed-patch"),
    case(load(rewritten("strong.npz", "json/task.npy", flag_bits=0x40)), CheckpointError,
         "strong.npz", "json/task.npy", "strongly encrypted",
         id="member-strongly-encrypted"),
    case(load(rewritten("method.npz", "json/step.npy", compress_type=99)), CheckpointError,
         "method.npz", "json/step.npy", "compression method 99", id="member-unknown-compression"),
    case(load(rewritten("crc.npz", "json/step.npy", CRC=1)), CheckpointError, "crc.npz",
         "json/step.npy", "cannot be read", "Bad CRC-32", id="member-bad-crc"),
    case(load(rewritten("version.npz", "format.npy", extract_version=99)), CheckpointError,
         "version.npz", "not a readable checkpoint", "zip file version 9.9",
         id="zip-version-too-new"),
    case(load(rewritten("key.npz", "json/step.npy", npy_header("{[1]: 2}\n"))), CheckpointError,
         "key.npz", "json/step.npy", "cannot be read", "unhashable", id="npy-header-list-as-key"),
    case(load(rewritten("quote.npz", "json/step.npy", npy_header("{'descr': '''\n"))),
         CheckpointError, "quote.npz", "json/step.npy", "cannot be read",
         id="npy-header-open-string"),
    case(load(rewritten("beyond.npz", "json/task.npy", record_with_code_point(0x110000))),
         CheckpointError, "beyond.npz", "json/task.npy", "expected Unicode text",
         id="record-code-point-beyond-unicode"),
    case(load(rewritten("surrogate.npz", "json/task.npy", record_with_code_point(0xD800))),
         CheckpointError, "surrogate.npz", "json/task.npy", "surrogate",
         "expected Unicode text", id="record-lone-surrogate"),
    case(lambda f: experiment.load_trained(task_kind("lm")(f)), CheckpointError, "task.npz",
         "task.kind", "'seq2seq'", "decoder_only=False", "'lm'",
         id="encoder-decoder-with-task-kind-lm"),
    case(lambda f: experiment.read_run(task_kind("seq2seq", lm=True)(f)), CheckpointError,
         "task.npz", "task.kind", "'lm'", "decoder_only=True", "'seq2seq'",
         id="decoder-only-with-task-kind-seq2seq"),
]


def test_the_catalogue_ids_are_unique():
    ids = [param.id for param in CATALOGUE + CLI_CATALOGUE]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("provoke, error, fragments", CATALOGUE)
def test_bad_file_gives_a_clear_error(tmp_path, provoke, error, fragments):
    with pytest.raises(error) as info:
        provoke(Files(tmp_path))
    assert "\n" not in str(info.value), str(info.value)
    assert_names(info, *fragments)


# ------------------------------------------------------------ command line


def notes(files):
    return files.write("notes.txt", "not a folder")


CLI_CATALOGUE = [
    cli(lambda f: ["translate", "--checkpoint", ENCRYPTED(f), "12"], "encrypted.npz",
        "json/step.npy", "encrypted", id="translate-encrypted-member"),
    cli(lambda f: ["translate", "--checkpoint", task_kind("lm")(f), "12"], "task.npz",
        "task.kind", "'seq2seq'", "'lm'", id="translate-task-kind-disagrees"),
    cli(lambda f: ["generate", "--checkpoint", task_kind("seq2seq", lm=True)(f), "12+"],
        "task.npz", "task.kind", "'lm'", "'seq2seq'", id="generate-task-kind-disagrees"),
    cli(lambda f: train(f, "copy", "--out", notes(f)), "--out", "notes.txt", "expected a folder",
        "is a file", id="out-is-a-file"),
    cli(lambda f: train(f, "copy", "--out", notes(f) / "run"), "--out", "notes.txt/run",
        "expected a folder", "notes.txt", "is a file", id="out-inside-a-file"),
    cli(lambda f: ["train", "copy", "--resume", f.checkpoint(), "--steps", "2", "--out",
                   notes(f), "--no-progress"], "--out", "notes.txt", "expected a folder",
        "is a file", id="resume-into-a-file"),
]


@pytest.mark.parametrize("make_args, fragments, env, stdin", CLI_CATALOGUE)
def test_bad_file_on_the_command_line_gives_one_line(tmp_path, make_args, fragments, env, stdin):
    files = Files(tmp_path)
    result = run_cli(make_args(files), env, stdin)
    assert result.returncode != 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stdout == ""  # refused before anything was built or trained
    for fragment in fragments:
        assert re.search(rf"(?<![\w]){re.escape(fragment)}(?![\w])", lines[0]), (fragment, lines[0])
    assert not (tmp_path / "run").exists()

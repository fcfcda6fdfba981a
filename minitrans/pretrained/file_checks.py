"""What reading and writing a pretrained model's files share: the error they
raise, the checks that a path is a regular file and that a JSON text is a
well-formed object, and writing a file atomically.

Every file is untrusted input, as a checkpoint is (training/untrusted.py):
its JSON goes through ``untrusted.parse_json``, which bounds its size and
its depth and refuses NaN, and then through a check that no object names a
key twice (Python's json keeps the last one silently: of two tensors
"w" in a header, one would be unseen). Errors are one line naming the file,
"PATH: what is wrong, expected X, got Y".
"""

import contextlib
import functools
import json
import os
import tempfile

from minitrans.data.tsv import FILE_KINDS
from minitrans.training import untrusted


class PretrainedError(ValueError):
    """A file or folder that is not a usable pretrained model."""


MAX_JSON_BYTES = untrusted.MAX_RECORD_CHARS  # parse_json's bound: at most 16 MiB of JSON
TEMP_PREFIX = ".tmp-"  # a write goes to TEMP_PREFIX... beside the file, then is renamed
JSON_KINDS = {dict: "an object", list: "an array", str: "a string", bool: "true or false",
              int: "an integer", float: "a number", type(None): "null"}


def short(value, limit=60):
    """``repr(value)``, cut to ``limit`` characters: a hostile name or shape
    may be megabytes long, and an error message is one readable line."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def regular_file_size(path, what):
    """The size of the regular file at ``path``; missing, unreadable or not a
    regular file (a pipe would block a read, a device never end) is an error."""
    try:
        info = os.stat(path)  # stat, not open: opening a FIFO waits for a writer
    except FileNotFoundError:
        raise PretrainedError(f"{path}: no such file, expected {what}") from None
    except OSError as error:
        raise PretrainedError(f"{path}: cannot be read ({error.strerror})") from None
    for is_kind, kind in FILE_KINDS.items():
        if is_kind(info.st_mode):
            raise PretrainedError(f"{path}: is {kind}, expected {what}")
    return info.st_size


def read_json_file(path, what):
    """The JSON object in the file at ``path`` (``what`` it is, for errors),
    its size checked before it is read."""
    size = regular_file_size(path, what)
    if size > MAX_JSON_BYTES:
        raise PretrainedError(f"{path}: {size:,} bytes, expected {what} of at most "
                              f"{MAX_JSON_BYTES:,}")
    with open(path, "rb") as file:
        raw = file.read(size + 1)  # not the bound: read(n) sets aside n bytes at once
    if len(raw) > size:
        raise PretrainedError(f"{path}: grew while it was read, expected {what} left alone")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PretrainedError(f"{path}: not UTF-8 ({error.reason} at byte {error.start}), "
                              f"expected {what}") from None
    return parse_json_object(path, what, text)


def parse_json_object(path, what, text):
    """A JSON object from untrusted text (see the module's docstring)."""
    try:
        value = untrusted.parse_json(path, what, text)
    except untrusted.CheckpointError as error:
        raise PretrainedError(str(error)) from None
    if not isinstance(value, dict):
        raise PretrainedError(f"{path}: {what} is {JSON_KINDS[type(value)]}, expected an object")
    # parse_json has bounded the depth: this second reading cannot recurse too far
    json.loads(text, object_pairs_hook=functools.partial(_unique_keys, path, what))
    return value


def _unique_keys(path, what, pairs):
    seen = set()
    for key, _ in pairs:
        if key in seen:
            raise PretrainedError(f"{path}: {what} names {short(key)} twice, expected each once")
        seen.add(key)
    return dict(pairs)


@contextlib.contextmanager
def atomic_file(path):
    """A temporary file's name in ``path``'s folder to write to; once the body
    is done, the file is flushed to disk and renamed over ``path``. A rename
    within one file system is atomic: a crash leaves the old file or the new
    one, never half of one (as training/checkpoint.py writes)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=TEMP_PREFIX,
                                         suffix=os.path.splitext(path)[1])
    os.close(handle)
    try:
        yield temporary
        with open(temporary, "rb+") as written:
            os.fsync(written.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise

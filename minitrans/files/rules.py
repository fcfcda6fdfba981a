"""What reading and writing a pretrained model's files share: the error they
raise, the checks that a path is a regular file and that a JSON text is a
well-formed object, and writing a file atomically.

Every file is untrusted input, as a checkpoint is (files/checkpoint_file.py):
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

import stat


class FileError(ValueError):
    """A file a user handed us that cannot be used: one line that names the
    file, and the field, entry or line in it, what was expected and what
    was found."""


PretrainedError = FileError  # the names each kind of file's error had before they were one
MAX_RECORD_CHARS = 2**24  # one JSON text (a checkpoint's history of about 200,000 steps)
MAX_JSON_DEPTH = 8  # a checkpoint's records nest two deep (evaluations: a list of objects)
MAX_JSON_BYTES = MAX_RECORD_CHARS  # parse_json's bound: at most 16 MiB of JSON
FILE_KINDS = {stat.S_ISDIR: "a directory", stat.S_ISFIFO: "a named pipe (FIFO)",
              stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device",
              stat.S_ISSOCK: "a socket"}
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
        raise FileError(f"{path}: no such file, expected {what}") from None
    except OSError as error:
        raise FileError(f"{path}: cannot be read ({error.strerror})") from None
    for is_kind, kind in FILE_KINDS.items():
        if is_kind(info.st_mode):
            raise FileError(f"{path}: is {kind}, expected {what}")
    return info.st_size


def read_json_file(path, what):
    """The JSON object in the file at ``path`` (``what`` it is, for errors),
    its size checked before it is read."""
    size = regular_file_size(path, what)
    if size > MAX_JSON_BYTES:
        raise FileError(f"{path}: {size:,} bytes, expected {what} of at most "
                              f"{MAX_JSON_BYTES:,}")
    with open(path, "rb") as file:
        raw = file.read(size + 1)  # not the bound: read(n) sets aside n bytes at once
    if len(raw) > size:
        raise FileError(f"{path}: grew while it was read, expected {what} left alone")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FileError(f"{path}: not UTF-8 ({error.reason} at byte {error.start}), "
                              f"expected {what}") from None
    return parse_json_object(path, what, text)


def parse_json_object(path, what, text):
    """A JSON object from untrusted text (see the module's docstring)."""
    value = parse_json(path, what, text)
    if not isinstance(value, dict):
        raise FileError(f"{path}: {what} is {JSON_KINDS[type(value)]}, expected an object")
    # parse_json has bounded the depth: this second reading cannot recurse too far
    json.loads(text, object_pairs_hook=functools.partial(_unique_keys, path, what))
    return value


def _unique_keys(path, what, pairs):
    seen = set()
    for key, _ in pairs:
        if key in seen:
            raise FileError(f"{path}: {what} names {short(key)} twice, expected each once")
        seen.add(key)
    return dict(pairs)


@contextlib.contextmanager
def atomic_file(path):
    """A temporary file's name in ``path``'s folder to write to; once the body
    is done, the file is flushed to disk and renamed over ``path``. A rename
    within one file system is atomic: a crash leaves the old file or the new
    one, never half of one (as training/run_files/checkpoint.py writes)."""
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


def parse_json(path, what, text):
    """``json.loads`` for untrusted text: at most MAX_RECORD_CHARS characters
    and MAX_JSON_DEPTH levels of nesting, strict JSON but for Infinity (no NaN);
    anything else is a FileError naming ``path`` and ``what``."""
    if not isinstance(text, str) or len(text) > MAX_RECORD_CHARS:
        raise FileError(f"{path}: {what} is not a JSON text of at most "
                              f"{MAX_RECORD_CHARS} characters")
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        value = None
        depth = MAX_JSON_DEPTH + 1
    except ValueError as error:
        raise FileError(f"{path}: {what} is not valid JSON ({error})") from None
    else:
        depth = _depth(value)
    if depth > MAX_JSON_DEPTH:
        raise FileError(
            f"{path}: {what} nests deeper than {MAX_JSON_DEPTH} levels of JSON"
        )
    return value


def _refuse_constant(name):
    """Infinity may stand (an early-stop target that never stops); NaN may not."""
    if name == "NaN":
        raise ValueError("NaN is not a number a checkpoint may hold")
    return float(name)


def _depth(value):
    """How many lists and objects nest in ``value`` (0 for a number, 1 for
    [1, 2]), counted without recursion and only up to one past the limit."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        value, outer = stack.pop()
        if isinstance(value, (dict, list)) and outer <= MAX_JSON_DEPTH:
            deepest = max(deepest, outer + 1)
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, outer + 1) for child in children)
    return deepest

"""The rules every reader and writer of a user's files keeps, in one place.

A file a user hands us (a checkpoint, a pretrained model's folder, a corpus,
a tokenizer's files) is untrusted input. Its parser, one module a format in
``minitrans.files``, reads it only through these functions:

* ``regular_file_size``: a regular file, checked by ``stat`` before it is
  opened (a FIFO would block the read, a device never end it, a folder is
  no file); ``read_bytes`` then reads at most a bounded number of bytes.
* ``read_text``: the bytes must be UTF-8 text (no NUL byte, no UTF-16 or
  UTF-32, with or without a byte-order mark; a UTF-8 mark is dropped).
* ``read_json_file``, ``parse_json_object``, ``parse_json``: JSON is strict
  (no NaN), bounded in size and depth, and names each key of an object
  once (Python's json keeps the last of two silently).
* ``inside_folder``: a name read from a file (a shard in an index) stays
  inside its folder: no absolute path, no folder part, no "..". (The file
  it names may be a link elsewhere, as in the Hugging Face Hub's cache.)
* ``atomic_file`` writes a file beside its final name and renames it over
  it; ``folder_swap.swapped_folder`` does the same for a whole folder.

Every problem is one ``FileError``, one line that names the file and the
field, entry or line in it: "PATH: what is wrong, expected X, got Y".
"""

import codecs
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
# A text read whole (a corpus): ten million sentences fit in it.
MAX_TEXT_BYTES = 2**30
FILE_KINDS = {stat.S_ISDIR: "a directory", stat.S_ISFIFO: "a named pipe (FIFO)",
              stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device",
              stat.S_ISSOCK: "a socket"}
TEMP_PREFIX = ".tmp-"  # a write goes to TEMP_PREFIX... beside the file, then is renamed
JSON_KINDS = {dict: "an object", list: "an array", str: "a string", bool: "true or false",
              int: "an integer", float: "a number", type(None): "null"}
# Byte-order marks of encodings that are not UTF-8, UTF-32 first: its
# little-endian mark begins with UTF-16's.
FOREIGN_BOMS = [
    (codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"),
]


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
        raise FileError(f"{path}: not found (no such file), expected {what}") from None
    except OSError as error:
        raise FileError(f"{path}: cannot be read ({error.strerror})") from None
    for is_kind, kind in FILE_KINDS.items():
        if is_kind(info.st_mode):
            raise FileError(f"{path}: is {kind}, expected {what}")
    return info.st_size


def read_bytes(path, what, limit):
    """The bytes of the regular file at ``path`` (``what`` it is, for
    errors), refused unread when it holds more than ``limit`` bytes. The read
    stops one byte past the size ``stat`` gave: a file that grew since is
    refused, never read on without end."""
    size = regular_file_size(path, what)
    if size > limit:
        raise FileError(f"{path}: {size:,} bytes, more than the limit of {limit:,} bytes "
                        f"for {what}")
    try:
        with open(path, "rb") as file:
            raw = file.read(size + 1)  # not the limit: read(n) sets aside n bytes at once
    except OSError as error:
        raise FileError(f"{path}: cannot be read ({error.strerror})") from None
    if len(raw) > size:
        raise FileError(f"{path}: grew while it was read, expected {what} left alone")
    return raw


def read_text(path, what, limit=MAX_TEXT_BYTES):
    """The text of the regular file at ``path``: ``read_bytes``, then
    ``decode_text``."""
    return decode_text(path, read_bytes(path, what, limit))


def decode_text(path, raw):
    """``raw`` as UTF-8 text, its byte-order mark (which some editors write)
    dropped. Refused, naming the line: a NUL byte, which text never holds,
    UTF-16 or UTF-32 (with or without their byte-order mark), and bytes that
    are not UTF-8."""
    for bom, encoding in FOREIGN_BOMS:
        if raw.startswith(bom):
            raise FileError(f"{path}: {encoding} (it starts with a {encoding} byte-order mark); "
                            "save the file as UTF-8")
    nul = raw.find(b"\0")
    if nul >= 0:
        if looks_like_utf16(raw):
            raise FileError(f"{path}: looks like UTF-16 without a byte-order mark (a NUL byte "
                            "at every other position); save the file as UTF-8")
        line = raw.count(b"\n", 0, nul) + 1
        raise FileError(f"{path}: line {line}: a NUL byte (0x00), which text never holds; "
                        "is it a binary file?")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1  # the newlines before the bad byte
        raise FileError(f"{path}: line {line}: invalid UTF-8 (byte 0x{raw[error.start]:02x}); "
                        "save the file as UTF-8") from None
    return text.removeprefix("\ufeff")


def looks_like_utf16(raw):
    """Latin text in UTF-16 is a NUL byte beside every letter: at the odd
    positions (little-endian) or the even ones (big-endian). Judged on the
    first 4096 bytes: at least half of one of the two positions is NUL."""
    sample = raw[:4096]
    halves = sample[0::2], sample[1::2]
    return any(half and half.count(0) >= len(half) / 2 for half in halves)


def inside_folder(folder, name, where):
    """The path of the file ``name`` in ``folder``, where ``name`` was read
    from a file (``where`` begins the error: "PATH: field is"): a plain file
    name, in this system's syntax or another's. An absolute path, "..",
    "a/b" and "a\\b" would let a file send the reader out of its folder.
    The file may be a link (the Hugging Face Hub's cache links a snapshot's
    files to blobs elsewhere): the name is checked, not the target."""
    if (not isinstance(name, str) or name in ("", ".", "..")
            or any(mark in name for mark in ("/", "\\", ":", "\0"))):
        raise FileError(f"{where} {short(name)}, expected the name of a file in the folder "
                        "(no folder, no '..')")
    return os.path.join(folder, name)


def read_json_file(path, what):
    """The JSON object in the file at ``path`` (``what`` it is, for errors):
    ``read_text``, then ``parse_json_object``."""
    return parse_json_object(path, what, read_text(path, what, MAX_JSON_BYTES))


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

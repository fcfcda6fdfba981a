"""A checkpoint's file: one ``.npz`` archive, written atomically, read as
untrusted input and without pickle.

Arrays are members named "param/...", "optim/..."; the records (configs,
history) are JSON texts under "json/NAME"; the member "format" marks the
file as minitrans's. What the records and arrays mean, and how an older
file's names are brought up to date, is ``training.run_files.checkpoint``'s.

A checkpoint is a file someone may hand you. Everything it declares (how
many members, their sizes, dtypes and shapes, how deep its JSON nests) is
checked against what the file really holds before anything is allocated:
a 2 MB file cannot make the reader allocate gigabytes, and a malformed file
is a ``CheckpointError`` naming the file and the entry (the household's
rules, ``files.rules``, for the file itself and its JSON), never a
``MemoryError``, a ``RecursionError``, one of zipfile's own errors (an
encrypted member, a bad CRC) or a hang. ``allow_pickle=False``
everywhere: reading never runs code from the file.
"""

import contextlib
import json
import math
import os
import tokenize
import zipfile

import numpy as np

from minitrans.files import rules
from minitrans.files.rules import TEMP_PREFIX, FileError, atomic_file, parse_json


CheckpointError = FileError  # its name before every file a user hands us raised one error type


FORMAT = "minitrans-checkpoint-1"  # the file's marker, the same in every format version
# A save writes TEMP_PREFIX...TEMP_SUFFIX beside the checkpoint, then renames it.
TEMP_SUFFIX = ".npz"


def write_checkpoint(path, arrays, records):
    """Write host ``arrays`` (name -> NumPy array) and ``records`` (name ->
    JSON-serialisable value) to ``path`` atomically (``rules.atomic_file``):
    a crash while saving leaves the old file or the new one, never half."""
    content = dict(arrays)
    content.update({f"json/{name}": np.array(json.dumps(value)) for name, value in records.items()})
    content["format"] = np.array(FORMAT)
    with atomic_file(path) as temporary:  # TEMP_PREFIX...TEMP_SUFFIX beside the checkpoint
        np.savez(temporary, **content)


def remove_unfinished(path):
    """Delete the temporary files that saves of ``path`` killed before their
    rename left in its folder (never the checkpoint itself); returns their
    names. Call it only where no other process is saving into that folder."""
    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    if not os.path.isdir(folder):
        return []
    removed = sorted(name for name in os.listdir(folder)
                     if name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX))
    for name in removed:
        os.remove(os.path.join(folder, name))
    return removed


def read_checkpoint(path):
    """(arrays, records) of the checkpoint at ``path``: host NumPy arrays by
    their names in the file, and the records parsed as strict, bounded JSON.
    A missing, truncated or hostile file, or one minitrans did not write, is
    a FileError naming it."""
    path = os.fspath(path)
    if not os.path.lexists(path):
        raise FileError(f"{path}: checkpoint not found")
    rules.regular_file_size(path, "a checkpoint file")  # stat, not open: a FIFO waits
    if not zipfile.is_zipfile(path):  # np.load would also read a .npy or a pickle
        raise FileError(f"{path}: not a readable checkpoint (truncated or not an .npz file)")
    content = read_members(path)
    if "format" not in content or content.pop("format") != FORMAT:
        raise FileError(f"{path}: not a minitrans checkpoint (no '{FORMAT}' marker)")
    records, arrays = {}, {}
    for name, value in content.items():
        if name.startswith("json/"):
            records[name[5:]] = parse_json(path, f"record {name[5:]!r}", value)
        else:
            arrays[name] = value
    return arrays, records


# What zipfile and np.lib.format raise on a damaged or hostile archive: a
# feature zipfile does not read (a newer zip version) is NotImplementedError,
# an encrypted member RuntimeError, a bad CRC BadZipFile; a .npy header is
# parsed by ast.literal_eval (TypeError for a list as a key) and, when that
# fails, by tokenize, as a Python 2 header (TokenError for an open string).
READ_ERRORS = (zipfile.BadZipFile, EOFError, OSError, ValueError, RuntimeError,
               NotImplementedError, TypeError, tokenize.TokenError)


def read_members(path):
    """name -> content of every member of the ``.npz`` file at ``path`` (the
    names without ".npy"), each checked by ``_member_headers`` first: an
    array for "param/..." and "optim/...", a str for "format" and "json/..."."""
    rules.regular_file_size(path, "a checkpoint (.npz)")  # before zipfile opens it
    try:
        with zipfile.ZipFile(path) as archive:
            headers = _member_headers(path, archive)
            return {name: _read_member(_where(path, info), name, archive, info)
                    for name, info in headers.items()}
    except CheckpointError:
        raise
    except READ_ERRORS as error:
        raise CheckpointError(
            f"{path}: not a readable checkpoint (truncated or not an .npz file: {error})"
        ) from None


ARRAY_PREFIXES = ("param/", "optim/")
NUMERIC_KINDS = "biuf"  # booleans, integers, floats: no objects, strings or records
# General-purpose flag bits of a zip member that zipfile cannot read past.
UNREADABLE_FLAGS = {0x1: "encrypted", 0x20: "compressed patched data",
                    0x40: "strongly encrypted"}
READ_HEADER = {(1, 0): np.lib.format.read_array_header_1_0,  # what np.save writes
               (2, 0): np.lib.format.read_array_header_2_0}


def _member_headers(path, archive):
    """name -> ZipInfo of every member, after checking each one's header.

    Refused: a duplicated name (np.load would silently take one of them), a
    name that is not "format", "json/..." or an array's, any compression
    (minitrans writes members stored, as ``np.savez`` does, so that no member
    can unpack to more bytes than the file holds), an encrypted member
    (``np.savez`` never encrypts; zipfile would ask for a password), members
    that claim more bytes than the file has, and a ``.npy`` header whose
    dtype is not numeric (a record: a string) or whose shape needs more bytes
    than the member holds.
    """
    infos, size, total = archive.infolist(), os.path.getsize(path), 0
    if "format.npy" not in {info.filename for info in infos}:
        raise CheckpointError(f"{path}: not a minitrans checkpoint (no 'format' marker)")
    headers = {}
    for info in infos:
        name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
        where = _where(path, info)
        if name in headers:
            raise CheckpointError(f"{where} appears twice; a checkpoint names each entry once")
        if name != "format" and not name.startswith(("json/", *ARRAY_PREFIXES)):
            raise CheckpointError(f"{where} is not a checkpoint entry (expected 'format', "
                                  f"'json/...', 'param/...' or 'optim/...')")
        if info.compress_type != zipfile.ZIP_STORED:
            raise CheckpointError(f"{where} uses compression method {info.compress_type}; "
                                  "minitrans reads members stored uncompressed (np.savez)")
        flags = [words for bit, words in UNREADABLE_FLAGS.items() if info.flag_bits & bit]
        if flags:
            raise CheckpointError(f"{where} is {' and '.join(flags)} (zip flag bits "
                                  f"{info.flag_bits:#x}), expected a member stored plainly, "
                                  "as np.savez writes it")
        total += info.compress_size
        if info.file_size != info.compress_size or total > size:
            raise CheckpointError(f"{where} claims {info.file_size} bytes, more than the "
                                  f"file's {size} bytes hold")
        _check_array_header(where, name, archive, info)
        headers[name] = info
    return headers


def _check_array_header(where, name, archive, info):
    """The member's .npy header: a numeric dtype for an array, a string of
    bounded length for a record, and a shape whose bytes are the member's."""
    with _opened(where, archive, info) as member:
        version = np.lib.format.read_magic(member)
        if version not in READ_HEADER:
            raise CheckpointError(f"{where}: .npy format version {version} is not supported")
        shape, _, dtype = READ_HEADER[version](member)  # a header of at most 10,000 bytes
        header_bytes = member.tell()
    if name.startswith(ARRAY_PREFIXES):
        if dtype.kind not in NUMERIC_KINDS or dtype.hasobject or dtype.fields:
            raise CheckpointError(f"{where} has dtype {dtype}, expected numbers")
    elif dtype.kind != "U" or shape != () or dtype.itemsize // 4 > rules.MAX_RECORD_CHARS:
        raise CheckpointError(
            f"{where} has dtype {dtype} and shape {shape}, expected a string of at most "
            f"{rules.MAX_RECORD_CHARS} characters"
        )
    needed = math.prod(shape) * dtype.itemsize
    if needed != info.file_size - header_bytes:
        raise CheckpointError(f"{where} declares shape {shape} of dtype {dtype} "
                              f"({needed} bytes), but holds {info.file_size - header_bytes}")


def _where(path, info):
    return f"{path}: member {info.filename!r}"


def _read_member(where, name, archive, info):
    """The member's array, or for a record its text (see ``_record_text``)."""
    with _opened(where, archive, info) as member:
        array = np.lib.format.read_array(member, allow_pickle=False)
    return array if name.startswith(ARRAY_PREFIXES) else _record_text(where, array)


@contextlib.contextmanager
def _opened(where, archive, info):
    """The member, open for reading; whatever zipfile or NumPy raise while it
    is read (a bad CRC, a damaged local header) is a CheckpointError naming
    the file and the member (``where``)."""
    try:
        with archive.open(info) as member:
            yield member
    except CheckpointError:
        raise
    except READ_ERRORS as error:
        # a TokenError's text is a tuple (message, position): its message will do
        detail = error.args[0] if isinstance(error, tokenize.TokenError) else error
        raise CheckpointError(f"{where} cannot be read ({detail})") from None


def _record_text(where, array):
    """The text of a record's 0-d string array, decoded by Python's UTF-32
    codec: NumPy would turn code points above U+10FFFF into a broken str
    (one that makes Python raise SystemError later); the codec refuses them,
    and lone surrogates. Trailing NULs are NumPy's padding."""
    raw = array.astype(array.dtype.newbyteorder("<")).tobytes()
    try:
        return raw.decode("utf-32-le").rstrip("\0")
    except UnicodeDecodeError as error:
        raise CheckpointError(f"{where} holds {error.reason}, expected Unicode text") from None

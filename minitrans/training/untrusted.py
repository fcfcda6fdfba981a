"""Reading an ``.npz`` checkpoint as untrusted input.

A checkpoint is a file someone may hand you. Everything it declares (how
many members, their sizes, dtypes and shapes, how deep its JSON nests) is
checked against what the file really holds before anything is allocated:
a 2 MB file cannot make the reader allocate gigabytes, and a malformed file
is a ``CheckpointError`` naming the file and the entry, never a
``MemoryError``, a ``RecursionError`` or a hang. ``allow_pickle=False``
everywhere: reading never runs code from the file.
"""

import json
import math
import os
import zipfile

import numpy as np


class CheckpointError(ValueError):
    """A file that is not a usable minitrans checkpoint."""


def read_members(path):
    """name -> array of every member of the ``.npz`` file at ``path`` (the
    names without ".npy"), each checked by ``_member_headers`` first."""
    try:
        with zipfile.ZipFile(path) as archive:
            headers = _member_headers(path, archive)
            return {name: _read_member(archive, info) for name, info in headers.items()}
    except CheckpointError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as error:
        raise CheckpointError(
            f"{path}: not a readable checkpoint (truncated or not an .npz file: {error})"
        ) from None


MAX_RECORD_CHARS = 2**24  # one JSON record (history of about 200,000 steps)
MAX_JSON_DEPTH = 8  # the records nest two deep (evaluations: a list of objects)
ARRAY_PREFIXES = ("param/", "optim/")
NUMERIC_KINDS = "biuf"  # booleans, integers, floats: no objects, strings or records
READ_HEADER = {(1, 0): np.lib.format.read_array_header_1_0,  # what np.save writes
               (2, 0): np.lib.format.read_array_header_2_0}


def _member_headers(path, archive):
    """name -> ZipInfo of every member, after checking each one's header.

    Refused: a duplicated name (np.load would silently take one of them), a
    name that is not "format", "json/..." or an array's, any compression
    (minitrans writes members stored, as ``np.savez`` does, so that no member
    can unpack to more bytes than the file holds), members that claim more
    bytes than the file has, and a ``.npy`` header whose dtype is not numeric
    (a record: a string) or whose shape needs more bytes than the member holds.
    """
    infos, size, total = archive.infolist(), os.path.getsize(path), 0
    if "format.npy" not in {info.filename for info in infos}:
        raise CheckpointError(f"{path}: not a minitrans checkpoint (no 'format' marker)")
    headers = {}
    for info in infos:
        name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
        where = f"{path}: member {info.filename!r}"
        if name in headers:
            raise CheckpointError(f"{where} appears twice; a checkpoint names each entry once")
        if name != "format" and not name.startswith(("json/", *ARRAY_PREFIXES)):
            raise CheckpointError(f"{where} is not a checkpoint entry (expected 'format', "
                                  f"'json/...', 'param/...' or 'optim/...')")
        if info.compress_type != zipfile.ZIP_STORED:
            raise CheckpointError(f"{where} uses compression method {info.compress_type}; "
                                  "minitrans reads members stored uncompressed (np.savez)")
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
    with archive.open(info) as member:
        version = np.lib.format.read_magic(member)
        if version not in READ_HEADER:
            raise CheckpointError(f"{where}: .npy format version {version} is not supported")
        shape, _, dtype = READ_HEADER[version](member)  # a header of at most 10,000 bytes
        header_bytes = member.tell()
    if name.startswith(ARRAY_PREFIXES):
        if dtype.kind not in NUMERIC_KINDS or dtype.hasobject or dtype.fields:
            raise CheckpointError(f"{where} has dtype {dtype}, expected numbers")
    elif dtype.kind != "U" or shape != () or dtype.itemsize // 4 > MAX_RECORD_CHARS:
        raise CheckpointError(
            f"{where} has dtype {dtype} and shape {shape}, expected a string of at most "
            f"{MAX_RECORD_CHARS} characters"
        )
    needed = math.prod(shape) * dtype.itemsize
    if needed != info.file_size - header_bytes:
        raise CheckpointError(f"{where} declares shape {shape} of dtype {dtype} "
                              f"({needed} bytes), but holds {info.file_size - header_bytes}")


def _read_member(archive, info):
    with archive.open(info) as member:
        return np.lib.format.read_array(member, allow_pickle=False)


def parse_json(path, what, text):
    """``json.loads`` for untrusted text: at most MAX_RECORD_CHARS characters
    and MAX_JSON_DEPTH levels of nesting, strict JSON but for Infinity (no NaN);
    anything else is a CheckpointError naming ``path`` and ``what``."""
    if not isinstance(text, str) or len(text) > MAX_RECORD_CHARS:
        raise CheckpointError(f"{path}: {what} is not a JSON text of at most "
                              f"{MAX_RECORD_CHARS} characters")
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        value = None
        depth = MAX_JSON_DEPTH + 1
    except ValueError as error:
        raise CheckpointError(f"{path}: {what} is not valid JSON ({error})") from None
    else:
        depth = _depth(value)
    if depth > MAX_JSON_DEPTH:
        raise CheckpointError(
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

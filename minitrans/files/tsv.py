"""Parallel corpora as TSV files: one "source<TAB>target" pair per line."""

import codecs
import pathlib

from minitrans.files.rules import FILE_KINDS, FileError

# The largest TSV file read: ten million pairs of sentences fit in it, and
# it is read whole into memory (as bytes, then as text, then as pairs).
MAX_TSV_BYTES = 2**30

# Byte-order marks of encodings that are not UTF-8, UTF-32 first: its
# little-endian mark begins with UTF-16's.
FOREIGN_BOMS = [
    (codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"),
]

def read_tsv(path):
    """A parallel corpus: one "source<TAB>target" pair per line, UTF-8.

    Returns a list of (source, target) strings with surrounding whitespace
    removed. Blank lines are skipped; anything else that is not exactly one
    tab between two non-empty sides is an error naming the file and line.
    So is a path that is not a regular file (a directory, a pipe such as
    /dev/stdin, a device: it could block or never end), a file larger than
    MAX_TSV_BYTES, a NUL byte, and a file in UTF-16 or UTF-32, with or
    without a byte-order mark.
    """
    path = pathlib.Path(path)
    lines = _decode_utf8(path, read_regular_file(path)).split("\n")
    parsed = (_parse_line(path, number, line) for number, line in enumerate(lines, start=1))
    pairs = [pair for pair in parsed if pair is not None]  # None: a blank line
    if not pairs:
        raise FileError(f"{path}: no source<TAB>target pairs found (the file is empty or blank)")
    return pairs


def read_regular_file(path, limit=MAX_TSV_BYTES):
    """The bytes of ``path``, a regular file of at most ``limit`` bytes.

    ``stat`` looks at the file without opening it (opening a FIFO would
    wait for a writer); the read stops after limit + 1 bytes, in case the
    file grew in between."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise FileError(f"{path}: file not found") from None
    size = info.st_size
    for is_kind, kind in FILE_KINDS.items():
        if is_kind(info.st_mode):
            raise FileError(f"{path}: is {kind}, expected a TSV file")
    with open(path, "rb") as file:
        raw = file.read(limit + 1) if size <= limit else b""
    if size > limit or len(raw) > limit:
        raise FileError(f"{path}: {max(size, len(raw)):,} bytes, more than the limit of "
                        f"{limit:,} bytes for a TSV file; split it")
    return raw


def _decode_utf8(path, raw):
    for bom, encoding in FOREIGN_BOMS:
        if raw.startswith(bom):
            raise FileError(f"{path}: {encoding} (it starts with a {encoding} byte-order mark); "
                            "save the file as UTF-8")
    nul = raw.find(b"\0")
    if nul >= 0:
        if _looks_like_utf16(raw):
            raise FileError(f"{path}: looks like UTF-16 without a byte-order mark (a NUL byte "
                            "at every other position); save the file as UTF-8")
        line = raw.count(b"\n", 0, nul) + 1
        raise FileError(f"{path}, line {line}: a NUL byte (0x00), which text never holds; "
                        "is it a binary file?")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1  # the newlines before the bad byte
        raise FileError(f"{path}, line {line}: invalid UTF-8 (byte 0x{raw[error.start]:02x}); "
                        "save the file as UTF-8") from None
    return text.removeprefix("\ufeff")  # a byte-order mark some editors write


def _looks_like_utf16(raw):
    """Latin text in UTF-16 is a NUL byte beside every letter: at the odd
    positions (little-endian) or the even ones (big-endian). Judged on the
    first 4096 bytes: at least half of one of the two positions is NUL."""
    sample = raw[:4096]
    halves = sample[0::2], sample[1::2]
    return any(half and half.count(0) >= len(half) / 2 for half in halves)


def _parse_line(path, number, line):
    """(source, target), or None for a blank line."""
    if not line.strip() and "\t" not in line:
        return None
    tabs = line.count("\t")
    if tabs != 1:
        problem = (
            "no tab between source and target"
            if tabs == 0
            else f"{tabs} tabs, expected exactly one"
        )
        raise FileError(f"{path}, line {number}: {problem}")
    source, target = (side.strip() for side in line.split("\t"))
    for side, text in (("source", source), ("target", target)):
        if not text:
            raise FileError(f"{path}, line {number}: empty {side} side")
    return source, target


def write_tsv(path, pairs):
    """Write (source, target) pairs so that ``read_tsv`` gives them back."""
    lines = []
    for index, (source, target) in enumerate(pairs):
        for side, text in (("source", source), ("target", target)):
            if not text.strip() or text != text.strip() or "\t" in text or "\n" in text:
                raise FileError(f"pairs[{index}]: {side} {text!r} must be non-empty, with no tab, "
                                "newline or surrounding whitespace")
        lines.append(f"{source}\t{target}\n")
    with open(path, "w", encoding="utf-8", newline="\n") as file:
        file.writelines(lines)

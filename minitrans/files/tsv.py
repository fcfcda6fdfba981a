"""Parallel corpora as TSV files: one "source<TAB>target" pair per line.

The file is read by the rules of ``files.rules`` (a regular file of at most
MAX_TSV_BYTES bytes, UTF-8 text); this module parses its lines."""

import pathlib

from minitrans.files.rules import FileError, atomic_file, decode_text, read_bytes

# The largest TSV file read: ten million pairs of sentences fit in it, and
# it is read whole into memory (as bytes, then as text, then as pairs).
MAX_TSV_BYTES = 2**30
WHAT = "a TSV file"


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
    lines = decode_text(path, read_regular_file(path)).split("\n")
    parsed = (_parse_line(path, number, line) for number, line in enumerate(lines, start=1))
    pairs = [pair for pair in parsed if pair is not None]  # None: a blank line
    if not pairs:
        raise FileError(f"{path}: no source<TAB>target pairs found (the file is empty or blank)")
    return pairs


def read_regular_file(path, limit=MAX_TSV_BYTES):
    """The bytes of ``path``, a regular file of at most ``limit`` bytes
    (``rules.read_bytes``)."""
    return read_bytes(path, WHAT, limit)


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
        raise FileError(f"{path}: line {number}: {problem}")
    source, target = (side.strip() for side in line.split("\t"))
    for side, text in (("source", source), ("target", target)):
        if not text:
            raise FileError(f"{path}: line {number}: empty {side} side")
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
    with atomic_file(path) as temporary:
        with open(temporary, "w", encoding="utf-8", newline="\n") as file:
            file.writelines(lines)

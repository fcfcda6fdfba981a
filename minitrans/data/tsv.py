"""Parallel corpora as TSV files: one "source<TAB>target" pair per line."""

import pathlib

from minitrans.data.vocab import DataError


def read_tsv(path):
    """A parallel corpus: one "source<TAB>target" pair per line, UTF-8.

    Returns a list of (source, target) strings with surrounding whitespace
    removed. Blank lines are skipped; anything else that is not exactly one
    tab between two non-empty sides is an error naming the file and line.
    """
    path = pathlib.Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found")
    if path.is_dir():
        raise DataError(f"{path}: is a directory, expected a TSV file")
    lines = _decode_utf8(path, path.read_bytes()).split("\n")
    parsed = (_parse_line(path, number, line) for number, line in enumerate(lines, start=1))
    pairs = [pair for pair in parsed if pair is not None]  # None: a blank line
    if not pairs:
        raise DataError(f"{path}: no source<TAB>target pairs found (the file is empty or blank)")
    return pairs


def _decode_utf8(path, raw):
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1  # the newlines before the bad byte
        raise DataError(f"{path}, line {line}: invalid UTF-8 (byte 0x{raw[error.start]:02x}); "
                        "save the file as UTF-8") from None
    return text.removeprefix("\ufeff")  # a byte-order mark some editors write


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
        raise DataError(f"{path}, line {number}: {problem}")
    source, target = (side.strip() for side in line.split("\t"))
    for side, text in (("source", source), ("target", target)):
        if not text:
            raise DataError(f"{path}, line {number}: empty {side} side")
    return source, target


def write_tsv(path, pairs):
    """Write (source, target) pairs so that ``read_tsv`` gives them back."""
    lines = []
    for index, (source, target) in enumerate(pairs):
        for side, text in (("source", source), ("target", target)):
            if not text.strip() or text != text.strip() or "\t" in text or "\n" in text:
                raise DataError(f"pairs[{index}]: {side} {text!r} must be non-empty, with no tab, "
                                "newline or surrounding whitespace")
        lines.append(f"{source}\t{target}\n")
    with open(path, "w", encoding="utf-8", newline="\n") as file:
        file.writelines(lines)

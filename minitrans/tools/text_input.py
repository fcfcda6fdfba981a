"""Sentences typed or piped into a command, one per line, checked as UTF-8.

Python's ``sys.stdin`` decodes with the locale's encoding and, on Linux,
turns a byte that is not UTF-8 into a lone surrogate ("\\udcff") that no
vocabulary holds: a Latin-1 file would be translated as <unk> without a
word. Reading the bytes and decoding each line here names the line and
the byte instead.
"""

import sys

from minitrans.data.vocab import DataError


def input_lines(stream=None, name="standard input"):
    """Yield each line of ``stream`` (a binary file; default: standard
    input's bytes) as text, without its line ending ("\\n" or "\\r\\n"),
    one at a time, so that a command answers each line as it comes.

    Raises DataError "standard input, line N: invalid UTF-8 (byte 0xff)" at
    the first line that is not UTF-8, after yielding the lines before it.
    """
    stream = sys.stdin.buffer if stream is None else stream
    for number, raw in enumerate(stream, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise DataError(
                f"{name}, line {number}: invalid UTF-8 "
                f"(byte 0x{raw[error.start]:02x}); give the text as UTF-8"
            ) from None
        if number == 1:
            text = text.removeprefix("\ufeff")  # a byte-order mark some editors write
        yield text.removesuffix("\n").removesuffix("\r")

"""Sentences typed or piped into a command, one per line, or given as an
argument, checked as UTF-8, and the pieces of them that a model does not
know, named on stderr.

Python's ``sys.stdin`` decodes with the locale's encoding and, on Linux,
turns a byte that is not UTF-8 into a lone surrogate ("\\udcff") that no
vocabulary holds: a Latin-1 file would be translated as <unk> without a
word. Reading the bytes and decoding each line here names the line and
the byte instead.
"""

import sys

from minitrans.data import corpus
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


def check_utf8(name, text):
    """``text``, an argument of the command line, checked to be UTF-8.

    Python hands over an argument's bytes that are not UTF-8 as lone
    surrogates ("\\udcff" for the byte 0xff), which fail later in a codec's
    message that names neither the argument nor the byte: here they are
    named, "prompt: not UTF-8 (byte 0xff at character 3) ...". None passes."""
    if text is None:
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        char = text[error.start]
        byte = f"byte 0x{ord(char) - 0xDC00:02x}" if "\udc80" <= char <= "\udcff" else repr(char)
        raise DataError(f"{name}: not UTF-8 ({byte} at character {error.start + 1}); give the "
                        "text as UTF-8") from None
    return text


def warn_unknown(task, text):
    """Name on stderr, in one line, the pieces of ``text`` (words at word
    level, characters at char and bpe level) that the vocabulary of ``task``
    lacks: they become <unk>, which the model cannot read, so its output may
    make no sense, and the user should know why. Nothing when all are known."""
    unknown = corpus.unknown_pieces(task, text)
    if unknown:
        print(f"unknown to the model: {', '.join(map(repr, unknown))}", file=sys.stderr)

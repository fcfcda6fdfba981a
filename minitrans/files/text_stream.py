"""A user's plain text of any size, read chunk by chunk in bounded memory.

A text to train a language model on (a book, a dump of a wiki) may be
larger than the memory of the machine as Python strings, so it is never
read whole: ``text_chunks`` hands it over as pieces of text decoded from
CHUNK_BYTES bytes at a time. It keeps the rules of ``files.rules``, as
``rules.read_text`` keeps them for a file read whole:

* a regular file (``rules.regular_file_size``: a directory, a FIFO or a
  device such as /dev/zero is refused by name, before it is opened), of at
  most MAX_TEXT_FILE_BYTES bytes (refused unread), and not empty;
* UTF-8 text: a UTF-8 byte-order mark is dropped; UTF-16 and UTF-32, with
  or without their mark, a NUL byte and bytes that are not UTF-8 are
  refused, naming the line and the byte's offset.

A character whose bytes are cut by a chunk's edge is whole in the text:
an incremental decoder keeps the bytes of an unfinished character until
the next chunk brings the rest.
"""

import codecs

from minitrans.files.rules import FOREIGN_BOMS, FileError, looks_like_utf16, regular_file_size

CHUNK_BYTES = 4 * 2**20  # bytes read at a time: a few times that in memory while a chunk is used
MAX_TEXT_FILE_BYTES = 4 * 2**30  # the largest text read: about four billion characters
SNIFF_BYTES = 4096  # the start of a file judged for UTF-16 without a byte-order mark
WHAT = "a UTF-8 text file"


def text_chunks(path, what=WHAT, chunk_bytes=None):
    """The text of the file at ``path`` (``what`` it is, for errors), as
    an iterator of strings, each decoded from ``chunk_bytes`` bytes
    (CHUNK_BYTES by default); joined, they are the whole text, its
    byte-order mark dropped.

    The file's kind and size are checked here, before anything is read;
    its bytes are checked as the chunks are read, so a bad byte far into a
    large file is refused when the reading reaches it. Every problem is a
    FileError of one line naming the file."""
    size = regular_file_size(path, what)
    if size > MAX_TEXT_FILE_BYTES:
        raise FileError(f"{path}: {size:,} bytes, expected at most {MAX_TEXT_FILE_BYTES:,} "
                        f"bytes (the limit for {what})")
    if size == 0:
        raise FileError(f"{path}: empty (0 bytes), expected {what} with some text in it")
    return _chunks(path, what, size, chunk_bytes or CHUNK_BYTES)


def _chunks(path, what, size, chunk_bytes):
    decoder = codecs.getincrementaldecoder("utf-8")()  # strict: a bad byte raises
    offset, newlines, characters = 0, 0, 0  # bytes read, the newlines among them, text given
    at_start = True  # no character decoded yet: a byte-order mark would come first
    try:
        with open(path, "rb") as file:
            refuse_foreign_encoding(path, file.read(SNIFF_BYTES))
            file.seek(0)
            while offset <= size:  # never past one byte more than stat said
                raw = file.read(min(chunk_bytes, size + 1 - offset))
                if not raw:
                    break
                refuse_nul(path, raw, offset, newlines)
                text = decoded(path, decoder, raw, offset, newlines, final=False)
                offset, newlines = offset + len(raw), newlines + raw.count(b"\n")
                if at_start and text:
                    text, at_start = text.removeprefix("\ufeff"), False
                characters += len(text)
                if text:
                    yield text
    except OSError as error:
        raise FileError(f"{path}: cannot be read ({error.strerror})") from None
    if offset > size:
        raise FileError(f"{path}: grew while it was read, expected {what} left alone")
    decoded(path, decoder, b"", offset, newlines, final=True)  # a character cut at the end
    if characters == 0:
        raise FileError(f"{path}: holds no text (only a byte-order mark), expected {what} "
                        "with some text in it")


def decoded(path, decoder, raw, offset, newlines, final):
    """The text ``decoder`` makes of ``raw``, the bytes at ``offset`` of the
    file (after ``newlines`` newlines); invalid UTF-8 is refused, naming
    its line and the offset of its first bad byte."""
    pending = decoder.getstate()[0]  # the start of a character cut by the last chunk's edge
    try:
        return decoder.decode(raw, final)
    except UnicodeDecodeError as error:
        data = pending + raw  # what the decoder looked at: error.start counts in it
        where = offset - len(pending) + error.start
        line = newlines + data.count(b"\n", 0, error.start) + 1
        problem = ("a character cut short at the end of the file" if final
                   else f"byte 0x{data[error.start]:02x}")
        raise FileError(f"{path}: line {line} (byte {where:,}): invalid UTF-8 ({problem}), "
                        "expected UTF-8 text; save the file as UTF-8") from None


def refuse_foreign_encoding(path, start):
    """Refuse a file whose first bytes ``start`` say UTF-16 or UTF-32: a
    byte-order mark, or a NUL byte beside every Latin letter."""
    for bom, encoding in FOREIGN_BOMS:
        if start.startswith(bom):
            raise FileError(f"{path}: {encoding} (it starts with a {encoding} byte-order "
                            "mark), expected UTF-8; save the file as UTF-8")
    if b"\0" in start and looks_like_utf16(start):
        raise FileError(f"{path}: looks like UTF-16 without a byte-order mark (a NUL byte at "
                        "every other position), expected UTF-8; save the file as UTF-8")


def refuse_nul(path, raw, offset, newlines):
    """Refuse a NUL byte in ``raw`` (the bytes at ``offset``, after
    ``newlines`` newlines): text never holds one."""
    nul = raw.find(b"\0")
    if nul >= 0:
        line = newlines + raw.count(b"\n", 0, nul) + 1
        raise FileError(f"{path}: line {line} (byte {offset + nul:,}): a NUL byte (0x00), "
                        "expected text, which never holds one; is it a binary file?")

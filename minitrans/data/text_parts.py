"""A long text cut into parts by characters (the training part, the held
out part), each encoded as it is read into a token file, when the number
of ids is known only once the text is encoded (byte-level BPE tokens).

    text file --split_chunks--> (part, text) in order
              --PieceStream---> ids, each piece of the text encoded whole
              --write_encoded-> a temporary file per part, then its token file

Each part's ids go to an unnamed temporary file first, since a token file
is made of its final length; once every part is encoded and long enough,
they are copied into the token files. Memory stays bounded and the text is
encoded once. Python's ``array`` module packs the ids into bytes of the
token file's type, so NumPy stays in the modules that read and write arrays.
"""

import array
import contextlib
import os
import tempfile

from minitrans.data.vocab import DataError
from minitrans.files.rules import FileError
from minitrans.files.text_stream import text_chunks
from minitrans.files.token_file import token_dtype, token_writer

COPY_IDS = 2**22  # ids copied at a time from a temporary file to a token file
MAX_WAITING = 2**22  # characters without a piece boundary held back before they are cut anyway
SPACES = " \t\n\r"  # whitespace to every pre-tokenizer: where a stream of text is cut


def refuse_too_short(path, part, length, block_size, unit="character"):
    """Refuse a ``part`` of the text too short for one window and its targets."""
    if length < block_size + 1:
        raise DataError(f"{path}: {part} holds {length:,} {unit}{'s' * (length != 1)}, "
                        f"expected at least {block_size + 1:,} (one window of block_size "
                        f"{block_size:,}, plus one)")


class PieceStream:
    """A text fed in chunks of any size (``feed``), encoded by ``tokenizer``
    (``encode(text) -> ids``, pre-tokenizing as GPT-2 does) as if whole.

    A chunk is encoded up to its last piece boundary: the start of a run of
    spaces, tabs or newlines after a character that is not whitespace (no
    piece runs from such a character into whitespace, and the pieces after
    it do not depend on the text before). The rest waits for the next
    chunk; ``finish`` encodes what is left. A run of over MAX_WAITING
    characters without a boundary is encoded as it is."""

    def __init__(self, tokenizer):
        self.tokenizer, self.waiting = tokenizer, ""

    def feed(self, text):
        """The ids of the text fed so far, up to its last piece boundary."""
        text = self.waiting + text
        cut = piece_boundary(text)
        if len(text) - cut > MAX_WAITING:
            cut = len(text)
        self.waiting = text[cut:]
        return self.tokenizer.encode(text[:cut])

    def finish(self):
        """The ids of the text still waiting."""
        text, self.waiting = self.waiting, ""
        return self.tokenizer.encode(text)


def piece_boundary(text):
    """The offset of the last piece boundary in ``text`` (0 if none)."""
    last = max(text.rfind(" "), text.rfind("\n"))
    start = len(text[:last + 1].rstrip(SPACES))  # the start of its run of spaces
    return start if start > 0 and not text[start - 1].isspace() else 0


def split_chunks(chunks, lengths):
    """(part, text) pairs: the text of ``chunks`` cut into parts of
    ``lengths`` characters, in order; the last part takes what is left
    (its length may be None)."""
    part, room = 0, lengths[0]
    for chunk in chunks:
        while part < len(lengths) - 1 and len(chunk) > room:
            yield part, chunk[:room]
            chunk, part = chunk[room:], part + 1
            room = lengths[part]
        if part < len(lengths) - 1:
            room -= len(chunk)
        yield part, chunk


def write_encoded(tokenizer, block_size, sources):
    """Encode each text of ``sources``, (path, parts), into the token files
    of its parts, (file, characters, name) in the text's order (characters
    None: all that is left); ``tokenizer.vocab`` sizes the ids. Returns the
    characters and the ids of every part, in order; a part of fewer ids
    than a window and its targets is refused before a token file is made."""
    vocab_size = len(tokenizer.vocab)
    typecode = array_type(token_dtype(vocab_size).itemsize)
    itemsize = array.array(typecode).itemsize
    characters, ids, encoded = [], [], []
    with contextlib.ExitStack() as stack:
        for path, parts in sources:
            streams = [PieceStream(tokenizer) for _ in parts]
            files = [stack.enter_context(tempfile.TemporaryFile(dir=os.path.dirname(out)))
                     for out, _, _ in parts]
            seen = [0] * len(parts)
            for part, text in split_chunks(text_chunks(path), [n for _, n, _ in parts]):
                seen[part] += len(text)
                files[part].write(array.array(typecode, streams[part].feed(text)).tobytes())
            for (out, length, name), stream, file, count in zip(parts, streams, files, seen):
                file.write(array.array(typecode, stream.finish()).tobytes())
                if length is not None and count != length:
                    raise FileError(f"{path}: {sum(seen):,} characters on its second reading, "
                                    f"{sum(n for _, n, _ in parts):,} on its first, expected "
                                    "the text left alone while it is read")
                refuse_too_short(path, name, file.tell() // itemsize, block_size, "id")
                characters.append(count)
                ids.append(file.tell() // itemsize)
                encoded.append((out, file))
        for (out, file), length in zip(encoded, ids):
            copy_ids(file, out, length, vocab_size, typecode)
    return characters, ids


def copy_ids(file, out, length, vocab_size, typecode):
    """Copy the ``length`` ids of the temporary ``file`` into a token file."""
    file.seek(0)
    with token_writer(out, length, vocab_size) as writer:
        for _ in range(0, length, COPY_IDS):
            ids = array.array(typecode)
            ids.frombytes(file.read(COPY_IDS * ids.itemsize))
            writer.write(ids)


def array_type(itemsize):
    """The ``array`` module's code of unsigned integers of ``itemsize`` bytes."""
    return next(code for code in "BHILQ" if array.array(code).itemsize == itemsize)

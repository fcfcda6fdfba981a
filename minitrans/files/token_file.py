"""Token ids on disk: one .npy file holding a long text's ids, written
chunk by chunk and read back memory-mapped.

A text of a billion characters is a billion ids: too many to hold as a
Python list, and more than needed in memory at once, since training reads
a few windows of them at a time. So ``token_writer`` fills a file of the
final length as the ids come (``numpy.lib.format.open_memmap``), and
``read_tokens`` maps it back without reading it (the operating system
pages in the windows a batch touches). The ids are stored in the smallest
unsigned type that holds the vocabulary: uint16 for up to 65,536 ids (a
character-level vocabulary, GPT-2's 50,257 sub-words), else uint32.

The file is written atomically (``rules.atomic_file``): a crash leaves the
old file or the new one. One read back may have been tampered with since,
so it is checked as any file a user hands us: a 1-d array of the expected
type and length, every id inside the vocabulary.
"""

import contextlib

import numpy as np

from minitrans.files.rules import FileError, atomic_file, regular_file_size, short

WHAT = "a token file (.npy)"
CHECK_IDS = 2**22  # ids checked at a time when a file is read back: 8 MiB of uint16


def token_dtype(vocab_size):
    """The smallest unsigned type that holds ids 0 .. vocab_size - 1."""
    return np.dtype(np.uint16) if vocab_size <= 2**16 else np.dtype(np.uint32)


class TokenWriter:
    """The ids of a token file, written in order (``write``) into an array
    mapped onto the file; it must be full when the writing ends."""

    def __init__(self, path, array):
        self.path, self.array, self.written = path, array, 0

    def write(self, ids):
        """Append ``ids`` (a 1-d integer array) after the ids written so far."""
        end = self.written + len(ids)
        if end > len(self.array):
            raise FileError(f"{self.path}: {end:,} ids written, expected {len(self.array):,} "
                            "(did the text change while it was read?)")
        self.array[self.written:end] = ids
        self.written = end


@contextlib.contextmanager
def token_writer(path, length, vocab_size):
    """A ``TokenWriter`` for the file at ``path`` that will hold ``length``
    ids below ``vocab_size``. The file appears at ``path`` only once the
    block ends with all ``length`` ids written; an error in the block
    leaves whatever was at ``path`` before."""
    with atomic_file(path) as temporary:
        array = np.lib.format.open_memmap(temporary, mode="w+", dtype=token_dtype(vocab_size),
                                          shape=(length,))
        writer = TokenWriter(path, array)
        try:
            yield writer
            if writer.written != length:
                raise FileError(f"{path}: {writer.written:,} ids written, expected {length:,} "
                                "(did the text change while it was read?)")
            array.flush()
        finally:
            del writer.array, array  # unmapped before atomic_file renames the file


def write_tokens(path, ids, vocab_size):
    """Write the 1-d array ``ids`` (all below ``vocab_size``) to ``path``
    at once: ``token_writer`` for ids that are already in memory."""
    with token_writer(path, len(ids), vocab_size) as writer:
        writer.write(ids)


def read_tokens(path, vocab_size, length=None, low=0):
    """The ids of the token file at ``path``, memory-mapped (read-only,
    nothing read until used): checked to be a 1-d array of
    ``token_dtype(vocab_size)``, of ``length`` ids where it is given, each
    id in ``low`` .. ``vocab_size - 1`` (checked CHECK_IDS ids at a time,
    so memory stays bounded). A file that is not so is a FileError."""
    regular_file_size(path, WHAT)  # a FIFO or a device is refused before it is opened
    try:
        tokens = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as error:
        # numpy takes a file without the .npy header for a pickle, and says so
        found = "pickled Python objects" if "pickle" in str(error) else short(str(error), 80)
        raise FileError(f"{path}: not a readable .npy array ({found}), expected {WHAT}") from None
    if not isinstance(tokens, np.ndarray):  # np.load opens a zip file as an .npz archive
        tokens.close()
        raise FileError(f"{path}: not a readable .npy array (an .npz archive), expected {WHAT}")
    expected = token_dtype(vocab_size)
    if tokens.ndim != 1 or tokens.dtype != expected:
        raise FileError(f"{path}: holds a {tokens.ndim}-d {tokens.dtype} array, expected a 1-d "
                        f"{expected} array of ids")
    if length is not None and len(tokens) != length:
        raise FileError(f"{path}: holds {len(tokens):,} ids, expected {length:,}")
    for start in range(0, len(tokens), CHECK_IDS):
        chunk = tokens[start:start + CHECK_IDS]
        smallest, largest = int(chunk.min()), int(chunk.max())
        if smallest < low or largest >= vocab_size:
            bad = smallest if smallest < low else largest
            raise FileError(f"{path}: holds id {bad:,}, expected ids from {low} to "
                            f"{vocab_size - 1:,} (the vocabulary's)")
    return tokens

"""A plain text to train a decoder-only model on, character by character, as
nanoGPT's Tiny Shakespeare, or in byte-level BPE tokens learned from it
(``data.byte_bpe_learning``; as the number of their ids is known only once
the text is encoded, ``data.text_parts`` writes their token files): its
vocabulary, its ids on disk, its windows.

    text file --character_counts--> Vocab (frequent characters first)
              --prepare_text------> train.npy, valid.npy (token files)
              --TextWindows-------> Batch of random windows (training)
              --every_window------> Batches of every window in order (evaluation)

The text may be larger than memory as Python strings, so it is read twice
in chunks (``files.text_stream``): once to count its characters, once to
encode them into token files of the length the count gave. A chunk is
counted and encoded as an array of code points (its UTF-32 encoding seen
as uint32 numbers), never as a Python list of characters: one call of
``np.unique`` counts a chunk, one gather through a table encodes it.

Without a held-out file the last tenth of the text, by characters, is
held out (the first 90% trains); with one, every character in it must be
in the training text's vocabulary, since a character never seen in
training could never be predicted (bytes are never unseen: at level "bpe"
any held-out text will do).
"""

import contextlib
import os
from typing import NamedTuple

import numpy as np

from minitrans.core import backend, checks
from minitrans.data import byte_bpe_learning as learning
from minitrans.data.batches import Batch, to_device_together
from minitrans.data.text_parts import refuse_too_short, write_encoded
from minitrans.data.vocab import PAD_ID, SPECIAL_TOKENS, DataError, Vocab
from minitrans.files.rules import short
from minitrans.files.text_stream import text_chunks
from minitrans.files.token_file import read_tokens, token_writer

LEVELS = ("char", "bpe")  # a token a character; byte-level BPE learned from the text
TRAIN_FILE, VALID_FILE = "train.npy", "valid.npy"
HELD_OUT_TENTHS = 1  # without a held-out file: this many tenths of the text's characters
EXAMPLES = 5  # unseen characters an error shows


def code_points(text):
    """The code points of ``text``'s characters as a uint32 array (no list)."""
    return np.frombuffer(text.encode("utf-32-le"), np.uint32)


# --------------------------------------------------------------- vocabulary


class CharacterCounts(NamedTuple):
    """The distinct characters of a text, as sorted code points, and how
    often each occurs."""

    codes: np.ndarray
    counts: np.ndarray

    def total(self):
        return int(self.counts.sum())


def character_counts(path):
    """The CharacterCounts of the text file at ``path``, counted chunk by chunk."""
    codes, counts = np.zeros(0, np.uint32), np.zeros(0, np.int64)
    for chunk in text_chunks(path):
        chunk_codes, chunk_counts = np.unique(code_points(chunk), return_counts=True)
        codes, where = np.unique(np.concatenate([codes, chunk_codes]), return_inverse=True)
        summed = np.zeros(len(codes), np.int64)
        np.add.at(summed, where, np.concatenate([counts, chunk_counts]))
        counts = summed
    return CharacterCounts(codes, counts)


def character_vocab(counts):
    """The Vocab of a text's characters (``counts``): the four special tokens,
    then the characters, frequent first, ties by code point, so the same
    text always gives the same ids."""
    order = np.lexsort((counts.codes, -counts.counts))  # the last key sorts first
    return Vocab([chr(code) for code in counts.codes[order].tolist()])


class CharacterTable:
    """Characters to the ids of a character-level Vocab and back.

    ``table[c]`` is the id of the character with code point ``c``, and
    PAD_ID (which no character has) for a character the Vocab lacks; one
    gather encodes a whole chunk of text."""

    level = "char"  # the text task's level of this tokenizer

    def __init__(self, vocab):
        characters = vocab.tokens[len(SPECIAL_TOKENS):]
        if not characters or any(len(token) != 1 for token in characters):
            raise DataError(f"vocabulary: expected single characters, got {short(characters)}")
        codes = np.array([ord(character) for character in characters], np.int64)
        self.vocab = vocab
        self.table = np.full(int(codes.max()) + 2, PAD_ID, np.uint32)  # the last: beyond all
        self.table[codes] = np.arange(len(SPECIAL_TOKENS), len(vocab), dtype=np.uint32)

    def encode(self, text):
        """The ids of ``text``'s characters (uint32), PAD_ID for one unknown."""
        return self.table[np.minimum(code_points(text), len(self.table) - 1)]

    def decode(self, ids):
        """The text of ``ids``: ``decode(encode(text)) == text``."""
        return "".join(self.vocab.decode([int(i) for i in ids], strip_special=False))


# ------------------------------------------------------------- token files


class TextCorpus(NamedTuple):
    """A text made ready to train on (``prepare_text``)."""

    vocab: Vocab
    train: np.ndarray  # the training part's ids, memory-mapped from TRAIN_FILE
    valid: np.ndarray  # the held-out part's, from VALID_FILE
    description: str
    tokenizer: object  # CharacterTable or byte_bpe_learning.ByteBPE: encode, decode
    train_characters: int  # the characters of each part (bits per character)
    valid_characters: int


def prepare_text(path, folder, block_size, valid_path=None, level="char", merges=None,
                 tokenizer=None):
    """Read the text at ``path`` (and the held-out text at ``valid_path``), write their
    ids to ``folder``/train.npy and valid.npy, and map them back. ``level``: "char", or
    "bpe" with up to ``merges`` merges learned from a sample of the text (None: as long
    as a pair is seen twice), or the merges of ``tokenizer`` (a ByteBPE), none learned.

    Refused (DataError or FileError, one line naming the file): a text of a
    single distinct character (nothing to learn), a training or held-out
    part shorter than one window plus one (``block_size + 1`` ids: a
    window's inputs and its targets, one place further), a held-out text
    with characters the training text lacks (at level "char")."""
    checks.check_positive_int("block_size", block_size)
    checks.check_choice("level", level, LEVELS)
    checks.check_int("merges", merges, low=0, allow_none=True)
    if tokenizer is not None and (level, merges) != ("bpe", None):
        raise ValueError(f"tokenizer: given at level 'bpe' alone, nothing to learn; got level "
                         f"{level!r}, merges {merges!r}")
    counts = character_counts(path)
    if len(counts.codes) < 2:
        raise DataError(f"{path}: holds a single distinct character ({chr(counts.codes[0])!r}), "
                        "expected at least two: there would be nothing to predict")
    if level == "bpe":
        return prepare_bytes(path, folder, block_size, valid_path, counts.total(), merges,
                             tokenizer)
    vocab = character_vocab(counts)
    table, total = CharacterTable(vocab), counts.total()
    train_out, valid_out = f"{folder}/{TRAIN_FILE}", f"{folder}/{VALID_FILE}"
    distinct = f"{total:,} characters of {path}, {len(vocab) - len(SPECIAL_TOKENS)} distinct"
    if valid_path is None:
        held = total * HELD_OUT_TENTHS // 10
        train = total - held
        refuse_too_short(path, "the training part (the first 90%)", train, block_size)
        refuse_too_short(path, "the held-out part (the last 10%)", held, block_size)
        write_split(path, table, (train_out, train), (valid_out, held))
        description = f"{distinct}; the last {held:,} held out"
    else:
        train, held = total, held_out_length(valid_path, path, counts, block_size)
        refuse_too_short(path, "the training text", train, block_size)
        write_split(path, table, (train_out, train))
        write_split(valid_path, table, (valid_out, held))
        description = f"{distinct}; {held:,} held out in {valid_path}"
    return TextCorpus(vocab, *read_token_files(folder, vocab, train, held), description, table,
                      train, held)


def prepare_bytes(path, folder, block_size, valid_path, total, merges, tokenizer=None):
    """``prepare_text`` at level "bpe" for the text at ``path`` of ``total`` characters:
    merges learned from its sample (or ``tokenizer``'s), then the text encoded."""
    source = "merges given, none learned"
    if tokenizer is None:
        spans = learning.sample_spans(total)
        tokenizer = learning.ByteBPE(learning.learn_byte_merges(
            learning.text_sample(text_chunks(path), spans), merges))
        source = learning.describe_sample(spans, total)
    train_out, valid_out = f"{folder}/{TRAIN_FILE}", f"{folder}/{VALID_FILE}"
    if valid_path is None:
        held = total * HELD_OUT_TENTHS // 10
        sources = [(path, [(train_out, total - held, "the training part (the first 90%)"),
                           (valid_out, held, "the held-out part (the last 10%)")])]
    else:
        sources = [(path, [(train_out, total, "the training text")]),
                   (valid_path, [(valid_out, None, "the held-out text")])]
    os.makedirs(folder, exist_ok=True)  # the temporary files of the ids go there
    characters, ids = write_encoded(tokenizer, block_size, sources)
    vocab, tokens = tokenizer.vocab, len(tokenizer.vocab) - len(SPECIAL_TOKENS)
    held_out = (f"the last {characters[1]:,} characters" if valid_path is None else
                f"{characters[1]:,} characters in {valid_path}")
    description = (f"{total:,} characters of {path} in byte-level BPE: {tokens:,} tokens (the "
                   f"256 bytes and {len(tokenizer.merges):,} {source}); {ids[0]:,} training ids; "
                   f"{held_out} held out, {ids[1]:,} ids")
    return TextCorpus(vocab, *read_token_files(folder, vocab, *ids), description, tokenizer,
                      *characters)


def read_token_files(folder, vocab, train_length=None, valid_length=None):
    """The training and held-out ids in ``folder`` (as ``prepare_text``
    wrote them), memory-mapped, each checked against ``vocab``."""
    return tuple(read_tokens(f"{folder}/{name}", len(vocab), length, low=len(SPECIAL_TOKENS))
                 for name, length in ((TRAIN_FILE, train_length), (VALID_FILE, valid_length)))


def held_out_length(valid_path, train_path, train_counts, block_size):
    """The characters in the held-out text at ``valid_path``, all of which
    must be in the training text's vocabulary."""
    counts = character_counts(valid_path)
    unseen = ~np.isin(counts.codes, train_counts.codes)
    if unseen.any():
        frequent = np.argsort(-counts.counts[unseen], kind="stable")[:EXAMPLES]
        examples = ", ".join(repr(chr(code)) for code in counts.codes[unseen][frequent].tolist())
        raise DataError(
            f"{valid_path}: characters the training text {train_path} lacks: "
            f"{int(counts.counts[unseen].sum()):,} ({int(unseen.sum()):,} distinct, such as "
            f"{examples}), expected only characters seen in training")
    refuse_too_short(valid_path, "the held-out text", counts.total(), block_size)
    return counts.total()


def write_split(path, table, *parts):
    """Encode the text at ``path`` chunk by chunk into the token files of
    ``parts``, (file, length) pairs in the text's order: the first file
    takes the first ``length`` ids, the next the ones after them."""
    with contextlib.ExitStack() as stack:
        writers = [stack.enter_context(token_writer(out, length, len(table.vocab)))
                   for out, length in parts]
        for chunk in text_chunks(path):
            ids = table.encode(chunk)
            if (ids == PAD_ID).any():
                raise DataError(f"{path}: holds a character its first reading did not, "
                                "expected the text left alone while it is read")
            for writer in writers[:-1]:
                room = len(writer.array) - writer.written
                writer.write(ids[:room])
                ids = ids[room:]
            writers[-1].write(ids)  # more ids than counted: refused there


# ------------------------------------------------------------------ windows


class TextWindows:
    """Random windows of ``block_size`` ids from a token array, a batch at a time: the
    model reads ``x = tokens[s:s+T]`` and predicts ``y = tokens[s+1:s+T+1]``, the same
    ids one place further, for B random starts ``s``.

    The starts come from ``rng`` (a seed or a numpy Generator, on the host), so a seed
    gives the same batches every time; ``state()`` is what a checkpoint keeps to resume
    with the next batch (``restore(state)``)."""

    def __init__(self, tokens, block_size, batch_size, rng=0):
        checks.check_positive_int("block_size", block_size)
        checks.check_positive_int("batch_size", batch_size)
        if len(tokens) < block_size + 1:
            raise DataError(f"tokens: {len(tokens):,} ids, expected at least {block_size + 1:,} "
                            f"(one window of block_size {block_size:,}, plus one)")
        self.tokens, self.block_size, self.batch_size = tokens, block_size, batch_size
        self.rng = backend.host_rng(rng)

    def batch(self):
        """One Batch of ``batch_size`` random windows, on the device."""
        last_start = len(self.tokens) - self.block_size - 1  # its targets end the array
        starts = self.rng.integers(0, last_start + 1, size=self.batch_size)
        return window_batch(self.tokens, starts, self.block_size)

    def state(self):
        return self.rng.bit_generator.state

    def restore(self, state):
        self.rng.bit_generator.state = state


def every_window(tokens, block_size, batch_size):
    """Batches of every full window of ``tokens`` in order, side by side (starts 0,
    T, 2T, ...: each id is predicted once), ``batch_size`` windows a batch (the last
    batch may hold fewer); the ids after the last full window are left out. An
    evaluation's mean loss over them is the text's loss per token."""
    checks.check_positive_int("block_size", block_size)
    checks.check_positive_int("batch_size", batch_size)
    count = (len(tokens) - 1) // block_size
    if count < 1:
        raise DataError(f"tokens: {len(tokens):,} ids, expected at least {block_size + 1:,} "
                        f"(one window of block_size {block_size:,}, plus one)")
    for first in range(0, count, batch_size):
        starts = np.arange(first, min(first + batch_size, count)) * block_size
        yield window_batch(tokens, starts, block_size)


def window_batch(tokens, starts, block_size):
    """The Batch of the windows at ``starts``: one gather of the (B, T + 1) ids on the
    host, its first T columns the inputs and its last T the targets, in one copy."""
    windows = np.array(tokens[starts[:, None] + np.arange(block_size + 1)], dtype=np.int64)
    inputs, targets = to_device_together(windows[:, :-1], windows[:, 1:])
    return Batch(None, inputs, targets, num_tokens=windows.shape[0] * block_size)

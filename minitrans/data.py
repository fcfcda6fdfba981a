"""From text to batches of token ids: vocabulary, tokenisers, padding, files.

    text --Tokenizer.split--> tokens --Vocab.encode--> ids --make_*_batch--> Batch

Everything here runs on the host (plain Python and NumPy); only finished
batches move to the current backend, one copy per batch. Every problem with
the data raises ``DataError`` (a ``ValueError``), naming the file and line
where there is one.
"""

import collections
import dataclasses
import json
import pathlib

import numpy as np

from minitrans import backend

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3


class DataError(ValueError):
    """Bad data: a malformed corpus file, a bad vocabulary, an empty batch."""


# ----------------------------------------------------------------- vocabulary


class Vocab:
    """A two-way map between tokens and integer ids.

    ``Vocab(tokens)`` takes the ordinary tokens in id order; the four special
    tokens always come first, so <pad> is 0, <bos> 1, <eos> 2 and <unk> 3 in
    every vocabulary (the model and the masks rely on PAD_ID being 0).
    """

    def __init__(self, tokens):
        tokens = list(tokens)
        for token in tokens:
            if not isinstance(token, str) or not token or token in SPECIAL_TOKENS:
                raise DataError("tokens: expected non-empty strings other than the special tokens "
                                f"(those are added automatically), got {token!r}")
        repeated = sorted(token for token, n in collections.Counter(tokens).items() if n > 1)
        if repeated:
            raise DataError(f"tokens: each token must appear once, repeated: {repeated[:10]}")
        self.tokens = list(SPECIAL_TOKENS) + tokens
        self._ids = {token: i for i, token in enumerate(self.tokens)}

    @classmethod
    def build(cls, token_lists, min_freq=1):
        """Count tokens and keep those seen at least ``min_freq`` times.

        Frequent tokens get small ids; ties are broken alphabetically, so the
        same data always gives the same vocabulary, whatever order it came in.
        Special tokens found in the text (a corpus that already says <unk>)
        are not counted: they have their fixed ids.
        """
        if isinstance(min_freq, bool) or not isinstance(min_freq, int) or min_freq < 1:
            raise ValueError(f"min_freq: expected a positive integer, got {min_freq!r}")
        counts = collections.Counter(token for tokens in token_lists for token in tokens)
        kept = [t for t, n in counts.items() if n >= min_freq and t not in SPECIAL_TOKENS]
        return cls(sorted(kept, key=lambda token: (-counts[token], token)))

    def __len__(self):
        return len(self.tokens)

    def __eq__(self, other):
        return isinstance(other, Vocab) and self.tokens == other.tokens

    def encode(self, tokens):
        """Token strings -> ids; a token never seen in training becomes UNK_ID."""
        return [self._ids.get(token, UNK_ID) for token in tokens]

    def decode(self, ids, strip_special=True):
        """Ids -> token strings.

        With ``strip_special`` (the default, for showing a model's output)
        reading stops at the first <eos> and <pad>/<bos> are dropped; <unk>
        is kept, since it stands for a real word.
        """
        tokens = []
        for i in map(int, ids):
            if not 0 <= i < len(self.tokens):
                raise DataError(f"ids: {i} is outside the vocabulary of {len(self.tokens)} tokens")
            if strip_special and i == EOS_ID:
                break
            if not (strip_special and i in (PAD_ID, BOS_ID)):
                tokens.append(self.tokens[i])
        return tokens

    def to_json(self):
        """The vocabulary as a JSON string, to store inside a checkpoint."""
        return json.dumps({"specials": list(SPECIAL_TOKENS), "tokens": self.tokens[len(SPECIAL_TOKENS):]})

    @classmethod
    def from_json(cls, text):
        """The inverse of ``to_json``."""
        try:
            stored = json.loads(text)
            specials, tokens = stored["specials"], stored["tokens"]
        except (TypeError, ValueError, KeyError) as error:
            raise DataError(f"vocabulary JSON: expected an object with 'specials' and 'tokens' ({error})") from None
        if specials != list(SPECIAL_TOKENS):  # saved by a version with other special tokens
            raise DataError(f"vocabulary JSON: special tokens {specials} differ from {list(SPECIAL_TOKENS)}")
        return cls(tokens)


# ----------------------------------------------------------------- tokenisers


@dataclasses.dataclass(frozen=True)
class Tokenizer:
    """Splits text into tokens and joins them back.

    ``"char"``: every character is a token (digits, arithmetic);
    ``"word"``: tokens are separated by whitespace (the toy translation).
    The paper uses sub-word units (byte-pair encoding, §5.1); these two
    levels are enough for toy tasks and keep the data readable.
    """

    level: str
    LEVELS = ("char", "word")

    def __post_init__(self):
        if self.level not in self.LEVELS:
            raise ValueError(f"level: expected one of {self.LEVELS}, got {self.level!r}")

    def split(self, text):
        return list(text) if self.level == "char" else text.split()

    def join(self, tokens):
        return "".join(tokens) if self.level == "char" else " ".join(tokens)


# -------------------------------------------------------------------- batches


def pad(sequences, pad_id=PAD_ID):
    """Lists of ids of different lengths -> one (B, T_max) int64 host array.

    Short sequences are filled with ``pad_id`` on the right; the masks then
    keep attention and the loss away from those positions.
    """
    if len(sequences) == 0:
        raise DataError("sequences: expected at least one sequence, got none")
    longest = max(len(sequence) for sequence in sequences)
    padded = np.full((len(sequences), longest), pad_id, dtype=np.int64)
    for row, sequence in enumerate(sequences):
        padded[row, : len(sequence)] = sequence
    return padded


@dataclasses.dataclass
class Batch:
    """One training batch, on the device.

    src:        (B, S) source ids, or None for a decoder-only model
    tgt_in:     (B, T) what the decoder reads
    tgt_out:    (B, T) what it must predict at each position
    num_tokens: non-pad entries of tgt_out, a Python int (to average the loss
                per token, or to count tokens per second)
    """

    src: object
    tgt_in: object
    tgt_out: object
    num_tokens: int


def _to_batch(src, tgt_in, tgt_out):
    num_tokens = int((tgt_out != PAD_ID).sum())  # counted on the host: no device sync
    src = None if src is None else backend.to_device(src)
    return Batch(src, backend.to_device(tgt_in), backend.to_device(tgt_out), num_tokens)


def make_seq2seq_batch(pairs):
    """Encoder-decoder batch from (src_ids, tgt_ids) pairs of id lists.

        src     = src_ids                       (padded)
        tgt_in  = <bos> + tgt_ids               (padded)
        tgt_out =         tgt_ids + <eos>       (padded)

    Teacher forcing: the decoder reads the true target shifted one place to
    the right, so at position t it has seen target tokens 0..t-1 (and <bos>,
    which says "start") and is trained to predict target token t, found at
    tgt_out[t]. All positions are trained in one forward pass; the causal
    mask stops position t from peeking at tgt_in[t + 1:]. The final <eos>
    teaches the model when to stop.
    """
    if len(pairs) == 0:
        raise DataError("pairs: expected at least one (source, target) pair, got none")
    src = pad([list(s) for s, _ in pairs])
    tgt_in = pad([[BOS_ID] + list(t) for _, t in pairs])
    tgt_out = pad([list(t) + [EOS_ID] for _, t in pairs])
    return _to_batch(src, tgt_in, tgt_out)


def make_lm_batch(sequences):
    """Decoder-only batch: predict every next token of <bos> + seq + <eos>.

    tgt_in is the whole sequence but its last token and tgt_out the whole
    sequence but its first, so tgt_out[t] is the token after tgt_in[t].
    """
    if len(sequences) == 0:
        raise DataError("sequences: expected at least one sequence, got none")
    full = [[BOS_ID] + list(sequence) + [EOS_ID] for sequence in sequences]
    return _to_batch(None, pad([f[:-1] for f in full]), pad([f[1:] for f in full]))


def iterate_batches(examples, batch_size, rng):
    """Yield lists of ``batch_size`` examples forever, epoch after epoch.

    Each epoch visits the examples in a fresh order, ``rng.permutation``, and
    drops its last partial batch, so every batch has the same size (a
    dataset no larger than ``batch_size`` gives one batch of all of it).

    The batches depend only on the state of ``rng`` (a numpy Generator) when
    the iteration starts. To resume an interrupted run with the same batches,
    save ``rng.bit_generator.state`` before iterating; on resume restore it
    and skip the batches already trained on (``itertools.islice``). Saving
    the state mid-run is not enough: the current epoch's order has already
    been drawn from it.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size: expected a positive integer, got {batch_size!r}")
    if len(examples) == 0:
        raise DataError("examples: expected at least one example, got none")
    count = len(examples)
    while True:
        order = rng.permutation(count).tolist()
        if count <= batch_size:
            yield [examples[i] for i in order]
            continue
        for start in range(0, count - batch_size + 1, batch_size):
            yield [examples[i] for i in order[start : start + batch_size]]


# ------------------------------------------------------------------ TSV files


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
        problem = "no tab between source and target" if tabs == 0 else f"{tabs} tabs, expected exactly one"
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

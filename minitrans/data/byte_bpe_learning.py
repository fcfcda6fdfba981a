"""Byte-level BPE learned from a text (GPT-2's kind): every text is bytes,
so nothing is ever unknown, and the merges come from the text itself.

Learning (``learn_byte_merges``), on a bounded sample of the text:

    1. pre-tokenize: cut the text into pieces (a word with the one space
       before it, a run of digits, a run of other symbols, whitespace), so
       that no token spans two words;
    2. count the pieces; write each as its UTF-8 bytes, symbols 0 .. 255;
    3. count every pair of adjacent symbols, each piece weighted by its count;
    4. merge the most frequent pair into one new symbol everywhere, record it;
    5. repeat 3-4 up to ``num_merges`` times, or until the best pair is seen
       fewer than ``min_frequency`` times.

Step 3 is not redone from scratch after each merge: only the pieces that
held the merged pair change, so their old pairs leave the counts and their
new pairs come in (as ``data.bpe.learn_merges`` does), and a heap keeps the
most frequent pair on top. Ties: among pairs of equal count the one whose
left symbol was made first wins, then the one whose right symbol was made
first (the bytes come first, in byte order, then each merge's product in
the order learned), so the same sample always gives the same merges.

Pre-tokenizing uses GPT-2's pattern (``byte_level_bpe.GPT2_PATTERN``) when
the optional ``regex`` package is installed. Without it, STANDARD_PATTERN,
its translation into the standard library's ``re``: a letter is
``[^\\W\\d_]``, a number ``\\d``. Three differences follow: numbers other
than decimal digits (superscripts, fractions such as "½", Roman numerals)
join letters there, where GPT-2 counts them as numbers; ``re``'s
whitespace holds the separators U+001C..U+001F, which GPT-2's treats as
symbols; and ``regex``'s Unicode tables may be newer than Python's. The
pattern's name is kept with the merges, since a piece cut another way is
tokenized another way (though still decoded back exactly).

Applying (``ByteBPE``): the 256 bytes, then each merge's product, are the
vocabulary's tokens (after the four special tokens of ``data.vocab``); a
piece is encoded by ``byte_level_bpe.BPEModel`` (the merge loop of
pretrained tokenizers), and ids decode back to the exact text.
"""

import collections
import heapq
import re

from minitrans.core import checks
from minitrans.data.bpe import merged_word
from minitrans.data.byte_level_bpe import (BYTE_TO_CHAR, GPT2_PATTERN, BPEModel, compile_pattern,
                                           from_byte_level, lookup_tokens, regex, to_byte_level)
from minitrans.data.vocab import DataError, Vocab

STANDARD_PATTERN = (r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+"""
                    r"""|\s+(?!\S)|\s+""")
PATTERNS = ("gpt2", "standard")  # GPT2_PATTERN (needs regex), STANDARD_PATTERN (re)
SAMPLE_CHARACTERS = 2**21  # the most characters merges are learned from
SAMPLE_PIECES = 16  # a text longer than that is sampled in this many evenly spaced pieces
MAX_CACHE = 2**20  # pieces -> ids remembered while encoding (then the cache is emptied)


def default_pattern():
    """The name of the pattern used when none is given: GPT-2's if it can be."""
    return "gpt2" if regex is not None else "standard"


def pre_tokenizer(name):
    """The compiled pattern called ``name`` (one of PATTERNS)."""
    checks.check_choice("pattern", name, PATTERNS)
    if name == "gpt2" and regex is None:
        raise RuntimeError('pattern "gpt2": GPT-2\'s pre-tokenizer needs the regex package: '
                           'pip install "minitrans[pretrained]"')
    return compile_pattern(GPT2_PATTERN) if name == "gpt2" else re.compile(STANDARD_PATTERN)


# -------------------------------------------------------------- the sample


def sample_spans(total, limit=None, pieces=None):
    """(start, stop) character offsets of the sample of a text of ``total``
    characters: the whole text if it holds at most ``limit`` characters
    (SAMPLE_CHARACTERS by default), else ``pieces`` (SAMPLE_PIECES) evenly
    spaced stretches of ``limit // pieces`` characters, the first at the
    text's start."""
    limit = SAMPLE_CHARACTERS if limit is None else limit
    pieces = SAMPLE_PIECES if pieces is None else pieces
    if total <= limit:
        return [(0, total)]
    size = max(limit // pieces, 1)
    return [(start, start + size) for start in (j * total // pieces for j in range(pieces))]


def text_sample(chunks, spans):
    """The stretches of text at ``spans`` (from ``sample_spans``), taken
    from ``chunks`` (the text, in pieces of any size); reading stops at
    the end of the last span."""
    parts, offset = [[] for _ in spans], 0
    for chunk in chunks:
        end = offset + len(chunk)
        for part, (start, stop) in zip(parts, spans):
            if start < end and offset < stop:
                part.append(chunk[max(start - offset, 0):stop - offset])
        offset = end
        if offset >= spans[-1][1]:
            break
    return ["".join(part) for part in parts]


def describe_sample(spans, total):
    """Where the merges were learned, in words."""
    if spans == [(0, total)]:
        return f"merges learned from the whole text ({total:,} characters)"
    characters = sum(stop - start for start, stop in spans)
    return (f"merges learned from {len(spans)} evenly spaced pieces of the text, "
            f"{characters:,} characters in all")


# ---------------------------------------------------------------- learning


def piece_counts(texts, pattern):
    """How often each piece of ``texts`` (strings) occurs, cut by ``pattern``."""
    counts = collections.Counter()
    for text in texts:
        counts.update(pattern.findall(text))
    return counts


def learn_byte_merges(texts, num_merges, pattern=None, min_frequency=2):
    """Learn up to ``num_merges`` merges from ``texts`` (strings: a sample).

    Returns the merges in the order learned, a list of (left, right) pairs
    of byte-level tokens (UTF-8 bytes written as ``BYTE_TO_CHAR``
    characters); the token they make is ``left + right``. ``pattern``: the
    name of the pre-tokenizer (``default_pattern()`` when None)."""
    if num_merges is not None:
        checks.check_int("num_merges", num_merges, low=0)
    checks.check_positive_int("min_frequency", min_frequency)
    counts = piece_counts(texts, pre_tokenizer(pattern or default_pattern()))
    words = [list(piece.encode("utf-8")) for piece in counts]  # step 2: symbols are bytes
    freqs = list(counts.values())
    symbols = [BYTE_TO_CHAR[byte] for byte in range(256)]  # symbol number -> its token
    number = {token: i for i, token in enumerate(symbols)}

    pair_counts = collections.Counter()  # (left, right) symbol numbers -> count
    where = collections.defaultdict(set)  # pair -> the words that may hold it
    for i, word in enumerate(words):
        count_change(pair_counts, [], word, freqs[i])
        for pair in zip(word, word[1:]):
            where[pair].add(i)
    # An entry whose count is no longer its pair's is out of date, skipped when popped.
    heap = [heap_entry(pair, n) for pair, n in pair_counts.items()]
    heapq.heapify(heap)

    merges = []
    while heap and (num_merges is None or len(merges) < num_merges):
        entry = heapq.heappop(heap)
        pair, count = entry[-1], -entry[0]
        if count != pair_counts.get(pair):
            continue
        if count < min_frequency:
            break
        left, right = symbols[pair[0]], symbols[pair[1]]
        merges.append((left, right))
        # a product already made another way is the same token
        new = number.setdefault(left + right, len(symbols))
        if new == len(symbols):
            symbols.append(left + right)
        changed = collections.Counter()
        for i in where.pop(pair, ()):  # a word that no longer holds it comes out unchanged
            old, words[i] = words[i], merged_word(words[i], pair, new)
            count_change(changed, old, words[i], freqs[i])
            for other in zip(words[i], words[i][1:]):
                where[other].add(i)
        del pair_counts[pair]
        for other, delta in changed.items():
            if delta and other != pair:
                pair_counts[other] += delta
                heapq.heappush(heap, heap_entry(other, pair_counts[other]))
    return merges


def heap_entry(pair, count):
    """The heap's item for ``pair``: the smallest pops first, so the most
    frequent pair, and among equals the smaller symbol numbers."""
    return (-count, pair)


def count_change(counts, old, new, freq):
    """A word seen ``freq`` times changed from ``old`` to ``new`` symbols:
    its old pairs leave ``counts`` and its new pairs come in."""
    for pair in zip(old, old[1:]):
        counts[pair] -= freq
    for pair in zip(new, new[1:]):
        counts[pair] += freq


# ---------------------------------------------------------------- applying


def byte_tokens(merges):
    """The tokens of byte-level ``merges``: the 256 bytes in byte order, then
    each merge's product (one made twice once); a merge of a token not made
    before it is a DataError."""
    tokens = [BYTE_TO_CHAR[byte] for byte in range(256)]
    known = set(tokens)
    for i, (left, right) in enumerate(merges):
        if left not in known or right not in known:
            raise DataError(f"merges[{i}]: {left!r} + {right!r}: expected tokens made by "
                            "the bytes or the merges before it")
        if left + right not in known:
            tokens.append(left + right)
            known.add(left + right)
    return tokens


class ByteBPE:
    """Text <-> ids with learned byte-level merges: ``decode(encode(text))
    == text`` for every text.

    ``vocab``: the four special tokens, the 256 byte tokens in byte order,
    then each merge's product (one made twice is one token);
    ``model``: the ``BPEModel`` that merges a byte-level piece."""

    level = "bpe"  # the text task's level of this tokenizer (``data.text_corpus``)

    def __init__(self, merges, pattern=None):
        self.merges = [(left, right) for left, right in merges]
        self.pattern_name = pattern or default_pattern()
        self.pattern = pre_tokenizer(self.pattern_name)
        self.vocab = Vocab(byte_tokens(self.merges))
        ids = {token: i for i, token in enumerate(self.vocab.tokens)}
        table = {}
        for rank, (left, right) in enumerate(self.merges):  # a pair learned twice: its first
            table.setdefault((ids[left], ids[right]), (rank, ids[left + right]))
        self.model = BPEModel(ids, table)
        self.tokens = dict(enumerate(self.vocab.tokens))  # id -> token, for decoding
        self.cache = {}

    def encode(self, text):
        """The ids of ``text`` (a list of ints), piece by piece."""
        ids, cache = [], self.cache
        for piece in self.pattern.findall(text):
            found = cache.get(piece)
            if found is None:
                if len(cache) >= MAX_CACHE:
                    cache.clear()
                found = cache[piece] = self.model.tokenize(to_byte_level(piece))
            ids += found
        return ids

    def decode(self, ids):
        """The text of ``ids``; a special token shows as its name."""
        return from_byte_level(lookup_tokens(self.tokens, [int(i) for i in ids]))

    def to_records(self):
        """What a checkpoint keeps (JSON): the pattern's name and the merges."""
        return {"pattern": self.pattern_name, "merges": [list(pair) for pair in self.merges]}

    @classmethod
    def from_records(cls, records):
        """The ByteBPE that ``to_records`` described; a malformed record is a
        DataError naming the field."""
        if not isinstance(records, dict) or sorted(records) != ["merges", "pattern"]:
            raise DataError(f"byte-level BPE records: expected an object with 'pattern' and "
                            f"'merges', got {records!r:.80}")
        if records["pattern"] not in PATTERNS:
            raise DataError(f"byte-level BPE records: pattern: expected one of {list(PATTERNS)}, "
                            f"got {records['pattern']!r:.80}")
        merges = records["merges"]
        if not isinstance(merges, list) or not all(
                isinstance(pair, list) and len(pair) == 2
                and all(isinstance(token, str) for token in pair) for pair in merges):
            raise DataError(f"byte-level BPE records: merges: expected a list of pairs of "
                            f"tokens, got {merges!r:.80}")
        return cls(merges, records["pattern"])

"""Byte-pair encoding: sub-word units learned from a corpus (Sennrich, Haddow
and Birch, 2016, "Neural Machine Translation of Rare Words with Subword
Units"; the paper's §5.1 uses it, with merges shared by both languages).

Learning (``learn_merges``):

    1. split the text on whitespace into words and count them;
    2. write each word as a sequence of symbols, its characters, the last one
       carrying the end-of-word marker: "low" -> l o w</w>;
    3. count every pair of adjacent symbols, each word weighted by its count;
    4. merge the most frequent pair into one new symbol everywhere, record it;
    5. repeat 3-4 ``num_merges`` times, or until the best pair is seen fewer
       than ``min_frequency`` times.

Applying (``BPE.encode``): split each word into characters as in step 2 and
apply the recorded merges, the earliest learned first, until none applies.
A worked example, the corpus "low low lower":

    words       {l o w</w>: 2, l o w e r</w>: 1}
    merge 1     (l, o)     count 3  ->  lo w</w> (2),  lo w e r</w> (1)
    merge 2     (lo, w</w>) count 2 ->  low</w> (2),   lo w e r</w> (1)
    encode("lowest")  ->  lo w e s t</w>   (no merge learned makes "we" or "st")

Among pairs of equal count the one that sorts last (comparing the left symbol,
then the right, as Python compares strings) is merged first, as the authors'
reference implementation ``subword-nmt learn-bpe`` does, so that both learn
the same merges from the same text. (Two differences at the edges: words are
split on any whitespace, where subword-nmt splits on spaces alone, and a corpus
with no pairs gives no merges, where it fails.) Characters never seen in
training stay single-character tokens, so every text can be encoded and
decoded back.
"""

import collections
import collections.abc
import heapq
import json

from minitrans.core import checks
from minitrans.data.vocab import DataError

END = "</w>"  # the end-of-word marker, carried by the last symbol of every word
# The most merges a run may learn: the paper learns 37,000, and a checkpoint's
# record of this many is still small to check. The train command, TrainConfig
# and the checkpoint's checks use this one number, so a run never writes
# merges that its own checkpoint would refuse.
MAX_MERGES = 2**20


# ------------------------------------------------------------------ learning


def learn_merges(corpus, num_merges, min_frequency=2):
    """Learn up to ``num_merges`` merges from ``corpus``.

    Inputs:
    - corpus: lines of text (any iterable of strings), or a mapping from
      word to count (a ``collections.Counter`` of words)
    - num_merges: the most merges to learn, an integer >= 0
    - min_frequency: stop when the most frequent pair is seen fewer times

    Returns: the merges in the order learned, a list of (left, right) pairs
    of symbols; the symbol they make is ``left + right``.
    """
    checks.check_int("num_merges", num_merges, low=0)
    checks.check_positive_int("min_frequency", min_frequency)
    counts = _word_counts(corpus)
    words = [list(word[:-1]) + [word[-1] + END] for word in counts]  # step 2
    freqs = list(counts.values())

    pair_counts = collections.Counter()  # pair -> its count in the corpus
    where = collections.defaultdict(set)  # pair -> indices of the words that hold it
    for i, word in enumerate(words):
        for pair in zip(word, word[1:]):
            pair_counts[pair] += freqs[i]
            where[pair].add(i)
    # heapq pops the smallest item: (-count, sort key) pops the most frequent
    # pair, and among equals the one that sorts last. An item whose count is no
    # longer the pair's count is out of date and skipped when popped.
    heap = [(-n, _last_first(pair), pair) for pair, n in pair_counts.items()]
    heapq.heapify(heap)

    merges = []
    while heap and len(merges) < num_merges:
        negative_count, _, pair = heapq.heappop(heap)
        if -negative_count != pair_counts[pair]:
            continue
        if -negative_count < min_frequency:
            break
        merges.append(pair)
        changed = collections.Counter()
        for i in where.pop(pair):  # a word that no longer holds it comes out unchanged
            old, words[i] = words[i], _merge(words[i], pair)
            for a in zip(old, old[1:]):  # the word's pairs leave the counts ...
                changed[a] -= freqs[i]
            for a in zip(words[i], words[i][1:]):  # ... and its new pairs come in
                changed[a] += freqs[i]
                where[a].add(i)
        for a, delta in changed.items():
            if delta:
                pair_counts[a] += delta
                heapq.heappush(heap, (-pair_counts[a], _last_first(a), a))
        del pair_counts[pair]
    return merges


def _word_counts(corpus):
    """Lines or a word -> count mapping -> a dict of word counts (checked)."""
    if isinstance(corpus, str):
        raise DataError("corpus: expected lines of text or a word -> count mapping, "
                        "got a single string (wrap it in a list)")
    if isinstance(corpus, collections.abc.Mapping):
        for word, count in corpus.items():
            if not isinstance(word, str) or word.split() != [word]:
                raise DataError(f"corpus: expected words without whitespace, got {word!r}")
            checks.check_positive_int(f"corpus[{word!r}]", count)
        return dict(corpus)
    counts = collections.Counter()
    for number, line in enumerate(corpus, start=1):
        if not isinstance(line, str):
            raise DataError(f"corpus: line {number} is not a string: {line!r}")
        counts.update(line.split())
    return dict(counts)


def merged_word(symbols, pair, new):
    """Every occurrence of ``pair`` in ``symbols`` (a list) replaced by the
    one symbol ``new``, left to right, so that x x x with (x, x) gives xx x.
    Here ``new`` is the pair's two strings joined; byte-level learning
    (``data.byte_bpe_learning``) numbers its symbols and passes the number."""
    left, right = pair
    merged, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == left and symbols[i + 1] == right:
            merged.append(new)
            i += 2
        else:
            merged.append(symbols[i])
            i += 1
    return merged


def _merge(symbols, pair):
    """``merged_word`` of a pair of strings, into their concatenation."""
    return merged_word(symbols, pair, pair[0] + pair[1])


def _last_first(pair):
    """A sort key that puts pairs in reverse string order: each symbol's code
    points negated, closed by 1 (above any of them) so that "ab" comes after
    "abc", the reverse of the usual order, in which a prefix comes first."""
    return tuple(-ord(c) for c in pair[0]) + (1,) + tuple(-ord(c) for c in pair[1]) + (1,)


# ------------------------------------------------------------------ applying


class BPE:
    """A learned byte-pair encoding: text <-> sub-word tokens.

    Tokens are the symbols of the words; the last token of each word ends with
    "</w>" and the others do not, which is what ``decode`` reads to put the
    spaces back: ``encode("lower low")`` may give ["low", "er</w>", "low</w>"].
    Whitespace is normalised as ``str.split`` does (runs of spaces, tabs and
    newlines become one space, none at either end), so
    ``decode(encode(text)) == " ".join(text.split())`` for every text.

    ``split``/``join`` are ``encode``/``decode`` under the names of
    ``Tokenizer``'s, so a ``BPE`` can stand where a tokenizer is expected.
    """

    def __init__(self, merges):
        self.merges = [tuple(pair) for pair in merges]
        for i, pair in enumerate(self.merges):
            _check_merge(f"merges[{i}]", pair)
        # A pair learned twice (possible once a symbol can be made two ways)
        # keeps its first, highest priority.
        self._rank = {}
        for rank, pair in enumerate(self.merges):
            self._rank.setdefault(pair, rank)
        self._cache = {}

    @classmethod
    def learn(cls, corpus, num_merges, min_frequency=2):
        """``BPE(learn_merges(...))``: see ``learn_merges``."""
        return cls(learn_merges(corpus, num_merges, min_frequency))

    def __eq__(self, other):
        return isinstance(other, BPE) and self.merges == other.merges

    def encode(self, text):
        """Text -> sub-word tokens, word by word."""
        return [token for word in text.split() for token in self.encode_word(word)]

    def encode_word(self, word):
        """One word (no whitespace) -> its tokens, the last ending in "</w>"."""
        if word not in self._cache:
            self._cache[word] = self._segment(word)
        return list(self._cache[word])

    def _segment(self, word):
        symbols = list(word[:-1]) + [word[-1] + END]
        if END in word:
            # The word holds the marker itself: a merged symbol inside it could
            # end in "</w>" and read as a word's end, so it stays characters.
            return tuple(symbols)
        while len(symbols) > 1:
            ranked = [self._rank[p] for p in zip(symbols, symbols[1:]) if p in self._rank]
            if not ranked:
                break
            symbols = _merge(symbols, self.merges[min(ranked)])  # the earliest learned
        return tuple(symbols)

    def decode(self, tokens):
        """Sub-word tokens -> text: a token ending in "</w>" ends a word.

        Trailing tokens with no word end (a model's output cut off mid-word)
        are kept as a last word, so nothing the model wrote is lost.
        """
        words, current = [], []
        for i, token in enumerate(tokens):
            if not isinstance(token, str) or not token:
                raise DataError(f"tokens[{i}]: expected a non-empty string, got {token!r}")
            if token.endswith(END):
                words.append("".join(current) + token[: -len(END)])
                current = []
            else:
                current.append(token)
        if current:
            words.append("".join(current))
        return " ".join(words)

    split, join = encode, decode

    def to_json(self):
        """The merges as a JSON string, to store inside a checkpoint."""
        return json.dumps({"kind": "bpe", "end_of_word": END, "merges": self.merges})

    @classmethod
    def from_json(cls, text):
        """The inverse of ``to_json``; a malformed record raises ``DataError``
        naming the field."""
        try:
            stored = json.loads(text)
        except (TypeError, ValueError) as error:
            raise DataError(f"BPE JSON: not valid JSON ({error})") from None
        if not isinstance(stored, dict):
            raise DataError(f"BPE JSON: expected an object, got {type(stored).__name__}")
        extra = sorted(set(stored) - {"kind", "end_of_word", "merges"})
        if extra:
            raise DataError(f"BPE JSON: unexpected fields {extra}")
        for field, expected in (("kind", "bpe"), ("end_of_word", END)):
            if stored.get(field) != expected:
                raise DataError(
                    f"BPE JSON: {field}: expected {expected!r}, got {stored.get(field)!r}"
                )
        merges = stored.get("merges")
        if not isinstance(merges, list):
            raise DataError(f"BPE JSON: merges: expected a list, got {merges!r:.80}")
        for i, pair in enumerate(merges):
            if not isinstance(pair, list) or len(pair) != 2:
                raise DataError(f"BPE JSON: merges[{i}]: expected a list of two symbols, "
                                f"got {pair!r:.80}")
            _check_merge(f"BPE JSON: merges[{i}]", pair)
        return cls(merges)


def _check_merge(name, pair):
    """A merge is two non-empty symbols without whitespace (words are split on
    it, so a symbol holding some could never be matched)."""
    if len(pair) != 2:
        raise DataError(f"{name}: expected a pair of symbols, got {pair!r:.80}")
    for symbol in pair:
        if not isinstance(symbol, str) or symbol.split() != [symbol]:
            raise DataError(f"{name}: expected non-empty symbols without whitespace, "
                            f"got {symbol!r:.80}")

"""Byte-level BPE, as GPT-2 and Llama 3 apply it: the byte table, GPT-2's
pre-tokenization pattern and the merge loop that every pretrained BPE here
shares (learning merges is in ``minitrans.data.bpe``; these come from files).

1. Pre-tokenize: cut the text into pieces with a regular expression, so that
   no token spans two words (a word keeps the one space before it). GPT-2's
   pattern takes contractions ('s 't 're 've 'm 'll 'd), a letter run with
   one optional space before it, the same for a number run and for a run of
   other symbols, and whitespace (a run of spaces stops before the last one,
   which goes with the next word).
2. Bytes to characters: each piece's UTF-8 bytes become printable characters
   through ``BYTE_TO_CHAR`` (the 188 printable Latin-1 bytes stand for
   themselves, the other 68 are moved to U+0100 and on: a space is "Ġ", a
   newline "Ċ"), so every text is made of 256 symbols and nothing is unknown.
3. Merge: start from the characters of the piece and repeatedly join the
   adjacent pair with the lowest rank (its line in the merges file), the
   leftmost on a tie, until no adjacent pair has a rank. Each symbol left is
   a token of the vocabulary.

A worked example, with the merges ("Ġ", "l") rank 0, ("o", "w") rank 1,
("Ġl", "ow") rank 2:

    " lower!"   -> pieces " lower", "!"
    " lower"    -> characters Ġ l o w e r
    rank 0      -> Ġl o w e r
    rank 1      -> Ġl ow e r
    rank 2      -> Ġlow e r          (no pair left with a rank)

Decoding reverses step 2: the tokens' characters back to bytes, the bytes
read as UTF-8 (a sequence cut in the middle of a character shows U+FFFD).
"""

import heapq

from minitrans.files.rules import short

try:  # the pretrained extra: pip install "minitrans[pretrained]"
    import regex
except ImportError:  # pragma: no cover - depends on what is installed
    regex = None

# GPT-2's pattern (its encoder.py). \p{L} and \p{N} are Unicode letters and
# numbers, which the standard library's re cannot name; the regex package can.
# Its Unicode tables may be newer than those of the tokenizers library (its
# Oniguruma): a letter assigned since then is \p{L} here and not there.
GPT2_PATTERN = (r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+"""
                r"""|\s+(?!\S)|\s+""")
PATTERN_ERRORS = (regex.error,) if regex is not None else ()  # a pattern that will not compile
MAX_CACHE = 2**16  # pieces remembered per tokenizer (then the cache is emptied)
# A pattern read from a file may backtrack without bound: (a|aa)+$ tries
# exponentially many ways to match before it fails, years for 40 a's and a
# b. The regex package stops a match after a time given; real patterns cut
# text at several MB a second, so a second and 10 us a character is far
# above any honest pattern's time and far below a hang.
MATCH_SECONDS = 1.0
MATCH_SECONDS_PER_CHARACTER = 1e-5


def compile_pattern(pattern):
    """A compiled pattern of the regex package (with \\p{...} classes)."""
    if regex is None:
        raise RuntimeError('pretrained tokenizers need the regex package: '
                           'pip install "minitrans[pretrained]"')
    return regex.compile(pattern)


def match_seconds(text):
    """The seconds a pattern from a file may take on ``text``."""
    return MATCH_SECONDS + MATCH_SECONDS_PER_CHARACTER * len(text)


def split_on(compiled, text, keep_matches=True, timeout=None):
    """``text`` cut at the matches of ``compiled``: the stretches between
    matches, and the matches themselves when ``keep_matches`` (else None
    in their place). ``timeout``: seconds for all the matching, after which
    the regex package raises TimeoutError."""
    pieces, end = [], 0
    for match in compiled.finditer(text, timeout=timeout):
        pieces += [text[end:match.start()], match.group() if keep_matches else None]
        end = match.end()
    return pieces + [text[end:]]


def _byte_table():
    """byte -> character: printable bytes stand for themselves, the others
    take the next unused code points from 256 on, in order (GPT-2's table)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    table, moved = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(256 + moved)
            moved += 1
    return table


BYTE_TO_CHAR = _byte_table()
CHAR_TO_BYTE = {char: byte for byte, char in BYTE_TO_CHAR.items()}
# str.translate does step 2 in C: the bytes read as Latin-1 are code points 0-255
_TO_BYTE_LEVEL = str.maketrans({chr(byte): char for byte, char in BYTE_TO_CHAR.items()})


def to_byte_level(text):
    """Step 2: ``text``'s UTF-8 bytes as characters of the byte table."""
    return text.encode("utf-8").decode("latin-1").translate(_TO_BYTE_LEVEL)


def from_byte_level(tokens):
    """Decoding: the tokens' characters back to bytes, read as UTF-8.

    A token with a character outside the table (an added token such as
    "<|a b|>", which was never byte-mapped) gives its own UTF-8 bytes, as
    the ``tokenizers`` library's ByteLevel decoder does."""
    data = bytearray()
    for token in tokens:
        if all(char in CHAR_TO_BYTE for char in token):
            data.extend(CHAR_TO_BYTE[char] for char in token)
        else:
            data.extend(token.encode("utf-8"))
    return data.decode("utf-8", errors="replace")


def lookup_tokens(tokens, ids):
    """The tokens (id -> token) of ``ids``; an unknown id is a ValueError
    naming it (the ``tokenizers`` library drops it silently)."""
    found = []
    for token_id in ids:
        try:
            found.append(tokens[token_id])
        except (KeyError, TypeError):  # TypeError: an unhashable "id", a list
            raise ValueError(f"ids: {short(token_id)} is not the id of a token of this "
                             "tokenizer") from None
    return found


def merge_table(source, field, vocab, merges):
    """(left id, right id) -> (rank, id of the merged token), from
    ``merges``, a list of (label, left, right): label names the merge in an
    error (a line of merges.txt, an entry of model.merges). Both tokens and
    their join must be in ``vocab``. A pair listed twice keeps its last
    rank, as the ``tokenizers`` library's table (a hash map) does."""
    table = {}
    for rank, (label, left, right) in enumerate(merges):
        for token in (left, right, left + right):
            if token not in vocab:
                source.fail(label, f"{short(left)} + {short(right)}: {short(token)} is not "
                                   f"in {field}")
        table[vocab[left], vocab[right]] = (rank, vocab[left + right])
    return table


class BPEModel:
    """Step 3 for one piece, with the options of the Llama family's files.

    - byte_fallback: a character not in the vocabulary becomes its UTF-8
      bytes as tokens "<0xNN>" (SentencePiece's way to avoid unknowns);
    - unk_token: else it becomes this token (consecutive ones fused into
      one with fuse_unk); with neither, it is dropped, as the library does;
    - ignore_merges: a piece that is itself a token is taken whole.
    """

    def __init__(self, vocab, merges, unk_token=None, byte_fallback=False, fuse_unk=False,
                 ignore_merges=False):
        self.vocab = vocab
        self.merges = merges
        self.unk_id = vocab[unk_token] if unk_token is not None else None
        self.byte_fallback = byte_fallback
        self.fuse_unk = fuse_unk
        self.ignore_merges = ignore_merges
        self._cache = {}

    def tokenize(self, piece):
        """The token ids of one pre-tokenized piece."""
        if not piece:
            return []
        if self.ignore_merges and piece in self.vocab:
            return [self.vocab[piece]]
        ids = self._cache.get(piece)
        if ids is None:
            if len(self._cache) >= MAX_CACHE:
                self._cache.clear()
            ids = self._cache[piece] = merge(self.initial_symbols(piece), self.merges)
        return list(ids)

    def initial_symbols(self, piece):
        """The ids of the piece's characters before any merge."""
        ids, waiting = [], False  # waiting: an unknown token not yet written
        for char in piece:
            if char in self.vocab:
                ids += [self.unk_id, self.vocab[char]] if waiting else [self.vocab[char]]
                waiting = False
            elif self.byte_fallback and all(t in self.vocab for t in _byte_tokens(char)):
                # The library writes these bytes before an unknown token still
                # waiting (it writes that one on the next known character).
                ids += [self.vocab[t] for t in _byte_tokens(char)]
            elif self.unk_id is not None:
                if waiting and not self.fuse_unk:
                    ids.append(self.unk_id)
                waiting = True
        return ids + [self.unk_id] if waiting else ids


def _byte_tokens(char):
    return [f"<0x{byte:02X}>" for byte in char.encode("utf-8")]


def merge(ids, merges):
    """Apply ``merges`` ((left, right) -> (rank, new id)) to a list of ids.

    A min-heap of (rank, position) holds every adjacent pair that has a
    rank; the lowest is merged and the pairs it forms with its neighbours are
    pushed. An entry is stale when its left symbol was merged away or its
    pair no longer makes the same token. This is the ``tokenizers`` library's
    loop (not GPT-2's "merge every copy of the best pair at once", which
    differs when a merge makes a pair of lower rank)."""
    symbols = list(ids)
    after = list(range(1, len(ids))) + [-1]  # a linked list of the symbols left
    before = list(range(-1, len(ids) - 1))
    alive = [True] * len(ids)
    heap = [(merges[pair][0], i, merges[pair][1])
            for i, pair in enumerate(zip(ids, ids[1:])) if pair in merges]
    heapq.heapify(heap)
    while heap:
        _rank, left, new_id = heapq.heappop(heap)
        right = after[left]
        if not alive[left] or right == -1:
            continue
        found = merges.get((symbols[left], symbols[right]))
        if found is None or found[1] != new_id:
            continue
        symbols[left], alive[right], after[left] = new_id, False, after[right]
        if after[left] != -1:
            before[after[left]] = left
        _push(heap, merges, before[left], symbols, left)
        _push(heap, merges, left, symbols, after[left])
    return [symbol for symbol, kept in zip(symbols, alive) if kept]


def _push(heap, merges, left, symbols, right):
    """Push the pair (left, right) of positions when both exist and it has a rank."""
    if left != -1 and right != -1:
        found = merges.get((symbols[left], symbols[right]))
        if found is not None:
            heapq.heappush(heap, (found[0], left, found[1]))

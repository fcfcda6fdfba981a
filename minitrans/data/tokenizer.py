"""Tokenisers: text -> tokens and back, at the level of characters, words or
sub-words.

    text --Tokenizer.split--> tokens --Vocab.encode--> ids

``"char"``: every character is a token (digits, arithmetic);
``"word"``: tokens are separated by whitespace (the toy translation);
``"bpe"``: sub-word units learned from the corpus by byte-pair encoding, as
the paper does (§5.1, one set of merges shared by both languages): frequent
words become one token, rare ones a few pieces, and no word is ever unknown
unless it holds a character never seen in training.
"""

import collections
import dataclasses

from minitrans.core import checks
from minitrans.data.bpe import BPE, END
from minitrans.data.vocab import DataError

LEVELS = ("bpe", "char", "word")


@dataclasses.dataclass(frozen=True)
class Tokenizer:
    """Splits text into tokens and joins them back.

    ``Tokenizer("char")``, ``Tokenizer("word")``, or ``Tokenizer("bpe",
    bpe=BPE(merges))`` (see ``learn_subwords``). At every level
    ``join(split(text))`` is the text with its runs of whitespace made
    single spaces (at char level, the text itself).
    """

    level: str
    bpe: BPE = dataclasses.field(default=None, hash=False)  # the merges, at level "bpe" only
    LEVELS = LEVELS

    def __post_init__(self):
        checks.check_choice("level", self.level, LEVELS)
        if (self.level == "bpe") != isinstance(self.bpe, BPE):
            wanted = "a BPE of learned merges" if self.level == "bpe" else "None"
            raise DataError(f"bpe: expected {wanted} at level {self.level!r}, got {self.bpe!r:.80}")

    def split(self, text):
        if self.level == "bpe":
            return self.bpe.encode(text)
        return list(text) if self.level == "char" else text.split()

    def join(self, tokens):
        if self.level == "bpe":
            return self.bpe.decode(tokens)
        return "".join(tokens) if self.level == "char" else " ".join(tokens)

    def symbols(self):
        """Every token the merges can make (their products), none at char
        and word level: a vocabulary holding them never meets a sub-word of a
        known word that it lacks."""
        if self.level != "bpe":
            return []
        return list(dict.fromkeys(left + right for left, right in self.bpe.merges))


def learn_subwords(texts, num_merges, min_frequency=2):
    """A "bpe" Tokenizer whose merges are learned from ``texts`` (lines):
    at most ``num_merges``, each of a pair seen at least ``min_frequency``
    times.

    Words that hold a digit are left out of learning, so that no merge joins
    digits and numbers are written digit by digit (as LLaMA's tokenizer
    does): a model then converts numbers digit by digit instead of learning
    a token for every chunk of digits, most of them seen a few times only.
    """
    checks.check_int("num_merges", num_merges, low=0)
    counts = collections.Counter(word for text in texts for word in text.split())
    words = {word: n for word, n in counts.items() if not any(c.isdigit() for c in word)}
    return Tokenizer("bpe", BPE.learn(words, num_merges, min_frequency))


def characters(tokens):
    """The characters of sub-word tokens, both with and without the
    end-of-word marker: added to a vocabulary, they let every word made of
    characters seen in training be encoded without <unk>, wherever in a word
    its characters fall."""
    seen = dict.fromkeys(c for token in tokens for c in token.removesuffix(END))
    return [c + end for c in seen for end in ("", END)]

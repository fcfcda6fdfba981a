"""Vocabulary: tokens -> ids and back (the tokenisers are in ``data.tokenizer``).

    text --Tokenizer.split--> tokens --Vocab.encode--> ids

Everything here runs on the host, in plain Python. Every problem with the
data raises ``DataError`` (a ``ValueError``), naming the file and line where
there is one.
"""

import collections
import json

from minitrans.core import checks

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
        checks.check_positive_int("min_freq", min_freq)
        counts = collections.Counter(token for tokens in token_lists for token in tokens)
        kept = [t for t, n in counts.items() if n >= min_freq and t not in SPECIAL_TOKENS]
        return cls(sorted(kept, key=lambda token: (-counts[token], token)))

    def __len__(self):
        return len(self.tokens)

    def __contains__(self, token):
        return token in self._ids

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
        for i in ids:
            if not checks.is_int(i):  # int(4.9) would read token 4 without a word
                raise DataError(f"ids: expected integer token ids, got {i!r}")
            if not 0 <= i < len(self.tokens):
                raise DataError(f"ids: {i} is outside the vocabulary of {len(self.tokens)} tokens")
            if strip_special and i == EOS_ID:
                break
            if not (strip_special and i in (PAD_ID, BOS_ID)):
                tokens.append(self.tokens[i])
        return tokens

    def to_json(self):
        """The vocabulary as a JSON string, to store inside a checkpoint."""
        return json.dumps(
            {"specials": list(SPECIAL_TOKENS), "tokens": self.tokens[len(SPECIAL_TOKENS) :]}
        )

    @classmethod
    def from_json(cls, text):
        """The inverse of ``to_json``."""
        try:
            stored = json.loads(text)
            specials, tokens = stored["specials"], stored["tokens"]
        except (TypeError, ValueError, KeyError) as error:
            raise DataError(
                f"vocabulary JSON: expected an object with 'specials' and 'tokens' ({error})"
            ) from None
        if specials != list(SPECIAL_TOKENS):  # saved by a version with other special tokens
            raise DataError(
                f"vocabulary JSON: special tokens {specials} differ from {list(SPECIAL_TOKENS)}"
            )
        return cls(tokens)

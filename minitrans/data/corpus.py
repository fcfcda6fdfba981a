"""A user's parallel corpus made fit to train on: pairs too long to train on
are skipped, and the share of held-out tokens the vocabulary lacks is
measured, since a token that is <unk> can never be predicted.

A TSV file can hold a line of a megabyte; taken as it is, it would make
learning merges slow and the model's positional table (``max_len``) as long
as the line, so such pairs are skipped twice: by characters before merges are
learned, by tokens once the text is tokenised. Each side of a pair is split
into tokens once (``read_corpus``): the same tokens decide which pairs are
kept, build the vocabulary and size the model.
"""

import pathlib
from typing import NamedTuple

from minitrans.core import backend, checks
from minitrans.data.bpe import MAX_MERGES
from minitrans.data.tokenizer import Tokenizer, characters, learn_subwords
from minitrans.files.tsv import read_tsv
from minitrans.data.vocab import UNK_ID, DataError

MAX_CHARACTERS = 1000  # a side's characters, checked before anything is learned
MAX_TOKENS = 256  # a side's tokens: the model's max_len follows the longest pair kept
# Above this share of unknown held-out tokens a warning is printed: with 1 token
# in 100 unknown, a 20-token sentence holds one in about 18% of cases, and every
# such sentence is wrong, however well the model learns.
UNKNOWN_WARNING = 0.01
# Merges chosen from the corpus (``merges=None``): a pair of symbols is merged
# while it occurs at least once in every MERGE_SHARE_PAIRS training pairs. A
# token rarer than that has too few examples to learn an embedding from, and a
# word cut into more frequent pieces is learned from the pieces' examples; the
# number of merges then grows with what the corpus repeats, not with a guess.
MERGE_SHARE_PAIRS = 100


class Corpus(NamedTuple):
    """A TSV corpus read, split, tokenised and measured (``read_corpus``)."""

    tokenizer: Tokenizer
    train: list  # (source, target) text pairs
    valid: list
    train_tokens: list  # (source tokens, target tokens) of each pair of train
    valid_tokens: list  # the same of valid
    description: str


def read_corpus(
    train_path, valid_path=None, level="bpe", merges=None, valid_fraction=0.1, seed=0, bpe=None
):
    """A Corpus: the pairs of a TSV corpus, and their tokens, each side
    split once.

    1. Pairs with a side longer than MAX_CHARACTERS characters are skipped.
    2. Without ``valid_path``, a seeded random ``valid_fraction`` of the pairs
       is held out (at least one, and at least one is left to train on);
       training pairs that repeat a held-out source are dropped too.
    3. At level "bpe", ``merges`` merges are learned from the training pairs,
       both sides together as the paper shares them (``learn_subwords``),
       unless ``bpe`` gives them (a resumed run's); ``merges=None``: every
       merge of a pair seen at least ``merge_floor`` times.
    4. Each side is split into tokens, and pairs with a side longer than
       MAX_TOKENS tokens are skipped.
    The description says how many pairs were held out and skipped; a corpus
    with nothing left to train on is refused with a DataError.
    """
    checks.check_number(
        "valid_fraction", valid_fraction, low=0, high=1, low_open=True, high_open=True
    )
    checks.check_choice("level", level, Tokenizer.LEVELS)
    checks.check_int("merges", merges, low=0, allow_none=True)
    pairs, skipped = too_long(read_tsv(train_path), len, MAX_CHARACTERS)
    description = f"translation pairs from {pathlib.Path(train_path).name} ({level} level)"
    if valid_path is not None:
        valid, skipped_valid = too_long(read_tsv(valid_path), len, MAX_CHARACTERS)
        train, skipped = pairs, skipped + skipped_valid
        description += f", validation pairs from {pathlib.Path(valid_path).name}"
    else:
        _nothing_left(train_path, pairs, f"{MAX_CHARACTERS} characters")
        train, valid = hold_out(train_path, pairs, valid_fraction, seed)
        description += f"; held out {len(valid)} of {len(pairs)} pairs for validation"
        if len(train) + len(valid) < len(pairs):
            description += f" (and dropped {len(pairs) - len(train) - len(valid)} repeats of them)"
    _nothing_left(train_path, train, f"{MAX_CHARACTERS} characters")
    _nothing_left(valid_path, valid, f"{MAX_CHARACTERS} characters")
    tokenizer = _tokenizer(train, level, merges, bpe)
    if skipped:
        description += skipped_note(skipped, MAX_CHARACTERS, "characters")
    train, train_tokens, skipped = tokenised(tokenizer, train, MAX_TOKENS)
    valid, valid_tokens, skipped_valid = tokenised(tokenizer, valid, MAX_TOKENS)
    if skipped + skipped_valid:
        description += skipped_note(skipped + skipped_valid, MAX_TOKENS, "tokens")
    _nothing_left(train_path, train, f"{MAX_TOKENS} tokens")
    _nothing_left(valid_path or train_path, valid, f"{MAX_TOKENS} tokens")
    return Corpus(tokenizer, train, valid, train_tokens, valid_tokens, description)


def _tokenizer(train, level, merges, bpe):
    """The Tokenizer of ``level``: at level "bpe" with the merges of ``bpe``
    where given, else with merges learned from the ``train`` pairs."""
    if level != "bpe":
        return Tokenizer(level)
    if bpe is not None:
        return Tokenizer("bpe", bpe)
    texts = [text for pair in train for text in pair]
    if merges is None:
        return learn_subwords(texts, MAX_MERGES, merge_floor(len(train)))
    return learn_subwords(texts, merges)


def merge_floor(pairs):
    """How often a pair of symbols must occur to be merged, in a corpus of
    ``pairs`` training pairs: once in every MERGE_SHARE_PAIRS, and at least
    twice (a pair seen once is no pattern)."""
    return max(2, -(-pairs // MERGE_SHARE_PAIRS))


def _nothing_left(path, pairs, limit):
    if not pairs:
        raise DataError(
            f"{path}: every pair has a side longer than {limit}; " "nothing is left to train on"
        )


def hold_out(path, pairs, fraction, seed):
    """Split pairs into (train, valid) with a seeded shuffle of their indices."""
    if len(pairs) < 2:
        raise DataError(
            f"{path}: too small to hold out validation data (only {len(pairs)} pair); "
            "give more pairs or a separate validation file"
        )
    count = min(max(1, round(fraction * len(pairs))), len(pairs) - 1)
    held = set(backend.host_rng(seed).permutation(len(pairs))[:count].tolist())
    valid = [pair for i, pair in enumerate(pairs) if i in held]
    valid_sources = {src for src, _ in valid}
    train = [pair for i, pair in enumerate(pairs) if i not in held and pair[0] not in valid_sources]
    if not train:
        raise DataError(
            f"{path}: every pair repeats a held-out source; nothing is left to train on"
        )
    return train, valid


def vocabulary_extras(tokenizer, train_tokens):
    """The tokens a vocabulary over ``train_tokens`` ((source tokens, target
    tokens) pairs) also needs, beyond those they hold: at level "bpe", every
    merge's product and every character seen, with and without the
    end-of-word marker, so that a new word made of seen characters is never
    <unk>, however its pieces fall; none at char or word level."""
    if tokenizer.level != "bpe":
        return []
    seen = {token for src, tgt in train_tokens for token in src + tgt}
    return tokenizer.symbols() + characters(seen)


def too_long(pairs, length, limit):
    """(the pairs whose sides both have ``length(side)`` <= ``limit``, the
    number skipped)."""
    kept = [pair for pair in pairs if max(length(pair[0]), length(pair[1])) <= limit]
    return kept, len(pairs) - len(kept)


def tokenised(tokenizer, pairs, limit):
    """(the pairs whose sides both have at most ``limit`` tokens, their
    (source tokens, target tokens), the number skipped); each side is split
    once."""
    kept, tokens = [], []
    for pair in pairs:
        sides = (tokenizer.split(pair[0]), tokenizer.split(pair[1]))
        if max(len(sides[0]), len(sides[1])) <= limit:
            kept.append(pair)
            tokens.append(sides)
    return kept, tokens, len(pairs) - len(kept)


def skipped_note(count, limit, unit):
    """The words a task's description gives to pairs skipped for length."""
    return f"; skipped {count} pair{'s' * (count != 1)} longer than {limit} {unit} a side"


def unknown_shares(task, pairs=None):
    """The share of tokens that the vocabulary maps to <unk>, on each side
    of ``pairs`` (default: the task's held-out pairs).

    Returns: {"source": float, "target": float}, each 0 where there are no
    tokens.
    """
    pairs = task.valid if pairs is None else pairs
    unknown, total = [0, 0], [0, 0]
    for pair in pairs:
        for side, ids in enumerate(task.encode_pair(*pair)):
            unknown[side] += sum(i == UNK_ID for i in ids)
            total[side] += len(ids)
    return {side: unknown[i] / max(total[i], 1) for i, side in enumerate(("source", "target"))}


def coverage_report(task, threshold=UNKNOWN_WARNING):
    """(one line giving the unknown share of each held-out side, the warnings
    for the sides above ``threshold``, each one line naming the level and
    what to try instead)."""
    shares = unknown_shares(task)
    level = task.tokenizer.level
    line = (
        f"unknown held-out tokens at {level} level: source {shares['source']:.1%}, "
        f"target {shares['target']:.1%} (they become <unk> and can never be predicted)"
    )
    if level == "word":
        advice = "try --level bpe (sub-words: unseen words are made of known pieces)"
    else:
        advice = "they are characters never seen in training; add training pairs that hold them"
    warnings = [
        f"{share:.1%} of the held-out {side} tokens are unknown at {level} level; {advice}"
        for side, share in shares.items()
        if share > threshold
    ]
    return line, warnings


def unknown_pieces(task, text):
    """The pieces of ``text`` the model's vocabulary lacks, as the user wrote
    them (words at word level, characters at char and bpe level), each once,
    in order."""
    tokens = task.tokenizer.split(text)
    missing = [token for token, i in zip(tokens, task.vocab.encode(tokens)) if i == UNK_ID]
    return list(dict.fromkeys(task.tokenizer.join([token]) for token in missing))

"""Toy tasks to train on, and parallel corpora from TSV files.

A ``Task`` bundles what training and evaluation need: the (source, target)
text pairs, split into train and valid, the tokenizer and one vocabulary for
both sides (so the embeddings can be tied, paper §3.4), and ``make_batch``.

    task = load_task("reverse", seed=0)
    batch = task.make_batch(task.train[:32])      # a Batch on the device

The built-in tasks, generated here deterministically from a seed:

    copy       ten random digits in, the same ten out
    reverse    ten random digits in, reversed out
    translate  toy English into a made-up language with different word order
    lm         two-digit sums "12+34=" -> "46" for a decoder-only model
    numbers    digits to number words in three languages (data.language_tasks)
    dates      dates written out in five languages to ISO 8601 (data.language_tasks)

A corpus of one's own ("source<TAB>target" lines, ``task_from_tsv``) is the
task named CORPUS ("corpus"); the command line trains it with
``minitrans train translate --data FILE``.

Validation sources never appear in the training data, so the validation
score measures generalisation, not memory.
"""

import dataclasses
from typing import Callable, NamedTuple

from minitrans.core import backend, checks
from minitrans.data import corpus, language_tasks, toy_language
from minitrans.data.batches import make_lm_batch, make_seq2seq_batch
from minitrans.data.tokenizer import Tokenizer
from minitrans.data.vocab import Vocab

KINDS = ("seq2seq", "lm")
CORPUS = "corpus"  # the name of a task read from a user's TSV corpus
# A model trained from scratch on a user's plain text (data.text_corpus):
# no pairs, so not one of TASKS; the command line's ``train text --data FILE``.
TEXT = "text"


@dataclasses.dataclass
class Task:
    """A task's data and how to turn it into batches.

    name, description: for the command line ("copy", one line about it)
    kind:       "seq2seq" (encoder-decoder) or "lm" (decoder-only)
    tokenizer:  splits the texts into tokens
    vocab:      one vocabulary shared by source and target
    train, valid: lists of (source_text, target_text) pairs
    max_length: the longest source + target + 2 (<bos>, <eos>) over all
                pairs, counted once when the task is built (a builder that
                has split the pairs already gives it; otherwise they are
                split here). The positional encoding (config.max_len) must
                cover it: that bounds a language model's <bos> + source +
                target + <eos>, and the longest side of an encoder-decoder
                pair with its <bos> or <eos>. 0: a task restored without its
                data.
    """

    name: str
    kind: str
    tokenizer: Tokenizer
    vocab: Vocab
    train: list
    valid: list
    description: str = ""
    max_length: int = None

    def __post_init__(self):
        checks.check_choice("kind", self.kind, KINDS)
        if self.max_length is None:
            self.max_length = longest_pair(split_pairs(self.tokenizer, self.train + self.valid))

    def encode_pair(self, src_text, tgt_text):
        """Two texts -> (src_ids, tgt_ids), lists of ints without specials."""
        encode = self.vocab.encode
        return encode(self.tokenizer.split(src_text)), encode(self.tokenizer.split(tgt_text))

    def decode(self, ids):
        """Ids (up to the first <eos>) -> text."""
        return self.tokenizer.join(self.vocab.decode(ids))

    def make_batch(self, pairs):
        """A Batch of (source_text, target_text) pairs, on the device.

        A language model reads the source and target as one sequence
        ("12+34=46") and learns to predict every next token of it.
        """
        encoded = [self.encode_pair(src, tgt) for src, tgt in pairs]
        if self.kind == "seq2seq":
            return make_seq2seq_batch(encoded)
        return make_lm_batch([src + tgt for src, tgt in encoded])


def split_pairs(tokenizer, pairs):
    """(source tokens, target tokens) of each (source, target) text pair."""
    return [(tokenizer.split(src), tokenizer.split(tgt)) for src, tgt in pairs]


def longest_pair(token_pairs):
    """The longest source + target + 2 (<bos>, <eos>) over (source tokens,
    target tokens) pairs; 0 for none."""
    return max((len(src) + len(tgt) + 2 for src, tgt in token_pairs), default=0)


def shared_vocab(train_tokens, extra_tokens=()):
    """One vocabulary for both sides, from the training pairs' tokens (and
    ``extra_tokens``)."""
    return Vocab.build([src + tgt for src, tgt in train_tokens] + [list(extra_tokens)])


# ------------------------------------------------------------ built-in tasks

COPY_LENGTH = 10
DIGITS = "0123456789"


def _digit_strings(rng, count):
    """``count`` random strings of COPY_LENGTH digits (the copy task's inputs)."""
    rows = rng.integers(0, len(DIGITS), size=(count, COPY_LENGTH)).tolist()
    return ["".join(DIGITS[d] for d in row) for row in rows]


def _distinct_pairs(draw, count, rng, capacity):
    """``count`` (source, target) pairs with distinct sources.

    ``draw(rng, n)`` makes n random pairs; repeats are dropped and more are
    drawn until there are enough. Splitting the result never puts a
    validation source into the training data.
    """
    if count > capacity:
        raise ValueError(
            f"num_train: train + valid = {count} is more than the {capacity} distinct examples"
        )
    by_source = {}
    while len(by_source) < count:
        for source, target in draw(rng, count - len(by_source)):
            by_source.setdefault(source, target)
    return list(by_source.items())


def _generated_task(name, kind, level, draw, capacity, extra_tokens, description,
                    seed, num_train, num_valid):
    """Draw valid first, then train, and build the vocabulary from train.

    ``extra_tokens`` (the task's whole alphabet) are added to the vocabulary
    so that a small training set still knows every symbol.
    """
    num_train = 20000 if num_train is None else num_train
    num_valid = 1000 if num_valid is None else num_valid
    rng = backend.host_rng(seed)
    pairs = _distinct_pairs(draw, num_valid + num_train, rng, capacity)
    valid, train = pairs[:num_valid], pairs[num_valid:]
    return _split_task(name, kind, Tokenizer(level), train, valid, extra_tokens, description)


def _split_task(name, kind, tokenizer, train, valid, extra_tokens, description):
    """A Task whose pairs are split into tokens once, for the vocabulary
    (from ``train``) and the longest pair alike."""
    train_tokens = split_pairs(tokenizer, train)
    return Task(name, kind, tokenizer, shared_vocab(train_tokens, extra_tokens), train, valid,
                description, longest_pair(train_tokens + split_pairs(tokenizer, valid)))


def _copy_task(seed, num_train, num_valid):
    def draw(rng, n):
        return [(s, s) for s in _digit_strings(rng, n)]

    return _generated_task("copy", "seq2seq", "char", draw, len(DIGITS) ** COPY_LENGTH, DIGITS,
                           TASKS["copy"].description, seed, num_train, num_valid)


def _reverse_task(seed, num_train, num_valid):
    def draw(rng, n):  # the same sources as "copy" for a seed
        return [(s, s[::-1]) for s in _digit_strings(rng, n)]

    return _generated_task("reverse", "seq2seq", "char", draw, len(DIGITS) ** COPY_LENGTH, DIGITS,
                           TASKS["reverse"].description, seed, num_train, num_valid)


def _translate_task(seed, num_train, num_valid):
    def draw(rng, n):
        clauses = toy_language.random_clauses(rng, n)
        return [(toy_language.english(c), toy_language.target(c)) for c in clauses]

    return _generated_task("translate", "seq2seq", "word", draw, toy_language.NUM_SENTENCES,
                           toy_language.all_words(), TASKS["translate"].description,
                           seed, num_train, num_valid)


NUM_ADDITIONS = 100 * 100


def _addition_task(seed, num_train, num_valid):
    """Every a + b with 0 <= a, b < 100; a seeded shuffle picks the valid set."""
    num_valid = 1000 if num_valid is None else num_valid
    num_train = NUM_ADDITIONS - num_valid if num_train is None else num_train
    if num_train + num_valid > NUM_ADDITIONS:
        raise ValueError(f"num_train: train + valid = {num_train + num_valid} is more than "
                         f"the {NUM_ADDITIONS} two-digit additions")
    pairs = [(f"{a}+{b}=", str(a + b)) for a in range(100) for b in range(100)]
    order = backend.host_rng(seed).permutation(NUM_ADDITIONS).tolist()
    valid = [pairs[i] for i in order[:num_valid]]
    train = [pairs[i] for i in order[num_valid : num_valid + num_train]]
    return _split_task("lm", "lm", Tokenizer("char"), train, valid, DIGITS + "+=",
                       TASKS["lm"].description)


def _language_task(name):
    """The builder of a task in real language: its generator imports num2words
    or babel (or says how to install it) only when the task is built."""
    def build(seed, num_train, num_valid):
        generator = language_tasks.GENERATORS[name]()
        return _generated_task(name, "seq2seq", "char", generator.draw, generator.capacity,
                               generator.alphabet, TASKS[name].description, seed, num_train,
                               num_valid)

    return build


class TaskSpec(NamedTuple):
    description: str
    build: Callable  # build(seed, num_train, num_valid) -> Task


TASKS = {
    "copy": TaskSpec(
        "copy: repeat 10 random digits (the Annotated Transformer's first task)", _copy_task
    ),
    "reverse": TaskSpec("reverse: write 10 random digits backwards", _reverse_task),
    "translate": TaskSpec(
        "translate: toy English into a made-up subject-object-verb language "
        "(words move, not just change)",
        _translate_task,
    ),
    "lm": TaskSpec(
        "lm: a decoder-only model completes two-digit sums, '12+34=' -> '46'", _addition_task
    ),
    "numbers": TaskSpec(language_tasks.NUMBERS_DESCRIPTION, _language_task("numbers")),
    "dates": TaskSpec(language_tasks.DATES_DESCRIPTION, _language_task("dates")),
}


def load_task(name, seed=0, num_train=None, num_valid=None):
    """A built-in task, the same for the same seed and sizes.

    ``num_train``/``num_valid`` default to 20000/1000 (lm: 9000/1000, all the
    additions there are).
    """
    checks.check_choice("task", name, sorted(TASKS))
    checks.check_int("num_train", num_train, low=1, allow_none=True)
    checks.check_int("num_valid", num_valid, low=1, allow_none=True)
    return TASKS[name].build(seed, num_train, num_valid)


# -------------------------------------------------------------- TSV corpora


def task_from_tsv(train_path, valid_path=None, level="bpe", merges=None, valid_fraction=0.1,
                  seed=0, bpe=None):
    """The CORPUS task: translation pairs from "source<TAB>target" files
    (see data.read_tsv), read, split into tokens and measured once.

    Without ``valid_path``, a seeded random ``valid_fraction`` of the pairs
    is held out for validation; pairs too long to train on are skipped; at
    level "bpe" ``merges`` merges are learned from the training pairs, or
    ``bpe`` gives them (``corpus.read_corpus`` says how). The vocabulary
    comes from the training pairs only: tokens seen only in validation
    become <unk>, as unseen ones would in real use (at level "bpe" only
    characters never seen in training can be unknown: see
    ``corpus.vocabulary_extras``).
    """
    read = corpus.read_corpus(train_path, valid_path, level, merges, valid_fraction, seed, bpe)
    extras = corpus.vocabulary_extras(read.tokenizer, read.train_tokens)
    return Task(CORPUS, "seq2seq", read.tokenizer, shared_vocab(read.train_tokens, extras),
                read.train, read.valid, f"{CORPUS}: {read.description}",
                longest_pair(read.train_tokens + read.valid_tokens))

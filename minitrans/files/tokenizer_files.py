"""Reading a pretrained tokenizer's files as untrusted input.

A model folder is something someone hands you, so nothing in it is trusted:
a file's size is checked before it is read (``MAX_FILE_BYTES``), text must
be UTF-8, JSON must be strict (no NaN, no key given twice), every field is
checked for its type before it is used, and the ids must be 0 to n - 1
without a gap (a model draws any id below its vocabulary's size, and each
must decode). Each problem is one line, a ``FileError`` (a ``ValueError``)
that names the file and the field, quoting the file's text cut short
(``rules.short``: a token may be megabytes long):

    tokenizer.json: model.merges[7]: 'Ġt' + 'hx' is not in model.vocab

The readers of the three layouts (``gpt2_tokenizer``, ``hf_tokenizer``)
share these helpers; ``JsonFile`` carries the file's name into every message.
"""

import json
import os

from minitrans.files import rules
from minitrans.files.rules import FileError, short

# Llama 3's tokenizer.json is 9 MB and GPT-2's vocab.json 1 MB: 100 MB leaves
# room for any real tokenizer while refusing a file that would fill memory.
MAX_FILE_BYTES = 100 * 2**20
# Ids index a model's embedding table; the largest real vocabularies hold
# about 2**18 tokens, so an id of 2**24 or more is a damaged file.
MAX_ID = 2**24

TYPE_NAMES = {dict: "an object", list: "an array", str: "a string", int: "an integer",
              bool: "a boolean", float: "a number", type(None): "null"}


TokenizerFileError = FileError  # its name before every file a user hands us raised one error type


def read_text(path, max_bytes=MAX_FILE_BYTES):
    """The UTF-8 text of a tokenizer's file, read by the household's rules
    (``rules.read_text``: a regular file, its size checked before it is
    read, UTF-8 without NUL bytes)."""
    return rules.read_text(path, "a tokenizer's file", max_bytes)


class SourceFile:
    """A file's name, carried into one-line errors that name it."""

    def __init__(self, path):
        self.name = os.fspath(path)

    def fail(self, field, message):
        raise TokenizerFileError(f"{self.name}: {field}: {message}")


class JsonFile(SourceFile):
    """A strict JSON file, and checks of its fields that name the file."""

    def __init__(self, path, max_bytes=MAX_FILE_BYTES):
        super().__init__(path)
        text = read_text(path, max_bytes)
        try:
            self.data = json.loads(text, object_pairs_hook=self._no_repeated_keys,
                                   parse_constant=self._no_constants)
        except TokenizerFileError:
            raise
        except json.JSONDecodeError as error:
            self.fail(f"line {error.lineno}", f"not valid JSON ({error.msg})")
        except ValueError as error:  # an integer of more digits than Python converts
            self.fail("(value)", f"not usable JSON ({error})")
        except RecursionError:
            self.fail("(top)", "JSON nested too deeply")

    def _no_repeated_keys(self, pairs):
        # json keeps the last of two equal keys silently; a file that says
        # two things about one field is damaged, not to be guessed at.
        found = {}
        for key, value in pairs:
            if key in found:
                self.fail(short(key), "this key is given twice in one object")
            found[key] = value
        return found

    def _no_constants(self, constant):
        self.fail("(value)", f"{constant} is not strict JSON")

    def check_type(self, field, value, *types):
        """``value`` (found at ``field``) is of one of ``types``; a boolean
        is not an integer here, though Python says it is."""
        if not any(type(value) is kind for kind in types):
            expected = " or ".join(TYPE_NAMES[kind] for kind in types)
            self.fail(field, f"expected {expected}, got {TYPE_NAMES.get(type(value), 'a value')}")
        return value

    def get(self, obj, field, key, *types, default=...):
        """``obj[key]`` checked to be of one of ``types``; a missing key is
        an error unless a ``default`` is given (returned as it is)."""
        where = f"{field}.{key}" if field else key
        if key not in obj:
            if default is ...:
                self.fail(where, "missing")
            return default
        return self.check_type(where, obj[key], *types)

    def check_id(self, field, value):
        """A token id: an integer in [0, MAX_ID)."""
        self.check_type(field, value, int)
        if not 0 <= value < MAX_ID:
            self.fail(field, f"id {value} is out of range [0, {MAX_ID})")
        return value

    def check_only(self, obj, field, supported):
        """``obj`` (a component of the pipeline) has no key outside
        ``supported``: an option this reader does not know would change the
        ids silently if it were ignored."""
        unknown = sorted(set(obj) - set(supported))
        if unknown:
            self.fail(f"{field}.{short(unknown[0])}" if field else short(unknown[0]),
                      "this option is not supported")


def check_vocab(source, field, vocab):
    """A vocabulary read from JSON: an object of token -> id, each id an
    integer in range and given to one token only. ``source`` is the
    ``JsonFile`` it came from, ``field`` where it sits in it ("" for the
    whole file, as in vocab.json)."""
    source.check_type(field or "(top)", vocab, dict)
    owner = {}
    for token, token_id in vocab.items():
        where = f"{field}[{short(token)}]" if field else short(token)
        source.check_id(where, token_id)
        if not token:
            source.fail(where, "the empty string is not a token")
        if token_id in owner:
            source.fail(where, f"id {token_id} is also given to {short(owner[token_id])}")
        owner[token_id] = token
    return vocab


def check_ids_without_gaps(source, field, tokens):
    """``tokens`` (id -> token) hold every id from 0 to len(tokens) - 1: a
    model's output row of a missing id would be a sample that cannot be
    decoded, found only once it was drawn. ``field`` names where the ids
    come from ("model.vocab and added_tokens")."""
    count = len(tokens)
    if all(token_id < count for token_id in tokens):
        return  # n distinct ids below n: exactly 0 .. n - 1
    missing = min(set(range(count)) - set(tokens))
    source.fail(field, f"expected the ids 0 to {count - 1} of the {count} tokens without a gap, "
                       f"but id {missing} is no token's (the largest is {max(tokens)})")

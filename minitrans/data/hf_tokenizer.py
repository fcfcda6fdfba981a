"""A BPE tokenizer read from the ``tokenizer.json`` of the Hugging Face
``tokenizers`` library, as the Llama family ships it, run here in Python.

Encoding a text goes through five steps (``minitrans.data.hf_pipeline``
reads the ones around the model):

1. cut out the added tokens: "<|begin_of_text|>" or "<s>" written in the
   text is matched whole (the longest at the leftmost place) and becomes
   its id, whatever ``add_special_tokens`` says: that flag only adds the
   post-processor's tokens (step 5);
2. normalize each stretch of text between them;
3. pre-tokenize each stretch into pieces;
4. apply the BPE model to each piece (``byte_level_bpe.BPEModel``);
5. with ``add_special_tokens=True``, put the post-processor's tokens around.

The two layouts of the Llama family, on the text "Hi  there":

    Llama 3    no normalizer; Split on its pattern, then ByteLevel without
               its own pattern:   "Hi" "Ġ" "Ġthere"   (then merges)
    Llama 2    normalizer Prepend "▁" and Replace " " -> "▁", no
               pre-tokenizer:    "▁Hi▁▁there"   one piece, merged into
               tokens such as "▁Hi" "▁" "▁there"; a character that is not
               in the vocabulary becomes its UTF-8 bytes "<0xE4>" "<0xB8>"
               ... (byte_fallback)

Llama 3 also sets ``ignore_merges``: a piece that is a token is taken whole,
without merging (its merges might not rebuild it).
"""

import re

from minitrans.data import byte_level_bpe, hf_pipeline
from minitrans.files.rules import short
from minitrans.files.tokenizer_files import (
    JsonFile,
    TokenizerFileError,
    check_ids_without_gaps,
    check_vocab,
)

TOP_FIELDS = ("version", "truncation", "padding", "added_tokens", "normalizer",
              "pre_tokenizer", "post_processor", "decoder", "model")
BPE_FIELDS = ("type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
              "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges")
ADDED_FIELDS = ("id", "content", "single_word", "lstrip", "rstrip", "normalized", "special")


class HFTokenizer:
    """``encode(text) -> ids`` and ``decode(ids) -> text`` as the
    ``tokenizers`` library computes them from the same tokenizer.json."""

    def __init__(self, source):
        """Read and check ``source``, a ``JsonFile`` of a tokenizer.json."""
        data = source.check_type("(top)", source.data, dict)
        source.check_only(data, "", TOP_FIELDS)
        for field in ("truncation", "padding"):  # they would change the ids returned
            if data.get(field) is not None:
                source.fail(field, "not supported (expected null)")
        self.model, self.tokens = _read_model(source, data.get("model"))
        self.normalizer = hf_pipeline.build_normalizer(source, "normalizer", data.get("normalizer"))
        self.added = _read_added_tokens(source, data.get("added_tokens", []), self.model.vocab)
        # A token marked normalized is the library's as the normalizer writes
        # it, in the text and in decoding: with Llama 2's, "zq" is "▁zq".
        normalize = self.normalizer or (lambda text: text)
        for entry in self.added:
            if entry["normalized"]:
                entry["content"] = normalize(entry["content"])
        self.tokens.update({entry["id"]: entry["content"] for entry in self.added})
        check_ids_without_gaps(source, "model.vocab and added_tokens", self.tokens)
        self.special_ids = {entry["id"] for entry in self.added if entry["special"]}
        self._raw = _added_pattern({entry["content"]: entry["id"] for entry in self.added
                                    if not entry["normalized"]})
        self._normalized = _added_pattern({entry["content"]: entry["id"]
                                           for entry in self.added if entry["normalized"]})
        self.pre_tokenizer = hf_pipeline.build_pre_tokenizer(source, "pre_tokenizer",
                                                             data.get("pre_tokenizer"))
        self.decoder = hf_pipeline.build_decoder(source, "decoder", data.get("decoder"))
        self.prefix, self.suffix = _read_post_processor(source, "post_processor",
                                                        data.get("post_processor"), self.tokens)

    @classmethod
    def from_file(cls, path):
        return cls(JsonFile(path))

    def __len__(self):
        return len(self.tokens)

    def encode(self, text, add_special_tokens=False):
        """The token ids of ``text``; ``add_special_tokens`` adds the
        post-processor's (Llama's begin-of-text), as the library's encode
        does by default."""
        if not isinstance(text, str):
            raise TypeError(f"text: expected a str, got {type(text).__name__}")
        ids = []
        for part, at_start in self._stretches(text):
            if isinstance(part, int):
                ids.append(part)
                continue
            pieces = [(part, at_start)]
            for piece, _ in self.pre_tokenizer(pieces) if self.pre_tokenizer else pieces:
                ids += self.model.tokenize(piece)
        return self.prefix + ids + self.suffix if add_special_tokens else ids

    def _stretches(self, text):
        """Step 1 and 2: added-token ids, and (normalized text, at_start)
        for the stretches between them. Tokens marked normalized are looked
        for after normalizing, in each stretch, as the library does."""
        result = []
        for part, start in _cut(self._raw, text):
            if isinstance(part, int):
                result.append((part, False))
                continue
            normalized = self.normalizer(part) if self.normalizer else part
            result += [(sub, start == 0 and offset == 0)
                       for sub, offset in _cut(self._normalized, normalized)]
        return result

    def decode(self, ids, skip_special_tokens=False):
        """The text of ``ids``. Special tokens are kept unless
        ``skip_special_tokens`` (the library's decode skips them by default;
        here decode(encode(text)) gives the text back). An id of no token is
        an error, where the library drops it silently."""
        ids = list(ids)
        if skip_special_tokens:
            ids = [token_id for token_id in ids if token_id not in self.special_ids]
        tokens = byte_level_bpe.lookup_tokens(self.tokens, ids)
        if self.decoder is None:
            return " ".join(tokens)  # the library's choice without a decoder
        return "".join(self.decoder(tokens))


def _cut(pattern, text):
    """[(part, offset)]: the added tokens' ids and the non-empty text between."""
    if pattern is None:
        return [(text, 0)] if text else []
    compiled, ids = pattern
    parts, end = [], 0
    for match in compiled.finditer(text):
        if match.start() > end:
            parts.append((text[end:match.start()], end))
        parts.append((ids[match.group()], match.start()))
        end = match.end()
    return parts + ([(text[end:], end)] if end < len(text) else [])


def _added_pattern(ids):
    """(compiled alternation, ids), from ``ids`` (content -> id), or None
    without tokens. The longest first, so the first alternative to match is
    the longest: the library's leftmost-longest match."""
    ids = {content: token_id for content, token_id in ids.items() if content}
    if not ids:
        return None
    contents = sorted(ids, key=lambda content: (-len(content), content))
    return re.compile("|".join(map(re.escape, contents))), ids


def _read_model(source, spec):
    """(BPEModel, id -> token) from the "model" object."""
    source.check_type("model", spec, dict)
    kind = source.get(spec, "model", "type", str, default="BPE" if "merges" in spec else None)
    if kind != "BPE":
        raise TokenizerFileError(f"{source.name}: model type {short(kind)} is not supported; "
                                 "expected BPE")
    source.check_only(spec, "model", BPE_FIELDS)
    if source.get(spec, "model", "dropout", float, int, type(None), default=None):
        source.fail("model.dropout", "dropout (random merges) is not supported")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if source.get(spec, "model", key, str, type(None), default=None):
            source.fail(f"model.{key}", "not supported (expected null)")
    vocab = check_vocab(source, "model.vocab", source.get(spec, "model", "vocab", dict))
    unk = source.get(spec, "model", "unk_token", str, type(None), default=None)
    if unk is not None and unk not in vocab:
        source.fail("model.unk_token", f"{short(unk)} is not in model.vocab")
    merges = _read_merges(source, source.get(spec, "model", "merges", list))
    options = {key: source.get(spec, "model", key, bool, default=False)
               for key in ("byte_fallback", "fuse_unk", "ignore_merges")}
    table = byte_level_bpe.merge_table(source, "model.vocab", vocab, merges)
    model = byte_level_bpe.BPEModel(vocab, table, unk_token=unk, **options)
    return model, {token_id: token for token, token_id in vocab.items()}


def _read_merges(source, merges):
    """model.merges, as "left right" strings or [left, right] pairs, ->
    [(label, left, right)]."""
    result = []
    for i, merge in enumerate(merges):
        label = f"model.merges[{i}]"
        source.check_type(label, merge, str, list)
        parts = merge.split(" ") if isinstance(merge, str) else merge
        if len(parts) != 2 or not all(isinstance(part, str) and part for part in parts):
            source.fail(label, 'expected "left right" or [left, right], two non-empty tokens')
        result.append((label, *parts))
    return result


def _read_added_tokens(source, entries, vocab):
    """added_tokens: checked entries. One already in the vocabulary keeps
    its id; a new one takes an id that no other token has."""
    source.check_type("added_tokens", entries, list)
    owner = {token_id: token for token, token_id in vocab.items()}
    ids = dict(vocab)  # content -> id, of the vocabulary and the entries read so far
    result = []
    for i, entry in enumerate(entries):
        field = f"added_tokens[{i}]"
        source.check_type(field, entry, dict)
        source.check_only(entry, field, ADDED_FIELDS)
        token_id = source.check_id(f"{field}.id", source.get(entry, field, "id", int))
        content = source.get(entry, field, "content", str)
        if not content:
            source.fail(f"{field}.content", "the empty string is not a token")
        for flag in ("single_word", "lstrip", "rstrip"):
            if source.get(entry, field, flag, bool, default=False):
                source.fail(f"{field}.{flag}", "true is not supported")
        if owner.get(token_id, content) != content:
            source.fail(f"{field}.id", f"id {token_id} already belongs to {short(owner[token_id])}")
        if ids.get(content, token_id) != token_id:
            source.fail(f"{field}.id", f"{short(content)} already has id {ids[content]}")
        owner[token_id], ids[content] = content, token_id
        result.append({"id": token_id, "content": content,
                       "normalized": source.get(entry, field, "normalized", bool, default=True),
                       "special": source.get(entry, field, "special", bool, default=False)})
    return result


def _read_post_processor(source, field, spec, tokens, depth=0):
    """(ids before, ids after) the text's, from the post-processor."""
    if spec is None:
        return [], []
    if depth > hf_pipeline.MAX_NESTING:
        source.fail(field, f"Sequences nested over {hf_pipeline.MAX_NESTING} deep")
    source.check_type(field, spec, dict)
    kind = source.get(spec, field, "type", str)
    if kind == "ByteLevel":  # it moves offsets only
        source.check_only(spec, field, ("type", "add_prefix_space", "trim_offsets", "use_regex"))
        return [], []
    if kind == "Sequence":
        source.check_only(spec, field, ("type", "processors"))
        prefix, suffix = [], []
        for i, step in enumerate(source.get(spec, field, "processors", list)):
            before, after = _read_post_processor(source, f"{field}.processors[{i}]", step,
                                                 tokens, depth + 1)
            prefix, suffix = before + prefix, suffix + after  # each wraps the one before
        return prefix, suffix
    if kind != "TemplateProcessing":
        source.fail(f"{field}.type", f"{short(kind)} is not supported "
                                     "(supported: TemplateProcessing, ByteLevel, Sequence)")
    return _read_template(source, field, spec, tokens)


def _read_template(source, field, spec, tokens):
    """TemplateProcessing's "single" template: special tokens around $A."""
    source.check_only(spec, field, ("type", "single", "pair", "special_tokens"))
    source.get(spec, field, "pair", list, default=[])  # pairs of texts are not encoded here
    special = source.get(spec, field, "special_tokens", dict)
    parts, sequences = ([], []), 0
    for i, item in enumerate(source.get(spec, field, "single", list)):
        where = f"{field}.single[{i}]"
        source.check_type(where, item, dict)
        if len(item) != 1 or list(item)[0] not in ("SpecialToken", "Sequence"):
            source.fail(where, 'expected {"SpecialToken": ...} or {"Sequence": ...}')
        (form, body), = item.items()
        name = source.get(source.check_type(f"{where}.{form}", body, dict), f"{where}.{form}",
                          "id", str)
        if form == "Sequence":
            sequences += 1
            continue
        if name not in special:
            source.fail(f"{where}.{form}.id", f"{short(name)} is not in {field}.special_tokens")
        parts[min(sequences, 1)].extend(_template_ids(
            source, f"{field}.special_tokens[{short(name)}]", special[name], tokens))
    if sequences != 1:
        source.fail(f"{field}.single", f"expected one Sequence, found {sequences}")
    return parts


def _template_ids(source, field, entry, tokens):
    ids = source.get(source.check_type(field, entry, dict), field, "ids", list)
    for i, token_id in enumerate(ids):
        source.check_id(f"{field}.ids[{i}]", token_id)
        if token_id not in tokens:
            source.fail(f"{field}.ids[{i}]", f"id {token_id} is not the id of a token")
    return ids

"""The steps of a tokenizer.json around its model, read from the file.

The ``tokenizers`` library runs a text through, in order:

    normalizer      text -> text, e.g. Llama 2's Prepend "▁" then Replace " " -> "▁"
    pre_tokenizer   text -> pieces, e.g. Llama 3's Split on its pattern, then
                    ByteLevel (each piece's bytes through GPT-2's byte table)
    model           piece -> ids (minitrans.data.byte_level_bpe.BPEModel)
    post_processor  ids -> ids with special tokens around them (a BOS)
    decoder         tokens -> text (ByteLevel; or Replace "▁" -> " ",
                    ByteFallback, Fuse, Strip, as Llama 2's)

Each builder here reads one step's JSON object and returns a plain function,
or None where the file says null. A step of a type or with an option that
is not written here is refused by name, so that no option is silently
ignored. The types written are the ones the GPT-2 and Llama families use.
A Split's pattern comes from the file, so its matching is bounded in time
(``byte_level_bpe.match_seconds``): one that backtracks without bound fails.

A piece is carried as (text, at_start): at_start says the piece begins the
original text, which Metaspace's prepend_scheme "first" asks for (so it is
read only where it is exact: Metaspace "first" as the first pre-tokenizer).
"""

import functools
import re

from minitrans.data import byte_level_bpe
from minitrans.files.rules import short

MAX_NESTING = 4  # Sequences inside Sequences: real files nest one deep
BEHAVIOURS = ("Isolated", "Removed")  # Split's behaviours written here
PREPEND_SCHEMES = ("always", "first", "never")


def _kind(source, field, spec, depth, supported):
    """The "type" of a step's JSON object, checked to be one of ``supported``."""
    if depth > MAX_NESTING:
        source.fail(field, f"Sequences nested over {MAX_NESTING} deep")
    source.check_type(field, spec, dict)
    kind = source.get(spec, field, "type", str)
    if kind not in supported:
        source.fail(f"{field}.type", f"{short(kind)} is not supported (supported: "
                                     f"{', '.join(supported)})")
    return kind


def _string_pattern(source, field, spec):
    """A Replace's pattern: {"String": text}; a Regex pattern is refused."""
    pattern = source.get(spec, field, "pattern", dict)
    if list(pattern) != ["String"]:
        source.fail(f"{field}.pattern",
                    f"expected {{\"String\": ...}}, got keys {short(list(pattern))}")
    text = source.get(pattern, f"{field}.pattern", "String", str)
    if not text:
        source.fail(f"{field}.pattern.String", "an empty pattern")
    return text


def _chain(steps):
    return lambda value: functools.reduce(lambda result, step: step(result), steps, value)


def _sequence(source, field, spec, key, build, depth):
    items = source.get(spec, field, key, list)
    return _chain([build(source, f"{field}.{key}[{i}]", item, depth + 1)
                   for i, item in enumerate(items)])


# ------------------------------------------------------------------ normalizer


def build_normalizer(source, field, spec, depth=0):
    """text -> text, applied to each stretch of text between added tokens."""
    if spec is None:
        return None
    kind = _kind(source, field, spec, depth, ("Sequence", "Prepend", "Replace"))
    if kind == "Sequence":
        source.check_only(spec, field, ("type", "normalizers"))
        return _sequence(source, field, spec, "normalizers", build_normalizer, depth)
    if kind == "Prepend":
        source.check_only(spec, field, ("type", "prepend"))
        prepend = source.get(spec, field, "prepend", str)
        return lambda text: prepend + text if text else text  # nothing to prepend to
    source.check_only(spec, field, ("type", "pattern", "content"))
    pattern = _string_pattern(source, field, spec)
    content = source.get(spec, field, "content", str)
    return lambda text: text.replace(pattern, content)


# --------------------------------------------------------------- pre-tokenizer


def build_pre_tokenizer(source, field, spec, depth=0, first=True):
    """[(piece, at_start)] -> [(piece, at_start)]: cut the pieces finer.
    ``first``: this step is the first, given the stretches between added
    tokens whole."""
    if spec is None:
        return None
    kind = _kind(source, field, spec, depth, ("Sequence", "Split", "ByteLevel", "Metaspace"))
    if kind == "Sequence":
        source.check_only(spec, field, ("type", "pretokenizers"))
        items = source.get(spec, field, "pretokenizers", list)
        return _chain([build_pre_tokenizer(source, f"{field}.pretokenizers[{i}]", item,
                                           depth + 1, first and i == 0)
                       for i, item in enumerate(items)])
    if kind == "Metaspace":
        cut = _metaspace(source, field, spec, first)
    else:
        cut = {"Split": _split, "ByteLevel": _byte_level}[kind](source, field, spec)
    return functools.partial(_cut_pieces, cut)


def _cut_pieces(cut, pieces):
    """Apply ``cut`` ((text, at_start) -> parts) to every piece. A part is
    None where the cut removed text; empty parts are dropped, as the library
    drops them after every step, and only a part with nothing before it keeps
    at_start."""
    result = []
    for text, at_start in pieces:
        for part in cut(text, at_start):
            if part:
                result.append((part, at_start))
            if part != "":
                at_start = False
    return result


def _split(source, field, spec):
    source.check_only(spec, field, ("type", "pattern", "behavior", "invert"))
    pattern = source.get(spec, field, "pattern", dict)
    if len(pattern) != 1 or list(pattern)[0] not in ("String", "Regex"):
        source.fail(f"{field}.pattern", 'expected {"String": ...} or {"Regex": ...}')
    (form, text), = pattern.items()
    source.check_type(f"{field}.pattern.{form}", text, str)
    behaviour = source.get(spec, field, "behavior", str)
    if behaviour not in BEHAVIOURS:
        source.fail(f"{field}.behavior", f"{short(behaviour)} is not supported "
                                         f"(supported: {', '.join(BEHAVIOURS)})")
    if source.get(spec, field, "invert", bool, default=False):
        source.fail(f"{field}.invert", "true is not supported")
    try:
        compiled = byte_level_bpe.compile_pattern(text if form == "Regex" else re.escape(text))
    except byte_level_bpe.PATTERN_ERRORS as error:
        source.fail(f"{field}.pattern.{form}", f"not a pattern this reader can compile ({error})")
    where, keep = f"{field}.pattern.{form}", behaviour == "Isolated"
    empty = _bounded(source, where, "", lambda seconds: compiled.search("", timeout=seconds))
    if empty is not None:
        source.fail(where, "a pattern that matches the empty string")
    return lambda piece, _at_start: _bounded(
        source, where, piece,
        lambda seconds: byte_level_bpe.split_on(compiled, piece, keep, timeout=seconds))


def _bounded(source, where, text, match):
    """``match(seconds)``: the file's pattern at ``where`` run on ``text``
    within its bound (``byte_level_bpe.match_seconds``), else one line."""
    seconds = byte_level_bpe.match_seconds(text)
    try:
        return match(seconds)
    except TimeoutError:
        source.fail(where, f"matching took over {seconds:.1f} s on a text of {len(text)} "
                           "characters: a pattern that backtracks without bound, such as "
                           "(a|aa)+$, is refused")


def _byte_level(source, field, spec):
    source.check_only(spec, field, ("type", "add_prefix_space", "trim_offsets", "use_regex"))
    prefix = source.get(spec, field, "add_prefix_space", bool, default=True)
    source.get(spec, field, "trim_offsets", bool, default=True)  # offsets only
    use_regex = source.get(spec, field, "use_regex", bool, default=True)
    pattern = byte_level_bpe.compile_pattern(byte_level_bpe.GPT2_PATTERN)

    def cut(text, _at_start):
        if prefix and not text.startswith(" "):  # each piece gets one, not the text
            text = " " + text
        pieces = pattern.findall(text) if use_regex else [text]
        return [byte_level_bpe.to_byte_level(piece) for piece in pieces]

    return cut


def _metaspace_options(source, field, spec):
    """(replacement, prepend_scheme, split). Files written before the
    library's 0.15 say add_prefix_space instead of prepend_scheme: true is
    "always"; false alone the library refuses, and so does this reader."""
    source.check_only(spec, field, ("type", "replacement", "prepend_scheme", "split",
                                    "add_prefix_space", "str_rep"))
    replacement = source.get(spec, field, "replacement", str)
    if len(replacement) != 1:
        source.fail(f"{field}.replacement", "expected one character")
    legacy = source.get(spec, field, "add_prefix_space", bool, default=True)
    if not legacy and "prepend_scheme" not in spec:
        source.fail(f"{field}.add_prefix_space", "false without a prepend_scheme")
    scheme = source.get(spec, field, "prepend_scheme", str, default="always")
    if scheme not in PREPEND_SCHEMES:
        source.fail(f"{field}.prepend_scheme", f"expected one of {', '.join(PREPEND_SCHEMES)}")
    return replacement, scheme, source.get(spec, field, "split", bool, default=True)


def _metaspace(source, field, spec, first):
    replacement, scheme, split = _metaspace_options(source, field, spec)
    if scheme == "first" and not first:
        # The library asks whether the piece begins at offset 0 of the
        # original text, which a normalizer's Prepend and an earlier split
        # blur (both "▁" and "1" of "▁1" begin there): given whole stretches,
        # the answer is plain.
        source.fail(f"{field}.prepend_scheme", '"first" is supported in the first '
                                               "pre-tokenizer step only")

    def cut(text, at_start):
        text = text.replace(" ", replacement)
        if not text.startswith(replacement) and (scheme == "always" or
                                                  scheme == "first" and at_start):
            text = replacement + text
        # split: each replacement character begins a piece ("MergedWithNext")
        return re.split(f"(?={re.escape(replacement)})", text) if split else [text]

    return cut


# --------------------------------------------------------------------- decoder


def build_decoder(source, field, spec, depth=0):
    """[token] -> [token]; the text is their concatenation."""
    if spec is None:
        return None
    kind = _kind(source, field, spec, depth, ("Sequence", "ByteLevel", "Replace", "ByteFallback",
                                              "Fuse", "Strip", "Metaspace"))
    if kind == "Sequence":
        source.check_only(spec, field, ("type", "decoders"))
        return _sequence(source, field, spec, "decoders", build_decoder, depth)
    if kind == "ByteLevel":  # its options change pre-tokenization and offsets only
        source.check_only(spec, field, ("type", "add_prefix_space", "trim_offsets", "use_regex"))
        return lambda tokens: [byte_level_bpe.from_byte_level(tokens)]
    if kind in ("ByteFallback", "Fuse"):
        source.check_only(spec, field, ("type",))
        return byte_fallback if kind == "ByteFallback" else lambda tokens: ["".join(tokens)]
    if kind == "Replace":
        source.check_only(spec, field, ("type", "pattern", "content"))
        pattern = _string_pattern(source, field, spec)
        content = source.get(spec, field, "content", str)
        return lambda tokens: [token.replace(pattern, content) for token in tokens]
    if kind == "Strip":
        return _strip(source, field, spec)
    replacement, scheme, _split = _metaspace_options(source, field, spec)
    # The library drops every replacement of the first token, not only its first one.
    return lambda tokens: [token.replace(replacement, "" if i == 0 and scheme != "never" else " ")
                           for i, token in enumerate(tokens)]


def _strip(source, field, spec):
    source.check_only(spec, field, ("type", "content", "start", "stop"))
    content = source.get(spec, field, "content", str)
    if len(content) != 1:
        source.fail(f"{field}.content", "expected one character")
    start, stop = (source.check_id(f"{field}.{key}", source.get(spec, field, key, int))
                   for key in ("start", "stop"))

    def strip_one(token):
        head = len(token) - len(token.lstrip(content))
        token = token[min(head, start):]
        tail = len(token) - len(token.rstrip(content))
        return token[:len(token) - min(tail, stop)]

    return lambda tokens: [strip_one(token) for token in tokens]


def byte_fallback(tokens):
    """Runs of byte tokens "<0xNN>" become the text their bytes spell; a run
    that is not valid UTF-8 gives one U+FFFD per byte, as the library does."""
    result, run = [], bytearray()
    for token in [*tokens, None]:  # None: the end, which closes the final run
        byte = _byte_of(token)
        if byte is not None:
            run.append(byte)
            continue
        if run:
            try:
                result.append(run.decode("utf-8"))
            except UnicodeDecodeError:
                result += ["\ufffd"] * len(run)
            run.clear()
        if token is not None:
            result.append(token)
    return result


_BYTE_TOKEN = re.compile(r"<0x(\+?[0-9A-Fa-f]{1,2})>")


def _byte_of(token):
    """The byte of "<0xNN>", read as Rust's from_str_radix reads NN (which
    takes a "+" sign: "<0x+A>" is byte 10); None for any other token."""
    match = _BYTE_TOKEN.fullmatch(token) if token is not None else None
    if match is None or len(token) != 6:
        return None
    return int(match.group(1), 16)

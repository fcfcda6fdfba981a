"""The pretrained tokenizers written here (minitrans.data.gpt2_tokenizer,
hf_tokenizer, byte_level_bpe) give exactly the ids of the Hugging Face
``tokenizers`` library, on tokenizers trained here with it (no download):
GPT-2's vocab.json + merges.txt, a byte-level tokenizer.json, a Llama 3
style one (Split on its pattern, ignore_merges, special tokens) and two
Llama 2 style ones (SentencePiece BPE with byte fallback). Malformed or
unsupported files are refused in one line that names the file and field.

The reference tests skip without ``tokenizers`` (or ``regex``, which the
tokenizers written here need); the refusals run anyway."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minitrans.data import byte_level_bpe
from minitrans.data.gpt2_tokenizer import GPT2Tokenizer
from minitrans.data.hf_tokenizer import HFTokenizer
from minitrans.data.pretrained_tokenizer import load_tokenizer
from minitrans.files.rules import FileError
from minitrans.files.tokenizer_files import MAX_FILE_BYTES, TokenizerFileError

CORPUS = [
    "Hello world! The quick brown fox jumps over the lazy dog. Don't stop; it's fine.",
    "I'm sure we'll see they've done what you'd expect, isn't it?",
    "Café, naïve, résumé, über, façade, Ærø, smørrebrød, São Paulo, Łódź.",
    "Привет, мир! Съешь же ещё этих мягких французских булок.",
    "你好，世界。日本語のテキストと한국어 문장도 있습니다。",
    "مرحبا بالعالم، هذا نص عربي قصير.",
    "Emoji: 😀 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ and more 🎉🎉",
    "Numbers 0 1 12 123 1234 12345 3.14159 2,718 1e10 2024-06-01",
    "Spaces:  two   three    four\ttab\t\ttabs\nnew line\n\nblank\r\nwindows",
    "    indented code():\n        return x + 1  # comment",
] * 3
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                  r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|é|>"]
HARD = [
    "", " ", "  ", "   ", "\n", "\n\n\n", "\t", " \t\n ", "\r\n", "Hello world",
    "  leading spaces", "trailing spaces  ", " both ", "don't", "DON'T", "Don'T stop",
    "I'm we've they'll she'd it's", "'s 't 're", "''", "Café naïve résumé",
    "e\u0301 a\u0308 combining marks\u0301", "Привет, мир!", "你好，世界", "日本語のテキスト",
    "مرحبا بالعالم", "👍🏽", "👨‍👩‍👧‍👦 family", "🏳️‍🌈", "a\u200db", "12345678901234",
    "3.14159 and 2,718", "mixed123abc456", "a  b   c    d", "line1\nline2\r\nline3",
    "tabs\tand\t\tmore", "\u00a0nbsp\u2003em\u3000ideographic", "’curly’ 's", "ǅ ß İstanbul",
    "'ſ 'K \u212a", "\x00\x01\x7f", "\ufeffBOM", "\U0010fffd private", "x" * 300,
    "<|endoftext|>", "<|begin_of_text|>Hello<|eot_id|>", "text<s>inside</s>text", "<s>",
    "<<s>>", "<s><s>", " <s> a </s> ", "<|é|>", "<|begin_of_text|><|begin_of_text|>",
    "<0x41> byte token",
]
# Code points Python 3.11 calls unassigned are left out of the random texts:
# the regex package knows Unicode 16 and the library's Oniguruma an older
# one, so they disagree about \p{L} for letters added since (U+0558, ...).
ASSIGNED = st.characters(exclude_categories=("Cs", "Cn"))


# ------------------------------------------------------------- the references


NEEDS_REGEX = pytest.mark.skipif(byte_level_bpe.regex is None,
                                 reason='the regex package is not installed: pip install '
                                        '"minitrans[pretrained]"')


@pytest.fixture(scope="module")
def hf():
    pytest.importorskip("regex", reason="the regex package is not installed")
    return pytest.importorskip("tokenizers", reason="the tokenizers library is not installed")


def _byte_level_bpe(hf, pre_tokenizer, special_tokens=(), **options):
    tokenizer = hf.Tokenizer(hf.models.BPE(**options))
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.decoder = hf.decoders.ByteLevel()
    trainer = hf.trainers.BpeTrainer(vocab_size=500, show_progress=False,
                                     special_tokens=list(special_tokens),
                                     initial_alphabet=hf.pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(CORPUS, trainer)
    return tokenizer


@pytest.fixture(scope="module")
def gpt2_folder(hf, tmp_path_factory):
    """GPT-2's layout: vocab.json + merges.txt, and the library's tokenizer read from them."""
    trained = _byte_level_bpe(hf, hf.pre_tokenizers.ByteLevel(add_prefix_space=False),
                              special_tokens=["<|endoftext|>"])
    folder = tmp_path_factory.mktemp("gpt2")
    trained.model.save(str(folder))
    reference = hf.Tokenizer(hf.models.BPE.from_file(str(folder / "vocab.json"),
                                                     str(folder / "merges.txt")))
    reference.pre_tokenizer = hf.pre_tokenizers.ByteLevel(add_prefix_space=False)
    reference.decoder = hf.decoders.ByteLevel()
    return folder, reference


def _save(tokenizer, tmp_path_factory, name):
    folder = tmp_path_factory.mktemp(name)
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder, tokenizer


@pytest.fixture(scope="module")
def gpt2_json(hf, tmp_path_factory):
    tokenizer = _byte_level_bpe(hf, hf.pre_tokenizers.ByteLevel(add_prefix_space=False),
                                special_tokens=["<|endoftext|>"])
    return _save(tokenizer, tmp_path_factory, "gpt2_json")


@pytest.fixture(scope="module")
def llama3(hf, tmp_path_factory):
    """Llama 3's layout: Split on its pattern, ByteLevel without its own,
    ignore_merges, special tokens after the vocabulary and a BOS template."""
    pre = hf.pre_tokenizers
    tokenizer = _byte_level_bpe(hf, pre.Sequence([
        pre.Split(hf.Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre.ByteLevel(add_prefix_space=False, use_regex=False)]), ignore_merges=True)
    tokenizer.add_special_tokens(LLAMA3_SPECIAL)
    bos = tokenizer.token_to_id("<|begin_of_text|>")
    tokenizer.post_processor = hf.processors.Sequence([
        hf.processors.ByteLevel(trim_offsets=False),
        hf.processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                         special_tokens=[("<|begin_of_text|>", bos)])])
    return _save(tokenizer, tmp_path_factory, "llama3")


def _llama2_json(hf):
    """Llama 2's layout as its tokenizer.json has it: <unk> <s> </s>, the
    256 byte tokens, then the learned ones; Prepend + Replace normalizer."""
    tokenizer = hf.Tokenizer(hf.models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = hf.pre_tokenizers.Metaspace(prepend_scheme="always")
    trainer = hf.trainers.BpeTrainer(vocab_size=400, show_progress=False, limit_alphabet=120,
                                     special_tokens=["<unk>", "<s>", "</s>"])
    tokenizer.train_from_iterator(CORPUS, trainer)
    data = json.loads(tokenizer.to_str())
    learned = sorted(data["model"]["vocab"], key=data["model"]["vocab"].get)[3:]
    tokens = ["<unk>", "<s>", "</s>", *[f"<0x{b:02X}>" for b in range(256)], *learned]
    data["model"].update(vocab={token: i for i, token in enumerate(tokens)}, byte_fallback=True,
                         fuse_unk=True)
    for entry in data["added_tokens"]:
        entry["id"] = tokens.index(entry["content"])
    data["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
    data["pre_tokenizer"] = None
    data["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    data["post_processor"] = json.loads(hf.processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", 1)]).__getstate__())
    return data


@pytest.fixture(scope="module")
def llama2_data(hf):
    return json.dumps(_llama2_json(hf))  # trained once: training is not deterministic


@pytest.fixture(scope="module")
def llama2(hf, llama2_data, tmp_path_factory):
    return _save(hf.Tokenizer.from_str(llama2_data), tmp_path_factory, "llama2")


@pytest.fixture(scope="module")
def llama2_metaspace(hf, llama2_data, tmp_path_factory):
    """Llama 2 as newer conversions write it: no normalizer, a Metaspace
    pre-tokenizer that prepends "▁" to the start of the text only."""
    data = json.loads(llama2_data)
    data["normalizer"] = None
    data["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                             "split": False}
    data["decoder"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                       "split": False}
    tokenizer = hf.Tokenizer.from_str(json.dumps(data))
    return _save(tokenizer, tmp_path_factory, "llama2_metaspace")


LAYOUTS = ["gpt2_folder", "gpt2_json", "llama3", "llama2", "llama2_metaspace"]


@pytest.fixture(scope="module", params=LAYOUTS)
def pair(request):
    """(minitrans's tokenizer, the library's) for one layout."""
    folder, reference = request.getfixturevalue(request.param)
    return load_tokenizer(folder), reference


def _encode_both(mine, reference, text, add_special_tokens=False):
    if isinstance(mine, GPT2Tokenizer):
        return mine.encode(text), reference.encode(text, add_special_tokens=False).ids
    return (mine.encode(text, add_special_tokens=add_special_tokens),
            reference.encode(text, add_special_tokens=add_special_tokens).ids)


# ------------------------------------------------------------------ equality


@pytest.mark.parametrize("layout", LAYOUTS)
def test_load_tokenizer_chooses_by_the_files_present(layout, request):
    folder, reference = request.getfixturevalue(layout)
    mine = load_tokenizer(folder)
    assert type(mine) is (GPT2Tokenizer if layout == "gpt2_folder" else HFTokenizer)
    assert len(mine) == reference.get_vocab_size(with_added_tokens=True)


@pytest.mark.parametrize("text", HARD)
def test_the_ids_are_the_librarys_on_hard_strings(pair, text):
    mine, reference = pair
    ours, theirs = _encode_both(mine, reference, text)
    assert ours == theirs
    assert mine.decode(ours) == reference.decode(theirs, skip_special_tokens=False)


def test_decoding_gives_the_hard_strings_back(pair):
    mine, reference = pair
    for text in HARD:
        if reference.decode(reference.encode(text, add_special_tokens=False).ids,
                            skip_special_tokens=False) == text:
            assert mine.decode(_encode_both(mine, reference, text)[0]) == text, text


def test_add_special_tokens_adds_the_templates_bos_only(pair):
    mine, reference = pair
    if isinstance(mine, GPT2Tokenizer):
        pytest.skip("GPT-2's files have no post-processor")
    for text in ["", "Hello", "<s>Hello", "<|begin_of_text|> x"]:
        assert _encode_both(mine, reference, text, add_special_tokens=True)[0] == \
            reference.encode(text).ids  # the library adds them by default


def test_decode_can_skip_special_tokens(llama3):
    folder, reference = llama3
    mine = load_tokenizer(folder)
    ids = reference.encode("<|begin_of_text|>Hi<|eot_id|>", add_special_tokens=True).ids
    assert mine.decode(ids, skip_special_tokens=True) == reference.decode(ids) == "Hi"


@settings(max_examples=40, deadline=None)
@given(text=st.text(alphabet=ASSIGNED, max_size=40))
def test_random_text_gives_the_librarys_ids_and_comes_back(pair, text):
    mine, reference = pair
    ours, theirs = _encode_both(mine, reference, text)
    assert ours == theirs
    if reference.decode(theirs, skip_special_tokens=False) == text:
        assert mine.decode(ours) == text


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_random_ids_decode_as_the_library_decodes_them(pair, data):
    """Ids that need not make whole characters: bytes cut mid-character,
    byte tokens in runs that are not UTF-8, special tokens anywhere."""
    mine, reference = pair
    size = reference.get_vocab_size(with_added_tokens=True)
    ids = data.draw(st.lists(st.integers(0, size - 1), max_size=12))
    assert mine.decode(ids) == reference.decode(ids, skip_special_tokens=False)


# Steps and options that the five layouts do not use, each swapped into one
# of them: the same text must still give the library's ids and text.
SPLIT_DIGITS = {"type": "Split", "pattern": {"Regex": r"\p{N}"}, "behavior": "Isolated",
                "invert": False}
VARIANTS = [
    ("gpt2_json", "pre_tokenizer", {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": " "}, "behavior": "Removed", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
         "use_regex": False}]}),
    ("gpt2_json", "pre_tokenizer", {"type": "Sequence", "pretokenizers": [
        SPLIT_DIGITS, {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                       "use_regex": True}]}),
    ("llama2", "pre_tokenizer", {"type": "Metaspace", "replacement": "▁",
                                 "add_prefix_space": True}),  # before 0.15: "always", split
    ("llama2_metaspace", "pre_tokenizer", {"type": "Sequence", "pretokenizers": [
        {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True},
        SPLIT_DIGITS]}),
    ("llama2", "decoder", {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never",
                           "split": True}),
    # The library's Strip panics on a token shorter than its stop (Fuse makes
    # "" of no tokens) or cut at both ends past each other ("▁" with start=1,
    # stop=1): no such token reaches these.
    ("llama2", "decoder", {"type": "Sequence", "decoders": [
        {"type": "ByteFallback"}, {"type": "Strip", "content": "▁", "start": 2, "stop": 0}]}),
    ("llama2", "decoder", {"type": "Sequence", "decoders": [
        {"type": "ByteFallback"}, {"type": "Strip", "content": "▁", "start": 0, "stop": 1}]}),
    ("llama2", "decoder", None),
]


@pytest.mark.parametrize("layout, field, value", VARIANTS)
def test_other_steps_give_the_librarys_ids_and_text(request, tmp_path, layout, field, value):
    hf = request.getfixturevalue("hf")
    folder, _ = request.getfixturevalue(layout)
    data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    data[field] = value
    reference = hf.Tokenizer.from_str(json.dumps(data))
    mine = HFTokenizer.from_file(_write(tmp_path, data))
    for text in HARD:
        ids = reference.encode(text, add_special_tokens=False).ids
        assert mine.encode(text) == ids, text
        assert mine.decode(ids) == reference.decode(ids, skip_special_tokens=False), text


def test_added_tokens_marked_normalized_are_found_after_normalizing(llama2, tmp_path):
    """"zq" is looked for in the normalized text, as the normalizer writes
    it ("▁zq"), after "q<" is cut out of the raw text: "zq<" gives "▁z" "q<"."""
    hf = pytest.importorskip("tokenizers")
    folder, _ = llama2
    data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    size = len(data["model"]["vocab"])
    flags = {"single_word": False, "lstrip": False, "rstrip": False, "special": False}
    data["added_tokens"] += [{"id": size, "content": "zq", "normalized": True, **flags},
                             {"id": size + 1, "content": "q<", "normalized": False, **flags}]
    reference = hf.Tokenizer.from_str(json.dumps(data))
    mine = HFTokenizer.from_file(_write(tmp_path, data))
    for text in ["hello zq", "zq", " zq<", "zq<", "a ▁zq b", "zqzq q<q<", *HARD]:
        ids = reference.encode(text, add_special_tokens=False).ids
        assert mine.encode(text) == ids, text
        assert mine.decode(ids) == reference.decode(ids, skip_special_tokens=False), text
    assert size in mine.encode("hello zq q<") and size + 1 in mine.encode("hello zq q<")


# ------------------------------------------------------- hand-written files


def _tokenizer_json(tokens, merges, **fields):
    """A minimal tokenizer.json: no pipeline around a BPE model."""
    data = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
            "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": None,
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": None, "end_of_word_suffix": None,
                      "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": {token: i for i, token in enumerate(tokens)}, "merges": merges}}
    for key, value in fields.items():
        if key in data["model"]:
            data["model"][key] = value
        else:
            data[key] = value
    return data


def _write(folder, data, name="tokenizer.json"):
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


# A merge can make a pair of lower rank than the merges still waiting: the
# library then merges that pair first ("ab"+"a"), where GPT-2's loop would
# first merge every "a"+"b". And with ignore_merges a piece that is a token
# is taken whole though no merge makes it.
KNOWN = [
    (["a", "b", "ab", "aba"], [["ab", "a"], ["a", "b"]], {}, "abab", ["aba", "b"]),
    (["a", "b", "c", "ab", "abc"], ["a b"], {}, "abc", ["ab", "c"]),
    (["a", "b", "c", "ab", "abc"], ["a b"], {"ignore_merges": True}, "abc", ["abc"]),
    (["a", "b", "c", "ab", "abc"], ["a b"], {"ignore_merges": True}, "abcab", ["ab", "c", "ab"]),
    (["a", "aa"], ["a a"], {}, "aaaaa", ["aa", "aa", "a"]),
]


@pytest.mark.parametrize("vocab, merges, options, text, tokens", KNOWN)
def test_the_merge_order_and_ignore_merges_on_known_answers(tmp_path, vocab, merges, options,
                                                           text, tokens):
    mine = HFTokenizer.from_file(_write(tmp_path, _tokenizer_json(vocab, merges, **options)))
    assert mine.encode(text) == [vocab.index(token) for token in tokens]
    assert mine.decode(mine.encode(text)) == " ".join(tokens)  # no decoder: joined by spaces


@pytest.mark.parametrize("vocab, merges, options, text, tokens", KNOWN)
def test_the_known_answers_are_the_librarys(hf, vocab, merges, options, text, tokens):
    data = json.dumps(_tokenizer_json(vocab, merges, **options))
    assert hf.Tokenizer.from_str(data).encode(text).tokens == tokens


# "b" falls back to its byte token and "c" is unknown. The library writes a
# waiting <unk> only when a known character follows, so the byte token can
# come before the <unk> of a character that stood before it.
UNKNOWN = [(False, "accba", ["a", "<unk>", "<0x62>", "<unk>", "a"]),
           (False, "acbca", ["a", "<0x62>", "<unk>", "<unk>", "a"]),
           (True, "accba", ["a", "<0x62>", "<unk>", "a"]),
           (True, "acc", ["a", "<unk>"])]
UNKNOWN_VOCAB = ["<unk>", "a", "<0x62>"]


def _unknown_json(fuse):
    return _tokenizer_json(UNKNOWN_VOCAB, [], unk_token="<unk>", byte_fallback=True,
                           fuse_unk=fuse)


@pytest.mark.parametrize("fuse, text, tokens", UNKNOWN)
def test_unknown_characters_become_unk_where_the_library_puts_them(tmp_path, fuse, text, tokens):
    mine = HFTokenizer.from_file(_write(tmp_path, _unknown_json(fuse)))
    assert mine.encode(text) == [UNKNOWN_VOCAB.index(token) for token in tokens]


@pytest.mark.parametrize("fuse, text, tokens", UNKNOWN)
def test_the_unknown_answers_are_the_librarys(hf, fuse, text, tokens):
    assert hf.Tokenizer.from_str(json.dumps(_unknown_json(fuse))).encode(text).tokens == tokens


# ------------------------------------------------------------------ refusals


def _refused(path, *names):
    """The one-line error of loading a folder (load_tokenizer) or a
    tokenizer.json file, checked to name each of ``names``."""
    with pytest.raises(TokenizerFileError) as info:
        if path.suffix == ".json":
            HFTokenizer.from_file(path)
        else:
            load_tokenizer(path)
    message = str(info.value)
    assert "\n" not in message and isinstance(info.value, FileError)
    for name in names:
        assert name in message, (name, message)
    return message


@pytest.mark.parametrize("model_type", ["Unigram", "WordPiece", "WordLevel"])
def test_other_model_types_are_refused_by_name(tmp_path, model_type):
    data = _tokenizer_json(["a"], [])
    data["model"] = {"type": model_type, "vocab": [["a", 0.0]], "unk_id": None}
    path = _write(tmp_path, data)
    assert _refused(tmp_path) == (f"{path}: model type '{model_type}' is not supported; "
                                  "expected BPE")


BAD = [
    ("{", "line 1", "not valid JSON"),
    ('{"model": NaN}', "NaN"),
    ('{"model": {}, "model": {}}', "'model'", "twice"),
    ("[]", "(top)", "expected an object"),
    ('{"model": ' + "1" * 5000 + "}", "not usable JSON"),
    (_tokenizer_json(["a", "b"], ["a c"]), "model.merges[0]", "'c' is not in model.vocab"),
    (_tokenizer_json(["a", "b"], ["a b"]), "model.merges[0]", "'ab' is not in model.vocab"),
    (_tokenizer_json(["a", "b"], ["a b c"]), "model.merges[0]", "two non-empty tokens"),
    (_tokenizer_json(["a", "b"], [["a", 1]]), "model.merges[0]", "two non-empty tokens"),
    (_tokenizer_json(["a"], [], vocab={"a": -1}), "model.vocab['a']", "out of range"),
    (_tokenizer_json(["a"], [], vocab={"a": 2**40}), "model.vocab['a']", "out of range"),
    (_tokenizer_json(["a"], [], vocab={"a": "0"}), "model.vocab['a']", "expected an integer"),
    (_tokenizer_json(["a"], [], vocab={"a": 0, "b": 0}), "model.vocab['b']", "also given"),
    (_tokenizer_json(["a"], [], vocab=[["a", 0]]), "model.vocab", "expected an object"),
    (_tokenizer_json(["a"], [], unk_token="<unk>"), "model.unk_token", "not in model.vocab"),
    (_tokenizer_json(["a"], [], dropout=0.1), "model.dropout"),
    (_tokenizer_json(["a"], [], end_of_word_suffix="</w>"), "model.end_of_word_suffix"),
    (_tokenizer_json(["a"], [], byte_fallback="yes"), "model.byte_fallback", "a boolean"),
    (_tokenizer_json(["a"], [], surprise=1), "surprise", "not supported"),
    (_tokenizer_json(["a"], [], truncation={"max_length": 8}), "truncation"),
    (_tokenizer_json(["a"], [], normalizer={"type": "NFKC"}), "normalizer.type", "'NFKC'"),
    (_tokenizer_json(["a"], [], normalizer={"type": "Sequence", "normalizers": [
        {"type": "Lowercase"}]}), "normalizer.normalizers[0].type", "'Lowercase'"),
    (_tokenizer_json(["a"], [], pre_tokenizer={"type": "Whitespace"}), "pre_tokenizer.type"),
    (_tokenizer_json(["a"], [], pre_tokenizer={
        "type": "Split", "pattern": {"Regex": "a"}, "behavior": "Contiguous", "invert": False}),
     "pre_tokenizer.behavior", "'Contiguous'"),
    pytest.param((_tokenizer_json(["a"], [], pre_tokenizer={
        "type": "Split", "pattern": {"Regex": "("}, "behavior": "Isolated", "invert": False}),
        "pre_tokenizer.pattern.Regex"), marks=NEEDS_REGEX),
    (_tokenizer_json(["a"], [], pre_tokenizer={"type": "ByteLevel", "use_regex": 1}),
     "pre_tokenizer.use_regex"),
    pytest.param((_tokenizer_json(["a"], [], pre_tokenizer={"type": "Sequence", "pretokenizers": [
        SPLIT_DIGITS, {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first"}]}),
        "pre_tokenizer.pretokenizers[1].prepend_scheme", "first pre-tokenizer step"),
        marks=NEEDS_REGEX),
    (_tokenizer_json(["a"], [], pre_tokenizer={"type": "Metaspace", "replacement": "▁",
                                               "add_prefix_space": False}),
     "pre_tokenizer.add_prefix_space", "without a prepend_scheme"),
    (_tokenizer_json(["a"], [], decoder={"type": "WordPiece"}), "decoder.type", "'WordPiece'"),
    (_tokenizer_json(["a"], [], post_processor={"type": "BertProcessing"}),
     "post_processor.type", "'BertProcessing'"),
    (_tokenizer_json(["a"], [], post_processor={
        "type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                 {"Sequence": {"id": "A", "type_id": 0}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [7], "tokens": ["<s>"]}}}),
     "post_processor.special_tokens['<s>'].ids[0]", "not the id of a token"),
    (_tokenizer_json(["a"], [], added_tokens=[{"id": 0, "content": "<s>", "special": True}]),
     "added_tokens[0].id", "already belongs to 'a'"),
    (_tokenizer_json(["a"], [], added_tokens=[{"id": 1, "content": "<s>"},
                                              {"id": 2, "content": "<s>"}]),
     "added_tokens[1].id", "'<s>' already has id 1"),
    (_tokenizer_json(["a"], [], added_tokens=[{"id": 1, "content": "<s>", "lstrip": True}]),
     "added_tokens[0].lstrip"),
]


@pytest.mark.parametrize("case", BAD)
def test_malformed_files_are_refused_in_one_line(tmp_path, case):
    content, *names = case
    path = _write(tmp_path, content)
    message = _refused(path, *names)
    assert message.startswith(f"{path}: ")


def test_an_oversized_file_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "tokenizer.json"
    with open(path, "wb") as file:
        file.truncate(MAX_FILE_BYTES + 1)  # sparse: takes no room on the disk
    _refused(tmp_path, str(path), "more than the limit of 104,857,600 bytes")
    _refused(path, str(path), "more than the limit of 104,857,600 bytes")


def test_gpt2_files_are_checked_too(tmp_path):
    _write(tmp_path, {"a": 0, "b": 1, "ab": 2}, name="vocab.json")
    merges = _write(tmp_path, "#version: 0.2\na b\nb a\n", name="merges.txt")
    _refused(tmp_path, f"{merges}: line 3", "'ba' is not in")
    _write(tmp_path, "#version: 0.2\na  b\n", name="merges.txt")
    _refused(tmp_path, f"{merges}: line 2", "two tokens")
    (tmp_path / "merges.txt").write_bytes(b"a b\n\xff\n")
    _refused(tmp_path, "merges.txt", "line 2", "invalid UTF-8")
    _write(tmp_path, {"a": 0, "b": 1, "ab": -2}, name="vocab.json")
    _refused(tmp_path, "vocab.json: 'ab'", "out of range")


@NEEDS_REGEX
def test_gpt2_files_without_a_version_line_are_read(tmp_path):
    _write(tmp_path, {"a": 0, "b": 1, "ab": 2}, name="vocab.json")
    _write(tmp_path, "a b\r\n", name="merges.txt")
    tokenizer = load_tokenizer(tmp_path)
    assert tokenizer.encode("aba") == [2, 0]
    assert tokenizer.decode([2, 0]) == "aba"


def test_a_folder_without_a_tokenizer_is_refused(tmp_path):
    _refused(tmp_path, str(tmp_path), "expected tokenizer.json")
    _refused(tmp_path / "missing", "not a folder")


def test_decoding_an_unknown_id_is_an_error(tmp_path):
    mine = HFTokenizer.from_file(_write(tmp_path, _tokenizer_json(["a"], [])))
    with pytest.raises(ValueError, match="ids: 5 is not the id of a token"):
        mine.decode([0, 5])

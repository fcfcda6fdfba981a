"""Byte-level BPE learned from a text (data/byte_bpe_learning.py) and a
text made into token files at level "bpe" (data/text_corpus.py,
data/text_parts.py): exact round trips on any Unicode text, merges that
shorten the ids, deterministic learning checked against a learner that
recounts every pair from scratch, a sample that bounds what learning
reads, records that rebuild the tokenizer, and a text encoded in chunks
as if whole. Each check is shown failing on a planted mistake. Texts are
the lessons' own prose or written in tmp_path."""

import collections
import json
import pathlib

import numpy as np
import pytest

from minitrans.data import byte_bpe_learning as learning
from minitrans.data import text_parts
from minitrans.data.byte_bpe_learning import ByteBPE, learn_byte_merges
from minitrans.data.byte_level_bpe import BYTE_TO_CHAR
from minitrans.data.text_corpus import prepare_text
from minitrans.data.vocab import SPECIAL_TOKENS, DataError
from minitrans.files import text_stream

LESSONS = pathlib.Path(__file__).resolve().parents[2] / "lessons"
# accents (composed and combining), CJK, emoji (a ZWJ sequence), a tab before a
# word, CRLF, a separator (U+001C), numbers the two patterns class apart (½)
UNICODE = ("Ça va? Naïve café, déjà vu — e\u0301t\u00e9.\r\n東京は晴れ。 🙂👍🏽 👩‍💻\n"
           "\tcode_name = x² + ½;  it's 42!\x1c end  \n")


def prose(characters=20_000):
    """The start of the lessons' comments: English prose with code in it."""
    lines = [line for path in sorted(LESSONS.glob("*.py"))
             for line in path.read_text().splitlines() if line.startswith("#")]
    return "\n".join(lines)[:characters]


def write(tmp_path, text, name="text.txt"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


# ---- a learner that recounts every pair after each merge ------------------------------------

def reference_merges(text, num_merges, pattern, min_frequency=2):
    """The most frequent pair, recounted from scratch before each merge;
    ties to the smallest (left, right) symbol numbers."""
    counts = collections.Counter(learning.pre_tokenizer(pattern).findall(text))
    words = {piece: [BYTE_TO_CHAR[b] for b in piece.encode("utf-8")] for piece in counts}
    order = [BYTE_TO_CHAR[b] for b in range(256)]  # symbol number -> token
    merges = []
    while len(merges) < num_merges:
        pairs = collections.Counter()
        for piece, symbols in words.items():
            for pair in zip(symbols, symbols[1:]):
                pairs[pair] += counts[piece]
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], order.index(p[0]), order.index(p[1])))
        if pairs[best] < min_frequency:
            break
        merges.append(best)
        if best[0] + best[1] not in order:
            order.append(best[0] + best[1])
        for piece, symbols in words.items():
            merged, i = [], 0
            while i < len(symbols):
                if symbols[i:i + 2] == list(best):
                    merged.append(best[0] + best[1])
                    i += 2
                else:
                    merged.append(symbols[i])
                    i += 1
            words[piece] = merged
    return merges


# overlapping runs (aaaa), equal counts everywhere (ab ba), and prose
TIE_TEXT = "aaaa aaa aa ab ba ab ba abab baba xyz zyx " * 3


@pytest.mark.parametrize("text, merges", [(TIE_TEXT, 15), (prose(3000), 60)])
def test_incremental_counts_and_ties_match_a_learner_that_recounts_everything(
        text, merges, monkeypatch):
    expected = reference_merges(text, merges, "standard")
    assert len(expected) == merges
    assert learn_byte_merges([text], merges, "standard") == expected
    # the plants: ties to the larger symbol numbers; old pairs never leave the counts
    with monkeypatch.context() as plant:
        plant.setattr(learning, "heap_entry", lambda pair, n: (-n, (-pair[0], -pair[1]), pair))
        assert learn_byte_merges([text], merges, "standard") != expected

    def forgets_old_pairs(counts, old, new, freq):
        for pair in zip(new, new[1:]):
            counts[pair] += freq
    monkeypatch.setattr(learning, "count_change", forgets_old_pairs)
    assert learn_byte_merges([text], merges, "standard") != expected


def test_a_tie_goes_to_the_pair_of_the_earliest_made_symbols(monkeypatch):
    # pairs (" ", "b") (98 after 32), ("a", "a"), ("b", "b"): each seen once
    merges = learn_byte_merges(["aa bb"], 10, "standard", min_frequency=1)
    assert merges == [("Ġ", "b"), ("a", "a"), ("Ġb", "b")]
    assert learn_byte_merges(["aa bb"], 10, "standard") == []  # nothing seen twice
    monkeypatch.setattr(learning, "heap_entry", lambda pair, n: (-n, (-pair[0], -pair[1]), pair))
    assert learn_byte_merges(["aa bb"], 10, "standard", min_frequency=1)[0] == ("b", "b")


def test_learning_is_deterministic_whatever_order_the_pieces_come_in(monkeypatch):
    lines = prose(6000).splitlines()
    forward = learn_byte_merges(lines, 80)
    assert learn_byte_merges(lines, 80) == forward
    assert learn_byte_merges(lines[::-1], 80) == forward  # other word numbers, same merges
    # the plant: ties to the pair counted first
    seen = {}
    monkeypatch.setattr(learning, "heap_entry",
                        lambda pair, n: (-n, seen.setdefault(pair, len(seen)), pair))
    assert learn_byte_merges(lines[::-1], 80) != forward


# ---- encoding and decoding ------------------------------------------------------------------

@pytest.mark.parametrize("pattern", ["gpt2", "standard"])
def test_ids_decode_back_to_any_unicode_text_exactly(pattern, monkeypatch):
    tokenizer = ByteBPE(learn_byte_merges([UNICODE * 3, prose(4000)], 150, pattern), pattern)
    for text in (UNICODE, prose(4000), "🦜 unseen ☃ 𝄞\t\t x", " ", "\n\n"):
        ids = tokenizer.encode(text)
        assert min(ids) >= len(SPECIAL_TOKENS) and tokenizer.decode(ids) == text
    assert tokenizer.decode(np.array(tokenizer.encode(UNICODE), np.uint16)) == UNICODE
    # the plant: a pattern without its last alternative drops a tab before a word
    planted = learning.STANDARD_PATTERN.removesuffix(r"|\s+")
    monkeypatch.setattr(learning, "STANDARD_PATTERN", planted)
    tokenizer = ByteBPE([], "standard")
    assert tokenizer.decode(tokenizer.encode(UNICODE)) != UNICODE


def test_merges_shorten_the_ids_and_none_leaves_the_bytes():
    text = prose(8000)
    raw = ByteBPE([]).encode(text)
    assert raw == [len(SPECIAL_TOKENS) + byte for byte in text.encode("utf-8")]
    fewer = ByteBPE(learn_byte_merges([text], 300)).encode(text)
    assert len(fewer) < 0.6 * len(raw)  # a learner that merged nothing would give len(raw)


def test_the_vocabulary_is_the_specials_then_the_bytes_then_each_new_product():
    merges = [("a", "b"), ("b", "c"), ("ab", "c"), ("a", "bc")]  # "abc" made twice
    tokenizer = ByteBPE(merges, "standard")
    tokens = tokenizer.vocab.tokens
    assert tokens[:4] == list(SPECIAL_TOKENS) and tokens[4 + 0x20] == "Ġ"
    assert tokens[260:] == ["ab", "bc", "abc"] and len(tokenizer.vocab) == 263
    assert tokenizer.decode(tokenizer.encode("abc abcd")) == "abc abcd"


def test_records_rebuild_the_same_tokenizer_and_malformed_ones_are_refused():
    tokenizer = ByteBPE(learn_byte_merges([UNICODE, prose(3000)], 120))
    again = ByteBPE.from_records(json.loads(json.dumps(tokenizer.to_records())))
    assert again.vocab == tokenizer.vocab and again.merges == tokenizer.merges
    assert again.encode(UNICODE) == tokenizer.encode(UNICODE)
    records = tokenizer.to_records()
    backwards = dict(records, merges=records["merges"][::-1])  # a product used before it is made
    for bad, said in [(backwards, "expected tokens made by the bytes"),
                      (dict(records, pattern="gpt3"), "pattern: expected one of"),
                      ({"merges": records["merges"]}, "expected an object with"),
                      (dict(records, merges=[["a"]]), "merges: expected a list of pairs")]:
        with pytest.raises(DataError, match=said):
            ByteBPE.from_records(bad)


# ---- the sample -----------------------------------------------------------------------------

def test_the_sample_is_evenly_spaced_pieces_read_from_chunks_of_any_size():
    assert learning.sample_spans(90, limit=100) == [(0, 90)]
    spans = learning.sample_spans(1000, limit=100, pieces=4)
    assert spans == [(0, 25), (250, 275), (500, 525), (750, 775)]
    text = "".join(chr(0x4E00 + i) for i in range(1000))
    chunks = [text[i:i + 7] for i in range(0, 1000, 7)]
    assert learning.text_sample(chunks, spans) == [text[a:b] for a, b in spans]


def test_learning_reads_only_the_sample_of_a_larger_text(tmp_path, monkeypatch):
    monkeypatch.setattr(learning, "SAMPLE_CHARACTERS", 2000)
    monkeypatch.setattr(learning, "SAMPLE_PIECES", 4)
    text = prose(20_000)
    read = []

    def recorded(texts, *args):
        read.extend(texts)
        return learn_byte_merges(texts, *args)
    monkeypatch.setattr(learning, "learn_byte_merges", recorded)
    corpus = prepare_text(write(tmp_path, text), tmp_path / "run", 8, level="bpe", merges=50)
    spans = learning.sample_spans(len(text))
    assert read == [text[a:b] for a, b in spans] and sum(map(len, read)) == 2000
    assert "50 merges learned from 4 evenly spaced pieces of the text, 2,000 characters in all" \
        in corpus.description
    # the text outside the sample changed (other prose): the same merges
    later = prose(40_000)[20_000:]
    outside = "".join(c if any(a <= i < b for a, b in spans) else later[i]
                      for i, c in enumerate(text))
    assert outside != text
    other = prepare_text(write(tmp_path, outside, "other.txt"), tmp_path / "other", 8,
                         level="bpe", merges=50)
    assert other.tokenizer.merges == corpus.tokenizer.merges
    # the plant: no bound, and the text outside the sample counts
    monkeypatch.setattr(learning, "SAMPLE_CHARACTERS", 10**9)
    unbounded = prepare_text(write(tmp_path, outside, "other.txt"), tmp_path / "more", 8,
                             level="bpe", merges=50)
    assert unbounded.tokenizer.merges != corpus.tokenizer.merges


# ---- token files ----------------------------------------------------------------------------

def test_the_last_tenth_by_characters_is_held_out_as_ids(tmp_path):
    text = (UNICODE + prose(900)) * 3
    corpus = prepare_text(write(tmp_path, text), tmp_path / "run", 8, level="bpe", merges=100)
    held = len(text) // 10
    assert (corpus.train_characters, corpus.valid_characters) == (len(text) - held, held)
    assert corpus.tokenizer.decode(corpus.train) == text[:-held]
    assert corpus.tokenizer.decode(corpus.valid) == text[-held:]
    assert corpus.train.dtype == np.uint16 and corpus.vocab == corpus.tokenizer.vocab
    assert f"the last {held:,} characters held out, {len(corpus.valid):,} ids" \
        in corpus.description


@pytest.mark.parametrize("chunk_bytes", [1, 5, 64])
def test_a_text_read_in_small_chunks_is_encoded_as_if_whole(tmp_path, monkeypatch, chunk_bytes):
    text = (UNICODE + prose(600)) * 2
    path = write(tmp_path, text)
    whole = prepare_text(path, tmp_path / "whole", 8, level="bpe", merges=80)
    assert whole.train.tolist() == whole.tokenizer.encode(text[:whole.train_characters])
    monkeypatch.setattr(text_stream, "CHUNK_BYTES", chunk_bytes)
    monkeypatch.setattr(text_parts, "COPY_IDS", 7)  # the ids copied seven at a time
    chunked = prepare_text(path, tmp_path / "chunked", 8, level="bpe", merges=80)
    assert np.array_equal(chunked.train, whole.train)
    assert np.array_equal(chunked.valid, whole.valid)
    # the plant: a chunk cut anywhere, pieces split at its edges
    monkeypatch.setattr(text_parts, "piece_boundary", len)
    planted = prepare_text(path, tmp_path / "planted", 8, level="bpe", merges=80)
    assert planted.train.tolist() != whole.train.tolist()


def test_given_merges_encode_another_text_and_nothing_is_learned(tmp_path, monkeypatch):
    """A resumed run's merges, given: the text is encoded by them alone, as
    the run encoded it (the plant, learning again from the changed text,
    gives other merges and other ids)."""
    first = prepare_text(write(tmp_path, prose(6000)), tmp_path / "first", 8, level="bpe",
                         merges=60)
    changed = write(tmp_path, prose(12_000)[6000:], "changed.txt")
    relearned = prepare_text(changed, tmp_path / "relearned", 8, level="bpe", merges=60)
    assert relearned.tokenizer.merges != first.tokenizer.merges  # the plant differs

    def refuse(*args, **kwargs):
        raise AssertionError("merges learned again")
    monkeypatch.setattr(learning, "learn_byte_merges", refuse)
    given = prepare_text(changed, tmp_path / "given", 8, level="bpe", tokenizer=first.tokenizer)
    assert given.tokenizer is first.tokenizer and given.vocab == first.vocab
    assert "60 merges given, none learned" in given.description
    train = prose(12_000)[6000:][:given.train_characters]  # the part encoded on its own
    assert given.train.tolist() == first.tokenizer.encode(train) \
        != relearned.tokenizer.encode(train)
    for level, merges in (("char", None), ("bpe", 10)):
        with pytest.raises(ValueError, match="tokenizer: given at level 'bpe' alone"):
            prepare_text(changed, tmp_path / "no", 8, level=level, merges=merges,
                         tokenizer=first.tokenizer)


def test_a_piece_boundary_is_a_run_of_spaces_after_a_word():
    assert text_parts.piece_boundary("foo bar") == 3
    assert text_parts.piece_boundary("foo bar \n\t") == 7
    assert text_parts.piece_boundary("foo \tbar") == 3
    assert text_parts.piece_boundary("foobar") == 0 and text_parts.piece_boundary("  x") == 0
    assert text_parts.piece_boundary("x\u3000 y") == 0  # exotic whitespace: wait for more


def test_a_held_out_file_at_level_bpe_may_hold_characters_training_lacks(tmp_path):
    train, valid = write(tmp_path, prose(3000)), write(tmp_path, UNICODE * 2, "valid.txt")
    corpus = prepare_text(train, tmp_path / "run", 8, valid_path=valid, level="bpe", merges=40)
    assert corpus.tokenizer.decode(corpus.valid) == UNICODE * 2
    assert (corpus.train_characters, corpus.valid_characters) == (3000, len(UNICODE) * 2)
    with pytest.raises(DataError, match="characters the training text"):  # the char level
        prepare_text(train, tmp_path / "char", 8, valid_path=valid)


def test_a_part_of_too_few_ids_is_refused_and_leaves_no_file(tmp_path):
    path = write(tmp_path, "the cat and the hat " * 30)  # 60 characters held out
    with pytest.raises(DataError, match=r"held-out part \(the last 10%\) holds \d+ ids"):
        prepare_text(path, tmp_path / "run", 40, level="bpe", merges=20)
    assert list((tmp_path / "run").iterdir()) == []
    prepare_text(path, tmp_path / "run", 40, level="bpe", merges=0)  # bytes: 60 ids fit


def test_a_text_that_grows_between_its_readings_is_refused(tmp_path, monkeypatch):
    path = write(tmp_path, prose(2000))

    def grown(path, *args, **kwargs):  # the encoding reading finds one more character
        yield from text_stream.text_chunks(path, *args, **kwargs)
        yield "a"
    monkeypatch.setattr(text_parts, "text_chunks", grown)
    with pytest.raises(ValueError, match="2,001 characters on its second reading, 2,000 on its"):
        prepare_text(path, tmp_path / "run", 8, level="bpe", merges=10)
    assert list((tmp_path / "run").iterdir()) == []


def test_the_two_patterns_differ_only_where_the_docstring_says(monkeypatch):
    gpt2, standard = learning.pre_tokenizer("gpt2"), learning.pre_tokenizer("standard")
    assert gpt2.findall(" x² ½ it's 42!\x1c end") == [" x", "²", " ½", " it", "'s", " 42",
                                                      "!\x1c", " end"]
    assert standard.findall(" x² ½ it's 42!\x1c end") == [" x²", " ½", " it", "'s", " 42", "!",
                                                          "\x1c", " end"]
    assert gpt2.findall(prose(5000)) == standard.findall(prose(5000))
    records = ByteBPE(learn_byte_merges([UNICODE], 20, "gpt2"), "gpt2").to_records()
    monkeypatch.setattr(learning, "regex", None)  # the regex package not installed
    assert learning.default_pattern() == "standard"
    tokenizer = ByteBPE(learn_byte_merges([UNICODE], 20))
    assert tokenizer.to_records()["pattern"] == "standard"
    with pytest.raises(RuntimeError, match="needs the regex package"):
        ByteBPE.from_records(records)

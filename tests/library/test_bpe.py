"""Byte-pair encoding (minitrans.data.bpe): the same merges and segmentation
as the authors' reference implementation, subword-nmt, and a lossless round
trip for any text."""

import collections
import functools
import io
import json
import random

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from minitrans.data import bpe as bpe_module
from minitrans.data.bpe import BPE, learn_merges
from minitrans.data.tasks import load_task
from minitrans.data.vocab import DataError

TOY = ["low low low low low", "lower lower", "newest newest newest newest newest newest",
       "widest widest widest"]  # the paper's own example, its counts as lines
TIES = ["ab ab cd cd ef ef", "xy xy yx yx", "b a a b"]  # many pairs of equal count


def _translate_lines():
    task = load_task("translate")
    return [text for pair in task.train[:3000] for text in pair]


def _random_lines(seed, count=300, letters="abcde", num_words=60):
    """Short words over a small alphabet: many repeated symbols and ties."""
    rng = random.Random(seed)
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(1, 8)))
             for _ in range(num_words)]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(1, 6))) for _ in range(count)]


# ---------------------------------------------------------- the reference


def reference_merges(lines, num_merges, min_frequency=2):
    """subword-nmt's learn-bpe on the same lines, its merges as pairs."""
    learn_bpe = pytest.importorskip("subword_nmt.learn_bpe", reason="subword-nmt not installed")
    codes = io.StringIO()
    learn_bpe.learn_bpe(io.StringIO("\n".join(lines) + "\n"), codes, num_merges,
                        min_frequency=min_frequency)
    header, *rows = codes.getvalue().splitlines()
    assert header == "#version: 0.2"  # the word-final "</w>" handling we follow
    return [tuple(row.split(" ")) for row in rows]


def reference_segments(merges, text):
    """subword-nmt's apply-bpe on one line, in our token form: its "@@"
    continuation marks removed and "</w>" put on the last piece of a word."""
    apply_bpe = pytest.importorskip("subword_nmt.apply_bpe", reason="subword-nmt not installed")
    codes = io.StringIO("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    tokens = []
    for piece in apply_bpe.BPE(codes).segment(text).split(" "):
        tokens.append(piece[:-2] if piece.endswith("@@") else piece + "</w>")
    return tokens


def assert_same_merges(ours, reference):
    """Equal merge lists, or the first place where they part."""
    for i, (a, b) in enumerate(zip(ours, reference)):
        assert a == b, f"merge {i}: ours {a}, the reference's {b}"
    assert len(ours) == len(reference), f"{len(ours)} merges, the reference {len(reference)}"


# ---------------------------------------------------------- learning


@pytest.mark.parametrize("name, lines, num_merges, min_frequency", [
    ("toy", TOY, 20, 2),
    ("toy, every pair", TOY, 100, 1),
    ("ties", TIES, 10, 1),
    ("translate", _translate_lines(), 500, 2),
    ("random", _random_lines(0), 300, 2),
    ("random, min frequency 5", _random_lines(1), 300, 5),
])
def test_same_merges_as_subword_nmt(name, lines, num_merges, min_frequency):
    ours = learn_merges(lines, num_merges, min_frequency=min_frequency)
    assert ours, name
    assert_same_merges(ours, reference_merges(lines, num_merges, min_frequency))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.text("abc", min_size=1, max_size=7), min_size=1, max_size=5)
                .map(" ".join), min_size=1, max_size=20),
       st.integers(1, 3))
def test_same_merges_as_subword_nmt_on_random_corpora(lines, min_frequency):
    assume(any(len(word) > 1 for line in lines for word in line.split()))  # else it fails
    assert_same_merges(learn_merges(lines, 40, min_frequency),
                       reference_merges(lines, 40, min_frequency))


def test_a_wrong_tie_break_is_caught(monkeypatch):
    """The comparison can fail: with ties broken the other way (the pair
    that sorts first), the merges differ from the reference's."""
    reference = reference_merges(TIES, 10, 1)
    monkeypatch.setattr(bpe_module, "_last_first", lambda pair: pair)
    with pytest.raises(AssertionError, match="merge 0"):
        assert_same_merges(learn_merges(TIES, 10, 1), reference)


def test_the_worked_example_of_the_docstring():
    assert learn_merges(["low low lower"], 10) == [("l", "o"), ("lo", "w</w>")]
    assert BPE.learn(["low low lower"], 10).encode("lowest") == ["lo", "w", "e", "s", "t</w>"]


def test_word_counts_give_the_same_merges_as_lines():
    counts = collections.Counter(word for line in TOY for word in line.split())
    assert learn_merges(counts, 20) == learn_merges(TOY, 20)


def test_stops_at_num_merges_and_min_frequency():
    assert len(learn_merges(TOY, 3)) == 3
    assert learn_merges(TOY, 0) == []
    assert learn_merges([], 10) == [] and learn_merges(["a b c"], 10) == []  # no pairs at all
    # Every pair left is seen once: min_frequency=2 stops, 1 goes on.
    assert learn_merges(["abc"], 10) == []
    assert learn_merges(["abc"], 10, min_frequency=1) == [("b", "c</w>"), ("a", "bc</w>")]


@pytest.mark.parametrize("args, match", [
    ((TOY, -1), "num_merges"),
    ((TOY, 2.5), "num_merges"),
    ((TOY, 10, 0), "min_frequency"),
    (("low lower", 10), "single string"),
    (([b"low"], 10), "line 1"),
    (({"a b": 2}, 10), "without whitespace"),
    (({"ab": 0}, 10), "corpus\\['ab'\\]"),
])
def test_bad_arguments_are_named(args, match):
    with pytest.raises(ValueError, match=match):
        learn_merges(*args)


def test_learns_a_large_corpus_in_seconds():
    lines = _random_lines(2, count=20000, letters="abcdefghijklmnop", num_words=5000)
    assert len(learn_merges(lines, 3000)) > 1000  # about a second; subword-nmt takes longer


# ---------------------------------------------------------- applying


@pytest.mark.parametrize("corpus, text", [
    (TOY, "lowest newer wider low"),
    (_translate_lines(), "the small teacher helps a bird xq lo mirran ka un moruta"),
    (_random_lines(3), " ".join(_random_lines(4, count=40))),
])
def test_same_segmentation_as_subword_nmt(corpus, text):
    merges = learn_merges(corpus, 200)
    assert BPE(merges).encode(text) == reference_segments(merges, text)


def test_unseen_characters_stay_single_tokens():
    bpe = BPE.learn(TOY, 20)
    assert bpe.encode("lowé ωx")[-3:] == ["é</w>", "ω", "x</w>"]
    assert bpe.decode(bpe.encode("lowé ωx")) == "lowé ωx"


def test_empty_text_and_whitespace_normalised():
    bpe = BPE.learn(TOY, 20)
    assert bpe.encode("") == [] and bpe.decode([]) == ""
    assert bpe.decode(bpe.encode("  low\t\tlower \n")) == "low lower"


def test_a_word_holding_the_marker_itself_still_round_trips():
    bpe = BPE([("<", "/"), ("</", "w"), ("</w", ">")])  # merges that would make "</w>"
    text = "a</w>b </w></w> x</w>"
    assert bpe.decode(bpe.encode(text)) == text


def test_decode_keeps_a_word_cut_off_and_refuses_non_strings():
    bpe = BPE.learn(TOY, 20)
    assert bpe.decode(["low</w>", "ne", "w"]) == "low new"
    with pytest.raises(DataError, match=r"tokens\[1\]"):
        bpe.decode(["low</w>", 3])


def test_split_and_join_are_encode_and_decode():
    bpe = BPE.learn(TOY, 20)
    assert bpe.split("newest lower") == bpe.encode("newest lower")
    assert bpe.join(bpe.split("newest lower")) == "newest lower"


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=60), st.lists(st.sampled_from(
    ["</w>", "<", "/", "w", ">", "a", "b", " ", "\t", "\n", "é"]), max_size=20).map("".join)))
def test_round_trip_on_any_text(text):
    bpe = _round_trip_bpe()
    assert bpe.decode(bpe.encode(text)) == " ".join(text.split())


@functools.cache
def _round_trip_bpe():
    return BPE.learn(TOY + _random_lines(5, letters="ab<>/w"), 100, min_frequency=1)


# ---------------------------------------------------------- saving


def test_json_round_trip():
    bpe = BPE.learn(_translate_lines(), 100)
    assert BPE.from_json(bpe.to_json()) == bpe
    assert BPE.from_json(bpe.to_json()).encode("the cat") == bpe.encode("the cat")


@pytest.mark.parametrize("record, match", [
    ("{not json", "not valid JSON"),
    ("[]", "expected an object"),
    ('{"kind": "bpe", "end_of_word": "</w>"}', "merges: expected a list"),
    ('{"kind": "wordpiece", "end_of_word": "</w>", "merges": []}', "kind"),
    ('{"kind": "bpe", "end_of_word": "@@", "merges": []}', "end_of_word"),
    ('{"kind": "bpe", "end_of_word": "</w>", "merges": [], "vocab": 1}', "unexpected fields"),
    ('{"kind": "bpe", "end_of_word": "</w>", "merges": [["a", "b"], ["a"]]}', r"merges\[1\]"),
    ('{"kind": "bpe", "end_of_word": "</w>", "merges": [["a", 7]]}', r"merges\[0\]"),
    ('{"kind": "bpe", "end_of_word": "</w>", "merges": [["a b", "c"]]}', "whitespace"),
    ('{"kind": "bpe", "end_of_word": "</w>", "merges": [["", "c"]]}', r"merges\[0\]"),
    ('{"kind": "bpe", "end_of_word": "</w>", "merges": "ab"}', "merges: expected a list"),
])
def test_a_malformed_record_names_the_field(record, match):
    with pytest.raises(DataError, match=match):
        BPE.from_json(record)


def test_stored_form_is_plain_json():
    stored = json.loads(BPE([("l", "o")]).to_json())
    assert stored == {"kind": "bpe", "end_of_word": "</w>", "merges": [["l", "o"]]}

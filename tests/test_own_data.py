"""benchmarks/own_data.py, the bring-your-own-corpus benchmark: its corpora
are what they claim (distinct sources, English number words to digits,
written dates to ISO dates), it reads the train command's output, and a
smoke run (200 pairs, 3 steps) writes both corpora, trains on each with
``minitrans train translate --data FILE`` in a folder of its own and prints
the table. Whether the real run reaches 95% is measured by running it,
never here.
"""

import datetime
import importlib.util
import os
import sys

import pytest

from minitrans.core import backend
from minitrans.data import read_tsv
from minitrans.data.language_tasks import number_words

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
sys.path.insert(0, BENCHMARKS)

import own_data  # noqa: E402

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("num2words") is None or importlib.util.find_spec("babel") is None,
    reason='the corpora need num2words and babel: pip install "minitrans[data]"',
)


def test_the_number_corpus_is_english_words_to_digits_with_distinct_sources():
    corpus = own_data.number_corpus(backend.host_rng(0), 2000)
    assert len(corpus) == 2000 and len({source for source, _ in corpus}) == 2000
    for source, target in corpus:
        assert 0 <= int(target) <= 999_999 and number_words(int(target), "en") == source
    digit_counts = {len(target) for _, target in corpus}
    assert digit_counts == {1, 2, 3, 4, 5, 6}  # short numbers too, not only six digits
    assert own_data.number_corpus(backend.host_rng(0), 50) == corpus[:50]


def test_the_date_corpus_is_written_dates_to_iso_dates_with_distinct_sources():
    corpus = own_data.date_corpus(backend.host_rng(0), 500)
    assert len({source for source, _ in corpus}) == 500
    assert all(datetime.date.fromisoformat(target).isoformat() == target for _, target in corpus)


def test_the_output_of_a_run_is_read():
    lines = [
        "task tsv: translation pairs from numbers.tsv (char level); held out 2000 ...",
        "step 500: held-out loss 0.1, token accuracy 99.0%, exact match 90.0% (1000 pairs)",
        "held-out exact match 97.3% on 2000 pairs after 1500 steps",
    ]
    assert own_data.parse_run(lines) == {
        "level": "char",
        "exact_match": 0.973,
        "held_out": 2000,
        "steps": 1500,
    }
    assert own_data.parse_run(["minitrans: error: x"])["exact_match"] is None
    assert own_data.verdict(0.973, smoke=False) == "yes"
    assert own_data.verdict(0.949, smoke=False) == "NO"
    assert own_data.verdict(None, smoke=False).startswith("NO")


def test_a_smoke_run_trains_on_both_corpora_and_prints_the_table(tmp_path, capsys):
    keep = tmp_path / "kept"
    status = own_data.main(["--pairs", "200", "--steps", "3", "--keep", str(keep)])
    table = capsys.readouterr().out
    assert status == 0, table
    assert "| corpus (first pair) | pairs | level chosen | steps |" in table
    for name in ("numbers", "dates"):
        assert len(read_tsv(keep / f"{name}.tsv")) == 200
        assert (keep / name / "runs" / name / "checkpoint.npz").exists()  # runs/<data stem>
        row = next(line for line in table.splitlines() if line.startswith(f"| {name} "))
        assert "| 200 |" in row and "| 3 |" in row and "not judged (smoke run)" in row
    with pytest.raises(SystemExit):  # the kept folder is not overwritten
        own_data.main(["--pairs", "200", "--steps", "3", "--keep", str(keep)])

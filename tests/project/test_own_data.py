"""benchmarks/own_data.py, the bring-your-own-corpus benchmark: its corpora
(benchmarks/harness/own_corpora.py) are what they claim, with distinct
sources; it reads the train command's output; it judges best.npz on
held-out pairs the run never evaluated on; and a smoke run (one corpus, 2
steps) writes it, trains on it with ``minitrans train translate --data
FILE`` in a folder of its own, evaluates, prints the table and writes it
into the results file of the folder ``--results`` names. Whether the real
run reaches 95% is measured by running it, never here.
"""

import datetime
import decimal
import importlib.util
import pathlib
import sys

import pytest

from minitrans.core import backend
from minitrans.data import read_tsv, write_tsv
from minitrans.data.language_tasks import number_words
from minitrans.data.tasks import task_from_tsv
from minitrans.training.trainer import TrainConfig

BENCHMARKS = str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks")
sys.path.insert(0, BENCHMARKS)

import own_data  # noqa: E402

from harness import own_corpora  # noqa: E402

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("num2words") is None or importlib.util.find_spec("babel") is None,
    reason='the corpora need num2words and babel: pip install "minitrans[data]"',
)


def without_forms(words):
    """Number words with the choices of ``own_corpora.surface_form`` undone."""
    return words.replace(" and ", " ").replace("-", " ").replace(",", "")


def test_the_number_corpora_are_number_words_and_digits_both_ways():
    corpus = own_corpora.number_corpus(backend.host_rng(0), 2000)
    assert len({source for source, _ in corpus}) == 2000
    for source, target in corpus:
        assert 0 <= int(target) <= 9_999_999
        assert without_forms(source) == without_forms(number_words(int(target), "en"))
    assert {len(target) for _, target in corpus} == set(range(1, 8))  # short numbers too
    full = [(s, number_words(int(t), "en")) for s, t in corpus]
    forms = {(" and " in s, "-" in s, "," in s) for s, words in full
             if " and " in words and "-" in words and "," in words}
    assert len(forms) == 8  # every surface form
    reverse = own_corpora.number_words_corpus(backend.host_rng(0), 500)
    assert all(target == number_words(int(source), "en") for source, target in reverse)
    small = own_corpora.number_corpus(backend.host_rng(0), 50)
    assert own_corpora.number_corpus(backend.host_rng(0), 50) == small  # same seed, same pairs


def test_the_date_corpus_is_written_dates_to_iso_dates_in_many_formats():
    corpus = own_corpora.date_corpus(backend.host_rng(0), 3000)
    assert len({source for source, _ in corpus}) == 3000
    for source, target in corpus:
        day = datetime.date.fromisoformat(target)
        assert 1950 <= day.year <= 2049 and str(day.year)[2:] in source
    assert any("年" in source for source, _ in corpus)  # Japanese
    assert any("марта" in source or "мар." in source for source, _ in corpus)  # Russian
    assert any(source.count("/") == 2 for source, _ in corpus)  # short, numeric forms


def test_iso9_is_one_letter_for_one_letter_and_the_corpus_follows_it():
    assert len(set(own_corpora.ISO9.values())) == len(own_corpora.ISO9)  # reversible
    assert own_corpora.transliterate("Щёлково") == "Ŝëlkovo"
    assert own_corpora.transliterate("Київ") == "Kiïv"
    assert own_corpora.transliterate("Paris") is None  # not Cyrillic: no transliteration
    corpus = own_corpora.transliteration_corpus(backend.host_rng(0), 900)
    names = set(own_corpora.cyrillic_names())
    assert sum(source in names for source, _ in corpus) == 300  # a third are names
    assert all(own_corpora.transliterate(source) == target for source, target in corpus)


def test_the_unit_corpus_moves_the_decimal_point_by_the_prefixes():
    symbols = {symbol: power for units in own_corpora.UNITS.values() for _, symbol, power in units}
    corpus = own_corpora.unit_corpus(backend.host_rng(0), 2000)
    checked = 0
    for source, target in corpus:
        words = source.split()  # "3.5 km in m": digits and symbols
        amount, unit, wanted = words[0], words[-3], words[-1]
        if len(words) == 4 and unit in symbols and amount[0].isdigit():
            value, result_unit = target.split()
            assert result_unit == wanted
            scaled = decimal.Decimal(amount).scaleb(symbols[unit] - symbols[wanted])
            assert decimal.Decimal(value) == scaled and "E" not in value
            checked += 1
    assert checked > 300 and any(" in millilitres" in s for s, _ in corpus)


def test_the_inflection_corpus_is_lemminflect_s_lexicon():
    lemminflect = pytest.importorskip("lemminflect")
    corpus = own_corpora.inflection_corpus(backend.host_rng(0), 2000)
    tags = {name: (upos, tag) for upos, forms in own_corpora.FORMS.items()
            for tag, name in forms.items()}
    for source, target in corpus:
        lemma, form = source.split()
        upos, tag = tags[form]
        assert lemminflect.getAllInflections(lemma, upos=upos)[tag] == (target,)
    assert {source.split()[1] for source, _ in corpus} == set(tags)


def test_the_output_of_a_run_is_read():
    lines = [
        "task corpus: translation pairs from numbers.tsv (bpe level); held out 2000 ...",
        "model: 1,015,403 parameters, ModelConfig(vocab_size=235, d_model=128, h=4)",
        "chosen for this corpus: 96 merges (every pair of symbols seen at least 180 times, ...)",
        "step 500: held-out loss 0.1, token accuracy 99.0%, exact match 90.0% (1000 pairs)",
        "step 1500: held-out exact match has not improved for 4 evaluations (best ...)",
        "held-out exact match 97.3% on 1000 pairs after 1500 steps",
        "checkpoint: runs/x/checkpoint.npz (last), runs/x/best.npz (best held-out exact "
        "match, 97.5% at step 500)",
    ]
    assert own_data.parse_run(lines) == {
        "level": "bpe", "merges": 96, "d_model": 128, "parameters": "1,015,403",
        "steps": 1500, "stopped": "held-out exact match has not improved", "selection": 0.975,
    }
    assert own_data.parse_run(["minitrans: error: x"])["selection"] is None
    assert own_data.parse_evaluation(["50 pairs from x.tsv", "exact match: 58.0%"]) == 0.58
    assert own_data.verdict(0.973, smoke=False) == "yes"
    assert own_data.verdict(0.949, smoke=False) == "NO"
    assert own_data.verdict(None, smoke=False).startswith("NO")


def test_the_unseen_held_out_pairs_are_those_the_train_command_never_evaluates(tmp_path):
    path = tmp_path / "c.tsv"
    write_tsv(path, [(f"s{i}", f"t{i}") for i in range(12_000)])
    task = task_from_tsv(path, level="char")
    unseen = own_data.unseen_pairs(path)
    assert unseen == task.valid[own_data.SELECTION_PAIRS:] and len(unseen) == 200
    assert not set(unseen) & set(task.valid[: TrainConfig().eval_pairs])


def test_a_smoke_run_trains_evaluates_and_prints_the_table(tmp_path, capsys):
    keep = tmp_path / "kept"
    arguments = ["--pairs", "11000", "--steps", "2", "--corpora", "units", "--results",
                 str(tmp_path / "results")]
    status = own_data.main([*arguments, "--keep", str(keep)])
    table = capsys.readouterr().out
    assert status == 0, table
    assert "| corpus (first pair) | pairs | level, merges | d_model, parameters | steps |" in table
    assert len(read_tsv(keep / "units.tsv")) == 11000
    assert (keep / "units" / "runs" / "units" / "best.npz").exists()  # runs/<data stem>
    row = next(line for line in table.splitlines() if line.startswith("| units "))
    assert "| 11,000 |" in row and "| bpe, " in row and "| 128, " in row
    assert "| 2 | step budget |" in row and "% of 100 |" in row  # best.npz evaluated
    assert "not judged (smoke run)" in row
    (written,) = (tmp_path / "results").glob("*.md")
    assert row in written.read_text(encoding="utf-8").split("\n- Command: ")[1]
    with pytest.raises(SystemExit):  # the kept folder is not overwritten
        own_data.main([*arguments, "--keep", str(keep)])

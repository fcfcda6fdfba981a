"""The real-language tasks (minitrans.data.language_tasks): numbers, digits to
number words through num2words, and dates, written-out dates to ISO 8601
through babel. Both libraries are optional (``pip install
"minitrans[data]"``): the tests that need one are skipped, with the reason,
where it is missing; the missing-library message is tested by hiding it.

Before these tasks existed, ``load_task("numbers")`` and ``load_task("dates")``
raised "task: expected one of ..." and ``minitrans train numbers`` was refused
by the argument parser.
"""

import datetime
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

from minitrans.core import backend
from minitrans.data import language_tasks
from minitrans.data.language_tasks import date_pairs, number_pairs, number_words
from minitrans.data.tasks import TASKS, load_task
from minitrans.cli.main import build_parser
from minitrans.training import experiment
from minitrans.training.trainer import TrainConfig

ROOT = pathlib.Path(__file__).resolve().parents[2]
HAS_NUM2WORDS = importlib.util.find_spec("num2words") is not None
HAS_BABEL = importlib.util.find_spec("babel") is not None
needs_num2words = pytest.mark.skipif(
    not HAS_NUM2WORDS, reason='needs num2words: pip install "minitrans[data]"'
)
needs_babel = pytest.mark.skipif(not HAS_BABEL, reason='needs babel: pip install "minitrans[data]"')

# German number words: units, then "und", then tens ("fünfundvierzig" is 5 and 40)
GERMAN_UNITS = {
    1: "ein",
    2: "zwei",
    3: "drei",
    4: "vier",
    5: "fünf",
    6: "sechs",
    7: "sieben",
    8: "acht",
    9: "neun",
}
GERMAN_TENS = {
    2: "zwanzig",
    3: "dreißig",
    4: "vierzig",
    5: "fünfzig",
    6: "sechzig",
    7: "siebzig",
    8: "achtzig",
    9: "neunzig",
}


def rng(seed=0):
    return backend.host_rng(seed)


def parse_number_source(source):
    """ "de: 345" -> ("de", 345)."""
    language, digits = source.split(": ")
    return language, int(digits)


# ------------------------------------------------------------------ numbers


@needs_num2words
def test_number_pairs_are_the_same_for_a_seed_and_different_for_another():
    assert number_pairs(rng(0), 50) == number_pairs(rng(0), 50)
    assert number_pairs(rng(1), 50) != number_pairs(rng(0), 50)


@needs_num2words
@pytest.mark.parametrize(
    "number, language, words",
    [
        (345, "en", "three hundred and forty-five"),
        (345, "de", "dreihundertfünfundvierzig"),
        (345, "fr", "trois cent quarante-cinq"),
        (45, "de", "fünfundvierzig"),
        (99, "fr", "quatre-vingt-dix-neuf"),
    ],
)
def test_number_words(number, language, words):
    assert number_words(number, language) == words


@needs_num2words
def test_number_targets_are_the_words_of_their_sources_in_the_tagged_language():
    pairs = number_pairs(rng(), 300)
    assert {parse_number_source(s)[0] for s, _ in pairs} == set(language_tasks.NUMBER_LANGUAGES)
    for source, target in pairs:
        language, number = parse_number_source(source)
        assert 0 <= number <= language_tasks.NUMBER_HIGH
        assert target == number_words(number, language)


@needs_num2words
def test_german_numbers_put_units_before_tens():
    """Every German target whose last two digits are 21..99 (not a round
    ten) ends in unit + "und" + tens: the model must cross the digits."""
    german = [
        (parse_number_source(s)[1], t)
        for s, t in load_task("numbers").train
        if s.startswith("de: ")
    ]
    crossed = [(n, t) for n, t in german if n % 100 > 20 and n % 10]
    assert len(crossed) > 1000
    for number, words in crossed:
        units, tens = number % 10, number // 10 % 10
        assert words.endswith(GERMAN_UNITS[units] + "und" + GERMAN_TENS[tens]), (number, words)


@needs_num2words
def test_one_language_without_a_tag():
    pairs = number_pairs(rng(), 20, languages=("en",), high=999_999, tag=False)
    assert all(number_words(int(s), "en") == t for s, t in pairs)
    with pytest.raises(ValueError, match="tag"):
        number_pairs(rng(), 20, tag=False)


@needs_num2words
@pytest.mark.parametrize(
    "settings, name",
    [
        ({"languages": ("xx",)}, "languages"),
        ({"languages": ()}, "languages"),
        ({"high": -1}, "high"),
        ({"count": 2.5}, "count"),
    ],
)
def test_bad_number_settings(settings, name):
    arguments = {"count": 5, **settings}
    with pytest.raises(ValueError, match=name):
        number_pairs(rng(), **arguments)


# -------------------------------------------------------------------- dates


def date_written_as(day, source):
    """Whether ``source`` is ``day`` in one of the task's locales and formats."""
    return any(
        language_tasks.written_date(day, locale, date_format) == source
        for locale in language_tasks.DATE_LOCALES
        for date_format in language_tasks.DATE_FORMATS
    )


@needs_babel
def test_date_pairs_are_the_same_for_a_seed_and_different_for_another():
    assert date_pairs(rng(0), 50) == date_pairs(rng(0), 50)
    assert date_pairs(rng(1), 50) != date_pairs(rng(0), 50)


@needs_babel
def test_every_date_target_is_the_iso_date_its_source_was_written_from():
    pairs = date_pairs(rng(), 300)
    for source, target in pairs:
        day = datetime.date.fromisoformat(target)  # a valid ISO 8601 date ...
        assert day.isoformat() == target
        assert language_tasks.FIRST_DAY <= day <= language_tasks.LAST_DAY
        assert date_written_as(day, source), (source, target)  # ... that reads as the source
    written = " ".join(source for source, _ in pairs)
    for word in ("März", "mars", "marzo", "March"):  # several languages, month names in words
        assert word in written or word.lower() in written.lower()


@needs_babel
def test_chosen_locales_and_formats():
    pairs = date_pairs(rng(), 20, locales=("de",), formats=("long",))
    for source, target in pairs:
        assert source == language_tasks.written_date(
            datetime.date.fromisoformat(target), "de", "long"
        )
    assert language_tasks.written_date(datetime.date(2021, 3, 3), "de", "long") == "3. März 2021"
    with pytest.raises(ValueError, match="formats"):
        date_pairs(rng(), 5, formats=("longest",))


# ------------------------------------------------------------ the two tasks

LANGUAGE_TASKS = [
    pytest.param("numbers", marks=needs_num2words),
    pytest.param("dates", marks=needs_babel),
]


@pytest.mark.parametrize("name", LANGUAGE_TASKS)
def test_the_tasks_are_registered_with_defaults(name):
    task = load_task(name, num_train=300, num_valid=40)
    assert task.name == name and task.kind == "seq2seq" and task.tokenizer.level == "char"
    assert TASKS[name].description == task.description and task.description.startswith(name)
    assert experiment.TASK_DEFAULTS[name]["train"]["target_exact_match"] >= 0.99
    assert build_parser().parse_args(["train", name]).task == name


@pytest.mark.parametrize("name", LANGUAGE_TASKS)
def test_held_out_sources_are_never_trained_on(name):
    task = load_task(name, num_train=3000, num_valid=1000)
    train_sources = {source for source, _ in task.train}
    assert len(train_sources) == 3000 and len({source for source, _ in task.valid}) == 1000
    assert not train_sources & {source for source, _ in task.valid}


@pytest.mark.parametrize("name", LANGUAGE_TASKS)
def test_a_short_run_trains_and_evaluates(tmp_path, name):
    config = TrainConfig(
        task=name,
        steps=2,
        batch_size=8,
        warmup=1,
        eval_every=2,
        eval_pairs=5,
        out_dir=str(tmp_path),
    )
    trainer = experiment.new_trainer(
        config,
        {"d_model": 16, "h": 2, "N": 1, "d_ff": 32},
        progress=False,
        log=lambda message: None,
    )
    result = trainer.fit()
    assert trainer.step == 2 and result["pairs"] == 5 and (tmp_path / "checkpoint.npz").exists()


# ----------------------------------------------------- a missing library


@pytest.mark.parametrize(
    "name, hidden", [("numbers", ["num2words"]), ("dates", ["babel", "babel.dates"])]
)
def test_a_missing_library_says_how_to_install_it(monkeypatch, name, hidden):
    for module in hidden:
        monkeypatch.setitem(sys.modules, module, None)  # "import babel" now fails
    with pytest.raises(RuntimeError) as info:
        load_task(name)
    message = str(info.value)
    assert "\n" not in message and hidden[0] in message and name in message
    assert 'pip install "minitrans[data]"' in message


def test_the_command_line_says_how_to_install_a_missing_library(tmp_path):
    """A planted num2words that fails to import stands in for one not installed."""
    (tmp_path / "num2words.py").write_text("raise ImportError('not installed')\n")
    path = os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, "-m", "minitrans", "train", "numbers", "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        timeout=120,
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        'minitrans: error: the numbers task needs num2words: pip install "minitrans[data]"'
    ]


def test_importing_minitrans_needs_neither_library(tmp_path):
    for module in ("num2words", "babel"):
        (tmp_path / f"{module}.py").write_text("raise ImportError('not installed')\n")
    path = os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")])
    code = "import minitrans, minitrans.data.tasks, minitrans.cli.main; print('ok')"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        timeout=120,
    )
    assert result.stdout == "ok\n", result.stderr


def test_the_task_targets_benchmark_checks_every_registered_task():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import task_targets

    assert list(task_targets.TARGETS) == list(TASKS)
    assert task_targets.TARGETS["numbers"][0] == task_targets.TARGETS["dates"][0] == 0.99

"""Two tasks in real languages, generated here with no download.

    numbers  digits to number words, "de: 345" -> "dreihundertfünfundvierzig"
    dates    a date written out in one of five languages -> ISO 8601,
             "3. März 2021" -> "2021-03-03"

The words come from two libraries that carry their languages' rules:
``num2words`` (number words) and ``babel`` (dates, from the Unicode CLDR
data). Both are optional, ``pip install "minitrans[data]"``: they are
imported only when one of these tasks is built, and a missing one is
reported as a RuntimeError saying how to install it.

Why these two: a digit string and a date have exactly one right answer, so
exact match judges a model fairly, and yet each needs more than copying.
German writes units before tens (45 is "fünfundvierzig", five-and-forty,
a crossing of the digits' order), French counts in twenties ("quatre-vingt-
dix-neuf", four-twenty-ten-nine, for 99), and a date's month is a word to
look up and its day, month and year come in each language's own order.

The generators take a NumPy Generator and return (source, target) pairs,
the same pairs for the same seed; ``minitrans.data.tasks`` registers the two
tasks (``load_task("numbers")``) and keeps validation sources out of
training.
"""

import datetime
import functools
import importlib
from typing import Callable, NamedTuple

from minitrans.core import checks

INSTALL = 'pip install "minitrans[data]"'

NUMBER_LANGUAGES = ("en", "de", "fr")
NUMBER_HIGH = 9999  # 0..9999: hundreds and thousands in every language, 30,000 sources

DATE_LOCALES = ("en", "de", "fr", "es", "it")
FORMAT_NAMES = ("short", "medium", "long", "full")  # babel's names
DATE_FORMATS = ("medium", "long", "full")  # "Mar 3, 2021", "March 3, 2021", "Wednesday, ..."
FIRST_DAY = datetime.date(1900, 1, 1)
LAST_DAY = datetime.date(2099, 12, 31)

NUMBERS_DESCRIPTION = (
    "numbers: digits to number words in English, German or French, "
    "'de: 345' -> 'dreihundertfünfundvierzig' (num2words)"
)
DATES_DESCRIPTION = (
    "dates: dates written out in English, German, French, Spanish or Italian to ISO 8601, "
    "'3. März 2021' -> '2021-03-03' (babel's CLDR data)"
)


def require(module, task):
    """Import an optional library, or say in one line how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise RuntimeError(f"the {task} task needs {module}: {INSTALL}") from None


# ------------------------------------------------------------------ numbers


def number_words(number, language):
    """``number`` written out in ``language`` ("en", "de", "fr"), by num2words:
    345 -> "three hundred and forty-five", "dreihundertfünfundvierzig",
    "trois cent quarante-cinq"."""
    return _cached_words(number, language)


@functools.lru_cache(maxsize=100_000)  # a task draws the same numbers again and again
def _cached_words(number, language):
    return require("num2words", "numbers").num2words(number, lang=language)


def number_pairs(rng, count, languages=NUMBER_LANGUAGES, high=NUMBER_HIGH, tag=True):
    """``count`` random (digits, words) pairs: ("de: 345", "dreihundertfünfundvierzig").

    Numbers are uniform in 0..``high``, each written in a language drawn
    uniformly from ``languages``. The source starts with the language's tag
    ("de: ") so the model knows which language to write; ``tag=False``
    leaves it out (one language only). Repeats are possible: see
    ``tasks.load_task`` for distinct sources.
    """
    _check_number_settings(count, languages, high)
    if not tag and len(languages) > 1:
        raise ValueError(
            f"tag: without a tag the source cannot say which of {languages} to "
            "write; give one language or tag=True"
        )
    numbers = rng.integers(0, high + 1, size=count).tolist()
    chosen = rng.integers(0, len(languages), size=count).tolist()
    pairs = []
    for number, index in zip(numbers, chosen):
        language = languages[index]
        source = f"{language}: {number}" if tag else str(number)
        pairs.append((source, number_words(number, language)))
    return pairs


def number_alphabet(languages=NUMBER_LANGUAGES, high=NUMBER_HIGH):
    """Every character the numbers task can write: those of 0..99, of each
    hundred and thousand up to ``high`` and of 1100 ("one thousand, one
    hundred"), in each language, and of the sources."""
    samples = set(range(min(high, 99) + 1)) | {1100, high}
    samples |= {n for step in (100, 1000, 1_000_000) for n in range(step, high + 1, step)}
    samples = sorted(n for n in samples if n <= high)
    characters = set("0123456789: ") | set("".join(languages))
    for language in languages:
        characters |= set("".join(number_words(n, language) for n in samples))
    return "".join(sorted(characters))


def _check_number_settings(count, languages, high):
    checks.check_int("count", count, low=0)
    checks.check_int("high", high, low=0)
    if not languages:
        raise ValueError("languages: expected at least one language code, got none")
    for language in languages:
        checks.check_choice("languages", language, NUMBER_LANGUAGES)


# -------------------------------------------------------------------- dates


def written_date(day, locale, date_format):
    """``day`` (a datetime.date) written out by babel: ``written_date(day,
    "de", "long")`` -> "3. März 2021"."""
    dates = require("babel.dates", "dates")
    return dates.format_date(day, format=date_format, locale=locale)


def date_pairs(
    rng, count, locales=DATE_LOCALES, formats=DATE_FORMATS, first=FIRST_DAY, last=LAST_DAY
):
    """``count`` random (written date, ISO date) pairs:
    ("3. März 2021", "2021-03-03").

    Days are uniform from ``first`` to ``last``; locale and format ("short",
    "medium", "long", "full") are drawn uniformly from ``locales`` and
    ``formats``. Two pairs can share a source: see ``tasks.load_task``.
    """
    checks.check_int("count", count, low=0)
    if not locales or not formats:
        raise ValueError(
            f"locales, formats: expected at least one of each, got {locales!r} and {formats!r}"
        )
    for date_format in formats:
        checks.check_choice("formats", date_format, FORMAT_NAMES)
    days = _day_count(first, last)
    offsets = rng.integers(0, days, size=count).tolist()
    locale_index = rng.integers(0, len(locales), size=count).tolist()
    format_index = rng.integers(0, len(formats), size=count).tolist()
    pairs = []
    for offset, i, j in zip(offsets, locale_index, format_index):
        day = first + datetime.timedelta(days=offset)
        pairs.append((written_date(day, locales[i], formats[j]), day.isoformat()))
    return pairs


def date_alphabet(locales=DATE_LOCALES, formats=DATE_FORMATS):
    """Every character the dates task can write: every day of the leap year
    2000 (each month and weekday name) in each locale and format, the
    digits and the ISO dates' "-"."""
    characters = set("0123456789-")
    for offset in range(366):
        day = datetime.date(2000, 1, 1) + datetime.timedelta(days=offset)
        for locale in locales:
            for date_format in formats:
                characters |= set(written_date(day, locale, date_format))
    return "".join(sorted(characters))


def _day_count(first, last):
    if not (isinstance(first, datetime.date) and isinstance(last, datetime.date)) or last < first:
        raise ValueError(
            f"first, last: expected two dates with first <= last, got {first!r} and {last!r}"
        )
    return (last - first).days + 1


# ------------------------------------------------------------ for the registry


class Generator(NamedTuple):
    """What ``tasks`` needs to build a generated task.

    draw:     draw(rng, n) -> n random (source, target) pairs
    capacity: how many distinct sources there are at least
    alphabet: every character the task can write (all in the vocabulary)
    """

    draw: Callable
    capacity: int
    alphabet: str


def numbers_generator():
    """The numbers task's generator; needs num2words."""
    require("num2words", "numbers")
    return Generator(number_pairs, len(NUMBER_LANGUAGES) * (NUMBER_HIGH + 1), number_alphabet())


def dates_generator():
    """The dates task's generator; needs babel. Its capacity counts one
    source per day (different days are always written differently; one day
    in several locales and formats often, not always, gives several)."""
    require("babel.dates", "dates")
    return Generator(date_pairs, _day_count(FIRST_DAY, LAST_DAY), date_alphabet())


GENERATORS = {"numbers": numbers_generator, "dates": dates_generator}

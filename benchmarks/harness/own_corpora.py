"""The corpora a learner might bring: six generated families of (source,
target) pairs for ``own_data.py``, each with exactly one right answer per
source, so that held-out exact match judges a model fairly.

    numbers        English number words, in eight surface forms, to digits (0 to 9,999,999)
    number-words   digits to English number words (0 to 9,999,999), the reverse direction
    dates          a day of 1950-2049 written in 11 locales and up to 4 formats each -> ISO 8601
    transliterate  Cyrillic (Russian, Ukrainian, Belarusian, Bulgarian, Serbian, Macedonian
                   names; Russian and Ukrainian number words) -> Latin letters of ISO 9
    units          a metric quantity, in digits or words, converted: "3.5 km in m" -> "3500 m"
    inflection     an English lemma and a form -> the form: "abet +past" -> "abetted", from
                   the lexicon shipped with lemminflect

The words come from libraries (num2words, babel, lemminflect: pip install
".[data]"); the ISO 9 letters and the metric prefixes are facts, written here.
Every generator takes a NumPy Generator and a count and returns that many
pairs with distinct sources, the same for the same seed.
"""

import datetime
import decimal
import gzip

from minitrans.data.language_tasks import number_words, written_date


def distinct(draw, count):
    """``count`` pairs with distinct sources, drawn in order until there are
    enough; a source drawn twice with two targets is a bug of the generator."""
    by_source = {}
    while len(by_source) < count:
        for source, target in draw(count - len(by_source)):
            if by_source.setdefault(source, target) != target:
                raise AssertionError(f"{source!r} has two targets: {by_source[source]!r}, "
                                     f"{target!r}")
    return list(by_source.items())


def digit_count_number(rng, digits=7):
    """A number of 1 to ``digits`` digits, the count drawn first, so that
    "seven" appears beside "one million, two hundred ..."."""
    return int(rng.integers(0, 10 ** int(rng.integers(1, digits + 1))))


# ------------------------------------------------------------------ numbers


def surface_form(words, rng):
    """One of eight ways people write ``words`` (num2words' British form):
    with or without "and", hyphens or spaces, commas or not."""
    if rng.integers(2):
        words = words.replace(" and ", " ")
    if rng.integers(2):
        words = words.replace("-", " ")
    if rng.integers(2):
        words = words.replace(",", "")
    return words


def number_corpus(rng, count):
    def draw(n):
        numbers = [digit_count_number(rng) for _ in range(n)]
        return [(surface_form(number_words(x, "en"), rng), str(x)) for x in numbers]
    return distinct(draw, count)


def number_words_corpus(rng, count):
    def draw(n):
        numbers = [digit_count_number(rng) for _ in range(n)]
        return [(str(x), number_words(x, "en")) for x in numbers]
    return distinct(draw, count)


# -------------------------------------------------------------------- dates

DATE_LOCALES = ("en", "en_GB", "de", "fr", "es", "it", "pt", "nl", "pl", "ru", "ja")
FORMATS = ("short", "medium", "long", "full")
# en's short form is month/day ("3/4/21" is March 4) where es and it write
# day/month: the same text would mean two days, so it is left out.
AMBIGUOUS = {("en", "short")}
# Two-digit years ("03.03.21") name one day only within a century.
FIRST_DAY, DAYS = datetime.date(1950, 1, 1), 36525


def date_corpus(rng, count):
    forms = [(locale, form) for locale in DATE_LOCALES for form in FORMATS
             if (locale, form) not in AMBIGUOUS]

    def draw(n):
        pairs = []
        for offset, index in zip(rng.integers(0, DAYS, n).tolist(),
                                 rng.integers(0, len(forms), n).tolist()):
            day = FIRST_DAY + datetime.timedelta(days=offset)
            pairs.append((written_date(day, *forms[index]), day.isoformat()))
        return pairs
    return distinct(draw, count)


# ---------------------------------------------------------- transliteration

# ISO 9:1995, one Latin letter (with diacritics) for each Cyrillic one, so
# that the transliteration can be undone.
ISO9 = dict(zip(
    "абвгґдѓђеёєжзѕиіїйјкќлљмнњопрстћуўфхцчџшщъыьэюя'",
    ["a", "b", "v", "g", "g\u0300", "d", "ǵ", "đ", "e", "ë", "ê", "ž", "z", "ẑ", "i", "ì", "ï",
     "j", "ǰ", "k", "ḱ", "l", "l\u0302", "m", "n", "n\u0302", "o", "p", "r", "s", "t", "ć", "u",
     "ŭ", "f", "h", "c", "č", "d\u0302", "š", "ŝ", "ʺ", "y", "ʹ", "è", "û", "â", "’"],
))
CYRILLIC_LOCALES = ("ru", "uk", "be", "bg", "sr", "mk")
KEPT = set(" -,.()")  # written as they are


def transliterate(text):
    """``text`` in ISO 9 Latin letters, a capital for a capital; None if it
    holds a character outside the table (a name in Latin letters, say)."""
    letters = []
    for character in text:
        lower = character.lower()
        if lower in ISO9:
            latin = ISO9[lower]
            letters.append(latin.upper() if character != lower else latin)
        elif character in KEPT:
            letters.append(character)
        else:
            return None
    return "".join(letters)


def cyrillic_names():
    """The names of languages, territories, scripts and currencies in six
    Cyrillic locales (babel's CLDR data), sorted, each once."""
    from babel import Locale

    names = set()
    for code in CYRILLIC_LOCALES:
        locale = Locale.parse(code)
        for table in (locale.languages, locale.territories, locale.scripts, locale.currencies):
            names.update(table.values())
    return sorted(name for name in names if transliterate(name))


def transliteration_corpus(rng, count):
    """Up to a third names (each at most once; at 20,000 pairs all 5,428
    there are), the rest Russian and Ukrainian number words."""
    names = cyrillic_names()
    names = [names[i] for i in rng.permutation(len(names))[: count // 3]]
    by_source = {name: transliterate(name) for name in names}
    while len(by_source) < count:
        words = number_words(digit_count_number(rng), ("ru", "uk")[rng.integers(2)])
        by_source.setdefault(words, transliterate(words))
    pairs = list(by_source.items())
    return [pairs[i] for i in rng.permutation(len(pairs))]


# -------------------------------------------------------------------- units

# name, symbol and power of ten of each unit, by quantity
UNITS = {
    "length": [("millimetre", "mm", -3), ("centimetre", "cm", -2), ("metre", "m", 0),
               ("kilometre", "km", 3)],
    "mass": [("milligram", "mg", -3), ("gram", "g", 0), ("kilogram", "kg", 3),
             ("tonne", "t", 6)],
    "volume": [("millilitre", "ml", -3), ("centilitre", "cl", -2), ("decilitre", "dl", -1),
               ("litre", "l", 0)],
}


def quantity(rng):
    """(the amount as a Decimal, as written): an integer below 1000 in words
    or digits, or a number with up to three decimals in digits."""
    if rng.integers(2):
        amount = int(rng.integers(1, 1000))
        return decimal.Decimal(amount), number_words(amount, "en") if rng.integers(2) else \
            str(amount)
    amount = decimal.Decimal(int(rng.integers(1, 100_000))).scaleb(-int(rng.integers(0, 4)))
    return amount, plain(amount)


def plain(amount):
    """A Decimal in digits, no exponent and no trailing zeros: 3.500 -> "3.5"."""
    return format(amount.normalize(), "f")


def unit_pair(rng):
    units = list(UNITS.values())[rng.integers(len(UNITS))]
    first, second = rng.choice(len(units), size=2, replace=False)
    (name, symbol, power), (name2, symbol2, power2) = units[first], units[second]
    amount, written = quantity(rng)
    if rng.integers(2):
        source = f"{written} {symbol} in {symbol2}"
    else:
        plural = "" if amount == 1 else "s"
        source = f"{written} {name}{plural} in {name2}s"
    return source, f"{plain(amount.scaleb(power - power2))} {symbol2}"


def unit_corpus(rng, count):
    return distinct(lambda n: [unit_pair(rng) for _ in range(n)], count)


# --------------------------------------------------------------- inflection

# lemminflect's tags, and how the sources name them
FORMS = {"VERB": {"VBD": "+past", "VBG": "+ing", "VBZ": "+s"}, "NOUN": {"NNS": "+plural"},
         "ADJ": {"JJR": "+er", "JJS": "+est"}}
PART_OF_SPEECH = {"verb": "VERB", "noun": "NOUN", "adj": "ADJ"}


def inflection_pairs():
    """Every (lemma +form, form) of lemminflect's lexicon (its ``infl_lu``
    word list) whose lemma is lower-case letters and that has one form,
    sorted. Nouns it lists as uncountable (the plural is the lemma:
    "abdomen", "shrapnel", over a quarter of them) are left out: whether a
    noun counts is a fact of its meaning, not of its spelling, so no model
    could tell them from "geranium" -> "geraniums"."""
    import lemminflect
    from lemminflect import config

    lemmas = set()
    with gzip.open(config.inflection_lu_fn, "rt", encoding="utf-8") as table:
        for line in table:
            lemma, kind = line.split(",")[:2]
            if lemma.isalpha() and lemma.islower() and kind in PART_OF_SPEECH:
                lemmas.add((lemma, PART_OF_SPEECH[kind]))
    pairs = {}
    for lemma, upos in sorted(lemmas):
        forms = lemminflect.getAllInflections(lemma, upos=upos)
        for tag, name in FORMS[upos].items():
            one = len(forms.get(tag, ())) == 1  # one right answer
            if one and not (tag == "NNS" and forms[tag][0] == lemma):
                pairs.setdefault(f"{lemma} {name}", forms[tag][0])
    return sorted(pairs.items())


def inflection_corpus(rng, count):
    pairs = inflection_pairs()
    if count > len(pairs):
        raise ValueError(f"count: expected at most {len(pairs)} inflection pairs, got {count}")
    return [pairs[i] for i in rng.permutation(len(pairs))[:count]]


CORPORA = {
    "numbers": number_corpus,
    "number-words": number_words_corpus,
    "dates": date_corpus,
    "transliterate": transliteration_corpus,
    "units": unit_corpus,
    "inflection": inflection_corpus,
}

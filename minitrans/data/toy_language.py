"""A tiny English grammar and a made-up language to translate it into.

The toy translation task must need attention, not just a word-for-word
lookup, so the target language orders words differently from English:

    English:  the big dog    sees          a small cat
              subject        verb          object
    Target:   lo vesko gran ka    un mirra piki ro    miru
              subject + "ka"      object + "ro"       verb

* subject-object-verb order: the verb moves to the end of the sentence;
* adjectives come after their noun ("dog big", not "big dog");
* case particles mark the subject ("ka") and the object ("ro");
* negation is one word before the verb ("nai"), and the past tense a suffix
  on the verb ("-ta"), where English uses "did not" + the bare verb;
* plural nouns take the suffix "-n" (English plurals are irregular).

Every English content word has its own target word (the auxiliaries do,
does, did have none: the target marks tense on the verb). The sentences are
described by a ``Clause``; ``english`` and ``target`` render the same clause
in the two languages, so the translation is exact by construction.
"""

from typing import NamedTuple

# English singular, English plural, target singular (its plural adds "-n").
# All start with a consonant, so English never needs "an".
NOUNS = [
    ("dog", "dogs", "vesko"),
    ("cat", "cats", "mirra"),
    ("bird", "birds", "pilu"),
    ("horse", "horses", "hasto"),
    ("fox", "foxes", "renka"),
    ("child", "children", "tiko"),
    ("teacher", "teachers", "dorma"),
    ("farmer", "farmers", "gaspo"),
    ("king", "kings", "rega"),
    ("wolf", "wolves", "ulfa"),
]

# English, target.
ADJECTIVES = [
    ("big", "gran"),
    ("small", "piki"),
    ("red", "rua"),
    ("black", "noka"),
    ("young", "jova"),
    ("happy", "felo"),
    ("tired", "lasu"),
    ("clever", "saki"),
]

# English base form, third person singular, past; target (its past adds "-ta").
VERBS = [
    ("see", "sees", "saw", "miru"),
    ("chase", "chases", "chased", "kasu"),
    ("follow", "follows", "followed", "segu"),
    ("help", "helps", "helped", "hilpa"),
    ("find", "finds", "found", "trova"),
    ("watch", "watches", "watched", "vaki"),
    ("love", "loves", "loved", "ama"),
    ("fear", "fears", "feared", "timo"),
    ("bite", "bites", "bit", "moru"),
    ("call", "calls", "called", "voka"),
]

# English singular, English plural, target singular, target plural.
DETERMINERS = [
    ("the", "the", "lo", "lo"),
    ("a", "some", "un", "sen"),
]

SUBJECT_MARKER = "ka"
OBJECT_MARKER = "ro"
NEGATION = "nai"
TARGET_PLURAL_SUFFIX = "n"
TARGET_PAST_SUFFIX = "ta"
ENGLISH_AUXILIARIES = ("do", "does", "did", "not")

_NOUN = {row[0]: row for row in NOUNS}
_ADJECTIVE = dict(ADJECTIVES)
_VERB = {row[0]: row for row in VERBS}
_DETERMINER = {row[0]: row for row in DETERMINERS}


class NounPhrase(NamedTuple):
    """``determiner`` ("the" or "a", which becomes "some" in the plural),
    ``noun`` (English singular), an optional ``adjective``, and ``plural``."""

    determiner: str
    noun: str
    adjective: str = None
    plural: bool = False


class Clause(NamedTuple):
    """One sentence: subject, verb (English base form), object, tense, polarity."""

    subject: NounPhrase
    verb: str
    object: NounPhrase
    past: bool = False
    negated: bool = False


# --------------------------------------------------------------- rendering


def english(clause):
    """The clause as an English sentence: subject, verb phrase, object."""
    verb = _english_verb(clause.verb, clause.past, clause.negated, clause.subject.plural)
    return " ".join(
        _english_noun_phrase(clause.subject) + verb + _english_noun_phrase(clause.object)
    )


def target(clause):
    """The clause in the target language: subject, object, then the verb."""
    words = _target_noun_phrase(clause.subject, SUBJECT_MARKER)
    words += _target_noun_phrase(clause.object, OBJECT_MARKER)
    if clause.negated:
        words.append(NEGATION)
    stem = _VERB[clause.verb][3]
    words.append(stem + TARGET_PAST_SUFFIX if clause.past else stem)
    return " ".join(words)


def _english_noun_phrase(phrase):
    determiner = _DETERMINER[phrase.determiner][1 if phrase.plural else 0]
    noun = _NOUN[phrase.noun][1 if phrase.plural else 0]
    adjective = [phrase.adjective] if phrase.adjective else []
    return [determiner] + adjective + [noun]


def _english_verb(verb, past, negated, plural_subject):
    base, third_person, past_form, _ = _VERB[verb]
    if negated:  # English needs "do" to carry tense and number: "did not see"
        auxiliary = "did" if past else ("do" if plural_subject else "does")
        return [auxiliary, "not", base]
    if past:
        return [past_form]
    return [base if plural_subject else third_person]


def _target_noun_phrase(phrase, marker):
    determiner = _DETERMINER[phrase.determiner][3 if phrase.plural else 2]
    noun = _NOUN[phrase.noun][2] + (TARGET_PLURAL_SUFFIX if phrase.plural else "")
    adjective = [_ADJECTIVE[phrase.adjective]] if phrase.adjective else []
    return [determiner, noun] + adjective + [marker]  # the adjective follows its noun


# ---------------------------------------------------------------- sampling

# How many ways to fill each slot of a noun phrase: determiner, number,
# adjective (or none), noun; and of the verb: verb, tense, polarity.
_PHRASE_CHOICES = [len(DETERMINERS), 2, len(ADJECTIVES) + 1, len(NOUNS)]
_VERB_CHOICES = [len(VERBS), 2, 2]
_SLOTS = _PHRASE_CHOICES + _VERB_CHOICES + _PHRASE_CHOICES


def _product(numbers):
    result = 1
    for number in numbers:
        result *= number
    return result


# Different choices always give different English sentences, so this is the
# number of distinct sentences (over five million).
NUM_SENTENCES = _product(_SLOTS)


def random_clauses(rng, count):
    """``count`` clauses drawn uniformly (with repetition) with a numpy Generator."""
    draws = rng.integers(0, _SLOTS, size=(count, len(_SLOTS))).tolist()
    return [_clause_from_choices(row) for row in draws]


def _clause_from_choices(row):
    subject, (verb, past, negated), obj = row[0:4], row[4:7], row[7:11]
    return Clause(_phrase_from_choices(subject), VERBS[verb][0], _phrase_from_choices(obj),
                  past=bool(past), negated=bool(negated))


def _phrase_from_choices(choices):
    determiner, plural, adjective, noun = choices
    return NounPhrase(DETERMINERS[determiner][0], NOUNS[noun][0],
                      ADJECTIVES[adjective - 1][0] if adjective else None, bool(plural))


def all_words():
    """Every word either language can use, English first (for the vocabulary)."""
    words = [w for row in DETERMINERS for w in row[:2]] + list(ENGLISH_AUXILIARIES)
    words += [w for row in NOUNS for w in row[:2]] + [row[0] for row in ADJECTIVES]
    words += [w for row in VERBS for w in row[:3]]
    words += [w for row in DETERMINERS for w in row[2:]] + [SUBJECT_MARKER, OBJECT_MARKER, NEGATION]
    words += [row[2] + suffix for row in NOUNS for suffix in ("", TARGET_PLURAL_SUFFIX)]
    words += [row[1] for row in ADJECTIVES]
    words += [row[3] + suffix for row in VERBS for suffix in ("", TARGET_PAST_SUFFIX)]
    return list(dict.fromkeys(words))  # "the" is listed twice; keep the first

"""The JSON records of a checkpoint, checked field by field before use.

``files.checkpoint_file`` makes reading the file safe; this module makes its records
safe to act on. Every field has its exact type (a boolean given as the
string "false" is refused: it is truthy and would wire another model), every
size a sane limit, and the model a configuration describes may hold no more
numbers than the file's ``param/`` arrays do: a few bytes of JSON cannot
make the loader build a model of gigabytes (or of 100,000 layers) before the
arrays are compared. Errors are ``ValueError``s naming the record and the
field ("history.loss: ..."); ``check_records`` turns them into the
checkpoint's error, naming the file.
"""

import dataclasses
import typing

from minitrans.core import checks
from minitrans.data.bpe import END, MAX_MERGES
from minitrans.data.tasks import CORPUS, KINDS, TEXT
from minitrans.data.tokenizer import LEVELS
from minitrans.data.vocab import SPECIAL_TOKENS, Vocab
from minitrans.model.config import LIMITS, ModelConfig
from minitrans.files.rules import FileError, parse_json
from minitrans.training.run_files import text_records
from minitrans.training.run_files.text_records import TOKENIZER
from minitrans.training.train_config import TrainConfig

# Far above any model this project trains, low enough that a model of this
# many numbers fits in memory (2**31 numbers: 8 GB in float32). Each size
# is held to ModelConfig's LIMITS.
MAX_PARAMETERS = 2**31
MAX_SYMBOL = 2**12  # characters of one symbol of a merge: a whole word, at most
FIELD_LIMITS = {**LIMITS, "merges": MAX_MERGES, "block_size": LIMITS["max_len"]}  # + windows
MAX_STEP = 2**40
# A config may describe this many numbers more than the file holds, so that a
# few missing arrays are still named one by one once the model is built.
SLACK = 2**20
HISTORY_KEYS = ("step", "loss", "lr", "grad_norm")
EVALUATION_KEYS = ("step", "pairs", "loss", "token_accuracy", "exact_match")
TEXT_EVALUATION_KEYS = ("step", "windows", "loss", "bits_per_character")  # the text task's


def check_records(path, records, arrays):
    """Check every record present (each known name has its checker below;
    an unknown name is refused) and, with a model config, the size of the
    model it describes against the ``param/`` arrays in ``arrays``."""
    unknown = sorted(set(records) - set(CHECKERS))
    try:
        if unknown:
            raise ValueError(f"records {unknown}: not records of a minitrans checkpoint")
        for name, value in records.items():
            CHECKERS[name](name, value)
        if "model_config" in records:
            check_model_size(records["model_config"], arrays)
        if "vocab" in records and "model_config" in records:
            size, tokens = records["model_config"]["vocab_size"], _vocab(records["vocab"])
            if len(tokens) + len(SPECIAL_TOKENS) != size:
                raise ValueError(f"vocab: {len(tokens) + len(SPECIAL_TOKENS)} tokens, "
                                 f"the model's vocab_size is {size}")
        check_bpe_matches(records)
        check_task_matches_model(records)
    except ValueError as error:  # CheckpointError (from parse_json) is a ValueError too
        raise FileError(f"{path}: malformed checkpoint, {error}") from None


def check_fields(name, values, cls):
    """``values`` may give the fields of dataclass ``cls`` (missing ones keep
    their defaults), each of the type its annotation names: str, int, float
    (an int will do) or bool, or None where the default is None or the
    annotation is ``Optional`` (ModelConfig.pad_id: no padding token)."""
    _check_object(name, values)
    fields = {field.name: field for field in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"{name}: unknown fields {unknown}")
    hints = typing.get_type_hints(cls)
    for key, value in values.items():
        field, where = fields[key], f"{name}.{key}"
        kind, optional = _annotated_kind(hints[key])
        if value is None and (optional or field.default is None):
            continue
        if kind is bool:
            checks.check_bool(where, value)
        elif kind is int:
            checks.check_int(where, value, low=0, high=FIELD_LIMITS.get(key, MAX_STEP))
        elif kind is float:
            checks.check_number(where, value, finite=key != "target_exact_match")
        elif not isinstance(value, str):
            raise ValueError(f"{where}: expected a string, got {value!r}")


def _annotated_kind(hint):
    """(the type, whether None is allowed) of an annotation: int -> (int,
    False), Optional[int] -> (int, True)."""
    others = [kind for kind in typing.get_args(hint) if kind is not type(None)]
    if typing.get_origin(hint) is typing.Union and len(others) == 1:
        return others[0], True
    return hint, False


def check_model_config(name, values):
    check_fields(name, values, ModelConfig)
    _checked(name, ModelConfig.from_dict, values)


def check_model_size(values, arrays):
    """The model a config describes holds at most MAX_PARAMETERS numbers,
    and not many more than the ``param/`` arrays present hold."""
    count = ModelConfig.from_dict(values).parameter_count()
    present = sum(value.size for key, value in arrays.items() if key.startswith("param/"))
    if count > MAX_PARAMETERS or count > present + SLACK:
        raise ValueError(
            f"model_config: describes a model of {count:,} numbers, but the file's param/ "
            f"arrays hold {present:,} (and at most {MAX_PARAMETERS:,} are loaded)"
        )


def check_train_config(name, values):
    check_fields(name, values, TrainConfig)
    _checked(name, lambda given: TrainConfig(**given), values)


def check_task(name, values):
    _check_object(name, values, ("name", "kind", "level"))
    if not isinstance(values["name"], str):
        raise ValueError(f"{name}.name: expected a string, got {values['name']!r}")
    checks.check_choice(f"{name}.kind", values["kind"], KINDS)
    checks.check_choice(f"{name}.level", values["level"], LEVELS)


def read_task_names(records):
    """``records`` (checked) with the corpus task under its one name, CORPUS:
    older files call it "tsv" in the record task and, in train_config, by
    the task given on the command line ("translate")."""
    records = dict(records)
    if records.get("task", {}).get("name") not in ("tsv", CORPUS):
        return records
    records["task"] = {**records["task"], "name": CORPUS}
    if "train_config" in records:
        records["train_config"] = {**records["train_config"], "task": CORPUS}
    return records


def check_vocab(name, text):
    _checked(name, Vocab, _vocab(text))


def _vocab(text):
    """The tokens of a vocabulary record (a JSON text inside the JSON)."""
    stored = parse_json("vocab", "the vocabulary's text", text)
    _check_object("vocab", stored, ("specials", "tokens"))
    if stored["specials"] != list(SPECIAL_TOKENS):
        raise ValueError(f"vocab.specials: expected {list(SPECIAL_TOKENS)}, "
                         f"got {stored['specials']!r}")
    if not isinstance(stored["tokens"], list):
        raise ValueError(f"vocab.tokens: expected a list, got {stored['tokens']!r}")
    return stored["tokens"]


def check_bpe(name, text):
    """The merges of a "bpe" tokenizer (a JSON text inside the JSON, as
    ``data.BPE.to_json`` writes it): at most MAX_MERGES pairs of symbols,
    each a non-empty string of at most MAX_SYMBOL characters, no whitespace."""
    stored = parse_json(name, "the merges' text", text)
    _check_object(name, stored, ("kind", "end_of_word", "merges"))
    for key, expected in (("kind", "bpe"), ("end_of_word", END)):
        if stored[key] != expected:
            raise ValueError(f"{name}.{key}: expected {expected!r}, got {stored[key]!r:.80}")
    merges = stored["merges"]
    if not isinstance(merges, list) or len(merges) > MAX_MERGES:
        raise ValueError(f"{name}.merges: expected a list of at most {MAX_MERGES} merges, got "
                         + (f"{len(merges)}" if isinstance(merges, list) else f"{merges!r:.80}"))
    for index, pair in enumerate(merges):
        where = f"{name}.merges[{index}]"
        if not isinstance(pair, list) or len(pair) != 2:
            raise ValueError(f"{where}: expected a list of two symbols, got {pair!r:.80}")
        for symbol in pair:
            if not isinstance(symbol, str) or not 0 < len(symbol) <= MAX_SYMBOL \
                    or symbol.split() != [symbol]:
                raise ValueError(f"{where}: expected symbols of 1 to {MAX_SYMBOL} characters "
                                 f"without whitespace, got {symbol!r:.80}")


def check_bpe_matches(records):
    """The merges are there exactly when the task's level is "bpe", and the
    vocabulary holds every symbol they make (``corpus.vocabulary_extras``
    puts them there): merges of another corpus would make tokens the model
    has never seen. A text's merges are its own (``text_records``)."""
    if records.get("task", {}).get("name") == TEXT or TOKENIZER in records:
        return text_records.check_tokens_match(records)
    level = records.get("task", {}).get("level")
    if level is not None and (level == "bpe") != ("bpe" in records):
        raise ValueError(f"bpe: a record of merges {'is missing' if level == 'bpe' else 'is there'}"
                         f" while the task's level is {level!r}")
    if "bpe" in records and "vocab" in records:
        tokens = set(_vocab(records["vocab"]))
        merges = parse_json("bpe", "the merges' text", records["bpe"])["merges"]
        lacking = [left + right for left, right in merges if left + right not in tokens]
        if lacking:
            raise ValueError(f"bpe: {len(lacking)} of its merges make symbols the vocabulary "
                             f"lacks, such as {lacking[0]!r:.80}")


def check_task_matches_model(records):
    """The task's kind and the model agree: "lm" for a decoder-only model,
    "seq2seq" for an encoder-decoder. The loader builds the model from
    model_config and describes and decodes it by the task's kind, so a file
    where they disagree would be run as the other kind of model. And each
    evaluation holds what the task measures, which its recipe reads back
    when the run is resumed (which is best, when to stop)."""
    keys = TEXT_EVALUATION_KEYS if records.get("task", {}).get("name") == TEXT else EVALUATION_KEYS
    for index, record in enumerate(records.get("evaluations", [])):
        _check_object(f"evaluations[{index}]", record, keys, exact=False)
    if "task" not in records or "model_config" not in records:
        return
    decoder_only = ModelConfig.from_dict(records["model_config"]).decoder_only
    expected, given = ("lm" if decoder_only else "seq2seq"), records["task"]["kind"]
    if given != expected:
        raise ValueError(f"task.kind: expected {expected!r} for a model_config with "
                         f"decoder_only={decoder_only}, got {given!r}")


def check_step(name, value):
    checks.check_int(name, value, low=0, high=MAX_STEP)


def check_rng(name, values):
    _check_object(name, values, ("seed", "step", "rule"))
    check_step(f"{name}.seed", values["seed"])
    check_step(f"{name}.step", values["step"])


def check_history(name, values):
    """Four lists of one length: steps counting up from 1, finite numbers."""
    _check_object(name, values, HISTORY_KEYS)
    lengths = {key: _number_list(f"{name}.{key}", values[key]) for key in HISTORY_KEYS}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"{name}: expected lists of one length, got lengths {lengths}")
    for index, step in enumerate(values["step"]):
        checks.check_int(f"{name}.step[{index}]", step, low=index + 1, high=MAX_STEP)


def check_evaluations(name, values):
    """Objects of numbers, each with at least a step and a loss (the task's
    own fields: ``check_task_matches_model``)."""
    if not isinstance(values, list):
        raise ValueError(f"{name}: expected a list, got {type(values).__name__}")
    for index, record in enumerate(values):
        where = f"{name}[{index}]"
        _check_object(where, record, ("step", "loss"), exact=False)
        for key, value in record.items():
            checks.check_number(f"{where}.{key}", value)
        for key in ("step", "pairs", "windows"):  # counts
            if key in record:
                checks.check_int(f"{where}.{key}", record[key], low=0, high=MAX_STEP)


CHECKERS = {
    "format_version": check_step, "model_config": check_model_config,
    "train_config": check_train_config, "task": check_task, "vocab": check_vocab,
    "bpe": check_bpe,
    "step": check_step, "optimizer_step": check_step, "rng": check_rng,
    "history": check_history, "evaluations": check_evaluations,
    "windows": text_records.check_windows, TOKENIZER: text_records.check_byte_bpe,
}


def _check_object(name, value, keys=None, exact=True):
    """A JSON object; with ``keys``: these keys (and, ``exact``, no others)."""
    if not isinstance(value, dict):
        raise ValueError(f"{name}: expected a JSON object, got {type(value).__name__}")
    if keys is None:
        return
    missing, extra = sorted(set(keys) - set(value)), sorted(set(value) - set(keys))
    if missing or (exact and extra):
        raise ValueError(f"{name}: expected the fields {list(keys)}, "
                         f"missing {missing}" + (f", unknown {extra}" if exact and extra else ""))


def _number_list(name, values):
    if not isinstance(values, list):
        raise ValueError(f"{name}: expected a list, got {type(values).__name__}")
    for index, value in enumerate(values):
        checks.check_number(f"{name}[{index}]", value)
    return len(values)


def _checked(name, build, values):
    """``build(values)``, its errors named after the record."""
    try:
        build(values)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name}: {error}") from None

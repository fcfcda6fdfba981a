"""The records of a text run's checkpoint (``train text``), written, checked
field by field before use, and read back into the tokenizer the model was
trained with (``training.run_files.records`` calls the checks).

    task       the text task, its kind "lm" and its level, "char" or "bpe"
    vocab      its tokens: the characters, or the 256 bytes and the merges' products
    byte_bpe   at level "bpe" only: the pre-tokenizer's name and the merges in
               the order learned (``ByteBPE.to_records``), so that generate,
               evaluate and a resumed run encode as the run did, learning nothing
    windows    the state of numpy's PCG64 that draws the training windows

The generic loader (``training.experiment.load_trained``) gives a text
model the tokenizer these records describe (``stored_tokenizer``): its
characters, or its byte-level BPE, which is no ``data.Tokenizer``.
"""

import dataclasses

from minitrans.core import checks
from minitrans.data.bpe import MAX_MERGES
from minitrans.data.byte_bpe_learning import PATTERNS, ByteBPE, byte_tokens
from minitrans.data.tasks import TEXT
from minitrans.data.text_corpus import CharacterTable
from minitrans.data.vocab import SPECIAL_TOKENS, Vocab

TOKENIZER = "byte_bpe"  # the record of a text's byte-level merges
MAX_TOKEN = 2**12  # characters of one token a merge joins: a long word, at most


def records_of(trainer):
    """The JSON records of a text run's checkpoint (a dict): the configs,
    the task and its tokens (with the merges at level "bpe"), the step, the
    random-number rule and the windows' state, the history and evaluations."""
    task = trainer.task
    merges = {TOKENIZER: task.tokenizer.to_records()} if task.tokenizer.level == "bpe" else {}
    return {
        **merges,
        "model_config": trainer.model.config.to_dict(),
        "train_config": dataclasses.asdict(trainer.config),
        "task": {"name": task.name, "kind": task.kind, "level": task.tokenizer.level},
        "vocab": task.vocab.to_json(),
        "step": trainer.step,
        "optimizer_step": trainer.optimizer.step_count,
        "rng": {"seed": trainer.config.seed, "step": trainer.step,
                "rule": "windows: numpy default_rng(seed), its state in the record "
                        "windows; dropout [seed, step]"},
        "history": trainer.history,
        "evaluations": trainer.evaluations,
        "windows": trainer.windows.state(),
    }


def stored_tokenizer(records):
    """The tokenizer of a text run's (checked) records: its ByteBPE where
    they hold merges, else the CharacterTable of its vocabulary."""
    if TOKENIZER in records:
        return ByteBPE.from_records(records[TOKENIZER])
    return CharacterTable(Vocab.from_json(records["vocab"]))


# ------------------------------------------------------------------- checks


def check_byte_bpe(name, value):
    """{"pattern": one of PATTERNS, "merges": at most MAX_MERGES pairs of
    tokens, each of 1 to MAX_TOKEN characters}."""
    check_object(name, value, ("pattern", "merges"))
    checks.check_choice(f"{name}.pattern", value["pattern"], PATTERNS)
    merges = value["merges"]
    if not isinstance(merges, list) or len(merges) > MAX_MERGES:
        raise ValueError(f"{name}.merges: expected a list of at most {MAX_MERGES} merges, got "
                         + (f"{len(merges)}" if isinstance(merges, list) else f"{merges!r:.80}"))
    for index, pair in enumerate(merges):
        if not (isinstance(pair, list) and len(pair) == 2 and all(
                isinstance(token, str) and 0 < len(token) <= MAX_TOKEN for token in pair)):
            raise ValueError(f"{name}.merges[{index}]: expected two tokens of 1 to {MAX_TOKEN} "
                             f"characters, got {pair!r:.80}")


def check_tokens_match(records):
    """A text run's vocabulary is the one its tokenizer makes: the merges are
    there exactly at level "bpe" and their tokens are the vocabulary's, in
    order (else the model's ids would mean other tokens); at level "char"
    every token is one character. The corpus task's merges ("bpe") are not
    a text's, and a text's are no other task's."""
    task = records.get("task", {})
    if task.get("name") != TEXT:
        if TOKENIZER in records:
            raise ValueError(f"{TOKENIZER}: a record of the {TEXT} task alone, in a checkpoint "
                             f"of the task {task.get('name')!r}")
        return
    if "bpe" in records:
        raise ValueError(f"bpe: the {TEXT} task keeps its merges in the record {TOKENIZER}")
    level = task.get("level")
    if (level == "bpe") != (TOKENIZER in records):
        raise ValueError(f"{TOKENIZER}: a record of merges "
                         f"{'is missing' if level == 'bpe' else 'is there'} while the task's "
                         f"level is {level!r}")
    if "vocab" not in records:
        return
    tokens = Vocab.from_json(records["vocab"]).tokens[len(SPECIAL_TOKENS):]
    if level == "bpe" and tokens != byte_tokens(records[TOKENIZER]["merges"]):
        raise ValueError(f"vocab: {len(tokens)} tokens, not the 256 bytes and the products "
                         f"of the {len(records[TOKENIZER]['merges'])} merges of {TOKENIZER}")
    if level == "char" and any(len(token) != 1 for token in tokens):
        raise ValueError("vocab: expected one character a token at level 'char', got "
                         f"{next(token for token in tokens if len(token) != 1)!r:.80}")


def check_windows(name, value):
    """The state of numpy's PCG64 that draws a text's windows (``bit_generator.state``)."""
    check_object(name, value, ("bit_generator", "state", "has_uint32", "uinteger"))
    checks.check_choice(f"{name}.bit_generator", value["bit_generator"], ("PCG64",))
    check_object(f"{name}.state", value["state"], ("state", "inc"))
    for where, number, bits in ((f"{name}.state.state", value["state"]["state"], 128),
                                (f"{name}.state.inc", value["state"]["inc"], 128),
                                (f"{name}.has_uint32", value["has_uint32"], 1),
                                (f"{name}.uinteger", value["uinteger"], 32)):
        checks.check_int(where, number, low=0, high=2**bits - 1)


def check_object(name, value, keys):
    """A JSON object of exactly these ``keys``."""
    if not isinstance(value, dict) or sorted(value) != sorted(keys):
        raise ValueError(f"{name}: expected an object of the fields {list(keys)}, got "
                         f"{value!r:.80}")

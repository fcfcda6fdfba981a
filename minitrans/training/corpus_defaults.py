"""Defaults for a learner's own corpus (``train translate --data FILE``),
chosen from the corpus itself and said in words.

A built-in task's defaults were tuned on that task. A corpus someone brings
may be smaller, larger, longer or more varied than anything they were tuned
on, so what depends on the corpus is derived from it:

* the merges: every pair of symbols seen in at least one of every 100
  training pairs (``data.corpus.merge_floor``): a corpus that repeats its
  words gets whole-word tokens, one of rare words gets frequent pieces;
* the width d_model (and d_ff = 4 d_model, as in the paper): 64 below
  SMALL_CORPUS training pairs, where a smaller model over-fits less and
  trains faster, 128 up to LARGE_CORPUS, 256 above;
* max_len: the longest pair, with room to spare;
* when to stop: not after a fixed number of steps but once held-out exact
  match has not improved for PATIENCE evaluations (``training.optimisation.stopping``),
  within a budget of STEP_BUDGET steps or MINUTE_BUDGET minutes;
* what is evaluated and kept: a moving average of the weights
  (``training.optimisation.averaging``, AVERAGE_DECAY), as for the lm, numbers and dates
  tasks: a plateau is reached sooner and swings less, so patience stops
  the run earlier.

The family of corpora in ``benchmarks/own_data.py`` (numbers both ways,
dates, transliteration, unit conversion, inflection) is what these rules
were checked on; its reports are in ``benchmarks/results/own_data/``.
"""

from minitrans.data.corpus import MERGE_SHARE_PAIRS, merge_floor

SMALL_CORPUS = 2_000
LARGE_CORPUS = 100_000
WIDTHS = {"small": 64, "medium": 128, "large": 256}
PATIENCE = 4  # evaluations of EVAL_EVERY steps: 1000 steps without a gain
EVAL_EVERY = 250
STEP_BUDGET = 20_000
AVERAGE_DECAY = 0.999
MINUTE_BUDGET = 15.0


def training_settings():
    """The TrainConfig fields of a run on one's own corpus."""
    return dict(steps=STEP_BUDGET, max_minutes=MINUTE_BUDGET, patience=PATIENCE,
                eval_every=EVAL_EVERY, target_exact_match=1.0, batch_size=64, warmup=400,
                lr_factor=0.5, merges=None, average_decay=AVERAGE_DECAY)


def corpus_size(pairs):
    """"small", "medium" or "large", by the number of training pairs."""
    if pairs < SMALL_CORPUS:
        return "small"
    return "medium" if pairs <= LARGE_CORPUS else "large"


def sizes(size):
    """The ModelConfig fields for a corpus of ``size`` ("small", "medium", "large")."""
    width = WIDTHS[size]
    return dict(d_model=width, h=4, N=2, d_ff=4 * width, dropout=0.1)


def model_sizes(task):
    """The ModelConfig fields for a corpus ``task`` (a Task read from TSV)."""
    return sizes(corpus_size(len(task.train)))


def explain(task, train_config, model_config, given):
    """One line saying what was chosen for the corpus ``task`` and why; the
    names in ``given`` (flags the user set) are left out, they were not
    chosen. Returns "" when nothing was chosen."""
    pairs = len(task.train)
    alphabet = len({c for pair in task.train for text in pair for c in text})
    reasons = []
    if task.tokenizer.level == "bpe" and "merges" not in given:
        reasons.append(
            f"{train_config.merges} merges (every pair of symbols seen at least "
            f"{merge_floor_text(pairs)}; alphabet of {alphabet} characters, "
            f"vocabulary of {len(task.vocab)} tokens)")
    if "d_model" not in given:
        size = corpus_size(pairs)
        bounds = {"small": f"below {SMALL_CORPUS:,}",
                  "medium": f"{SMALL_CORPUS:,} to {LARGE_CORPUS:,}",
                  "large": f"above {LARGE_CORPUS:,}"}[size]
        reasons.append(f"d_model {model_config.d_model} ({pairs:,} training pairs, {bounds})")
    reasons.append(f"max_len {model_config.max_len} (the longest pair has "
                   f"{task.max_length} tokens with <bos> and <eos>)")
    return "chosen for this corpus: " + "; ".join(reasons)


def merge_floor_text(pairs):
    return f"{merge_floor(pairs)} times, once in every {MERGE_SHARE_PAIRS} training pairs"

"""What to train on and how (``TrainConfig``); the model's sizes are in
``model.config.ModelConfig``, the stopping rules in ``training.optimisation.stopping``."""

import dataclasses

from minitrans.core import checks
from minitrans.data import Tokenizer
from minitrans.data.bpe import MAX_MERGES
from minitrans.data.tasks import TEXT
from minitrans.training.optimisation.parallel import MAX_WORKERS

TEXT_LEVELS = ("char", "bpe")  # the text task's tokens


@dataclasses.dataclass
class TrainConfig:
    """What to train on and how; the model's sizes are in ``ModelConfig``."""

    # a built-in task, or "corpus" with data (train translate --data FILE), or
    # "text" with data (train text --data FILE)
    task: str = "copy"
    data: str = None  # a TSV file of "source<TAB>target" lines (text: a UTF-8 text)
    valid: str = None  # held-out TSV; default: a slice of data
    level: str = "bpe"  # tokenisation of TSV data: "bpe" (sub-words), "char" or "word"
    # byte-pair merges learned from TSV data at level "bpe"; None: as many as the
    # corpus supports (``data.corpus.merge_floor``), then the number learned
    merges: int = 1000
    steps: int = 1000
    batch_size: int = 64
    warmup: int = 400  # steps of linear learning-rate warm-up (paper: 4000)
    lr_factor: float = 1.0  # multiplies the paper's schedule
    label_smoothing: float = 0.1
    clip_norm: float = 1.0  # global gradient norm limit; 0 = no clipping
    weight_decay: float = 0.0  # > 0: AdamW
    # > 0: evaluate, keep and save a moving average of the weights with this
    # decay (training.optimisation.averaging); 0: the weights themselves, as the paper trains
    average_decay: float = 0.0
    eval_every: int = 200
    eval_pairs: int = 1000  # held-out pairs decoded for exact match
    target_exact_match: float = 1.0  # stop early once reached
    patience: int = None  # stop once this many evaluations bring no better exact match
    max_minutes: float = None  # stop at the first evaluation after this many minutes
    # the text task (train text --data FILE: training.text_recipe): windows of
    # block_size tokens, a cosine from peak_lr down to min_lr, eval_windows
    # held-out windows measured at each evaluation
    block_size: int = 64
    peak_lr: float = 1e-3
    min_lr: float = 1e-4
    eval_windows: int = 1000
    seed: int = 0
    workers: int = None  # workers, each on a shard of the batch (None: 2 on the CPU, 1 on a GPU)
    out_dir: str = "runs/run"

    def __post_init__(self):
        for name in ("steps", "batch_size", "warmup", "eval_every", "eval_pairs", "block_size",
                     "eval_windows"):
            checks.check_positive_int(name, getattr(self, name))
        checks.check_int("seed", self.seed, low=0)
        checks.check_int("merges", self.merges, low=0, high=MAX_MERGES, allow_none=True)
        checks.check_int("patience", self.patience, low=1, allow_none=True)
        checks.check_number("max_minutes", self.max_minutes, low=0, low_open=True,
                            allow_none=True)
        checks.check_int("workers", self.workers, low=1, allow_none=True)
        limit = min(MAX_WORKERS, self.batch_size)  # every worker needs an example of each batch
        if self.workers is not None and self.workers > limit:
            raise ValueError(f"workers: expected at most {limit} (at most {MAX_WORKERS} and "
                             f"batch_size={self.batch_size}), got {self.workers}")
        checks.check_choice("level", self.level, Tokenizer.LEVELS)
        checks.check_number("lr_factor", self.lr_factor, low=0, low_open=True)
        checks.check_number("peak_lr", self.peak_lr, low=0, low_open=True)
        checks.check_number("min_lr", self.min_lr, low=0, high=self.peak_lr)
        if self.task == TEXT and self.level not in TEXT_LEVELS:
            raise ValueError(f"level: the {TEXT} task reads characters or sub-words, expected "
                             f"one of {list(TEXT_LEVELS)}, got {self.level!r}")
        checks.check_probability("label_smoothing", self.label_smoothing)
        checks.check_number("clip_norm", self.clip_norm, low=0)
        checks.check_number("weight_decay", self.weight_decay, low=0)
        checks.check_number("average_decay", self.average_decay, low=0, high=1, high_open=True)
        # above 1 (even infinity): never stop early
        checks.check_number("target_exact_match", self.target_exact_match, low=0, finite=False)

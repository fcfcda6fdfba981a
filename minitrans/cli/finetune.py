"""``minitrans train --init-from FOLDER --data corpus.txt``: fine-tune a
pretrained GPT-2 or Llama model on a text, with the hand-written backward.

The corpus is tokenized with the folder's tokenizer and cut into blocks of
--block-size tokens (``training.finetune``); the run writes minitrans
checkpoints (``checkpoint.npz``, ``best.npz``: the lowest held-out loss)
and, at the end, ``pretrained/``: the best weights in the folder's layout
(config.json, model.safetensors, the tokenizer's files), which
``generate --pretrained`` and Hugging Face's ``transformers`` load.
Memory is checked from config.json before a tensor is read. ``--resume``
is refused with --init-from: a fine-tuning run is started again.

Before any training, the run refuses what would lose or break a model:
a ``pretrained/`` folder already in the run's folder (unless --force), and
--init-from being that very folder. The folder is written beside and
swapped in whole (``files.folder_swap``), so a run killed while it writes
leaves the old folder or the new one. The corpus is read by the rules of
``files.rules`` (a regular file, bounded, UTF-8).
"""

import os

from minitrans.cli import flags, pretrained_folder, resume_flags
from minitrans.core.memory_budget import training_bytes
from minitrans.files import model_folder, rules
from minitrans.pretrained import save_pretrained
from minitrans.pretrained.architectures import hub_config
from minitrans.training.run_files import interrupt
from minitrans.training.finetune import FinetuneTrainer, text_task
from minitrans.training.optimisation.parallel import default_workers
from minitrans.training.train_config import TrainConfig

# A fine-tuner's schedule: a small constant rate after a short warm-up.
DEFAULTS = dict(steps=200, batch_size=8, warmup=20, eval_every=50)
DEFAULT_LR = 5e-5
MAX_BLOCK = 128  # default --block-size: min(MAX_BLOCK, the model's positions)
# Flags of a run from scratch that mean nothing for a loaded model.
REFUSED = ("resume", "level", "merges", "lr_factor", "target_exact_match", "patience",
           "average_decay", *resume_flags.MODEL_FIELDS)
OWN = ("lr", "block_size")  # only used with --init-from
MODEL_FOLDER = "pretrained"  # the model folder a run writes into its own folder
CORPUS = "a UTF-8 text to fine-tune on"


def add_flags(train):
    train.add_argument(
        "--init-from", metavar="FOLDER",
        help="fine-tune the pretrained GPT-2 or Llama model of FOLDER (Hugging Face Hub "
        "layout, with its tokenizer) on --data, a plain UTF-8 text, instead of training a "
        "TASK from scratch. The text is cut into blocks of --block-size tokens, a tenth of "
        "them held out (or --valid, another text); Adam at a constant --lr after --warmup "
        f"steps (defaults here: --steps {DEFAULTS['steps']}, --batch-size "
        f"{DEFAULTS['batch_size']} blocks, --warmup {DEFAULTS['warmup']}, --eval-every "
        f"{DEFAULTS['eval_every']}). Writes checkpoint.npz, best.npz (lowest held-out loss) "
        "and pretrained/, the best model in FOLDER's layout. Not with --resume, --lr-factor, "
        "--target, --patience or the model's size flags (default: none, train TASK from scratch)")
    train.add_argument("--lr", type=flags.positive_number,
                       help=f"with --init-from: the learning rate after warm-up, constant "
                       f"(default {DEFAULT_LR:g}, as fine-tuning recipes use); with train text: "
                       "the peak rate the cosine starts from")
    train.add_argument("--block-size", type=flags.positive_int,
                       help=f"with --init-from: tokens per training block (default: "
                       f"min({MAX_BLOCK}, the model's positions)); with train text: tokens "
                       "per window, the model's positions")


def check_not_given(args):
    """Refuse --lr and --block-size in a run without --init-from."""
    for name in OWN:
        if getattr(args, name) is not None:
            raise ValueError(f"--{name.replace('_', '-')}: only used with --init-from "
                             "(fine-tuning a pretrained model); --lr-factor scales a "
                             "run from scratch")


def run(args):
    check_flags(args)
    flags.use_device(args)
    folder = args.init_from
    tokenizer = pretrained_folder.read_tokenizer(folder, "--init-from")
    config = pretrained_folder.planned_config(folder)
    block_size = args.block_size or min(MAX_BLOCK, config.max_len)
    if block_size > config.max_len:
        raise ValueError(f"--block-size: expected at most {config.max_len} (the model's "
                         f"positions), got {block_size}")
    text, valid_text = read_text(args.data, "--data"), None
    if args.valid is not None:
        valid_text = read_text(args.valid, "--valid")
    out_dir = flags.new_run_folder(args, "finetune")
    out = os.path.join(out_dir, MODEL_FOLDER)
    check_model_folder(folder, out, args.force)
    train_config = TrainConfig(
        task="pretrained", data=args.data, valid=args.valid, label_smoothing=0.0,
        seed=args.seed or 0, workers=args.workers, max_minutes=args.max_minutes,
        out_dir=out_dir, **{key: getattr(args, key) or value for key, value in DEFAULTS.items()})
    task = text_task(tokenizer, text, block_size, valid_text, source=args.data)
    batch = min(train_config.batch_size, len(task.train))
    workers = train_config.workers or default_workers()
    training = (training_bytes(config, batch, block_size, workers),
                f"fine-tuning on batches of {batch} x {block_size} tokens (--batch-size x "
                "--block-size)")
    model, tokenizer, info = pretrained_folder.load_model(folder, "--init-from", training)
    model.train()
    progress = flags.progress_bar(args)
    lr = args.lr or DEFAULT_LR
    trainer = FinetuneTrainer(model, task, train_config, lr, progress=progress,
                              source={"init_from": os.path.abspath(folder),
                                      "architecture": info.architecture})
    print(f"fine-tuning {info.architecture} of {folder} for at most {train_config.steps} steps "
          f"at lr {lr:g} after {train_config.warmup} warm-up steps, evaluating every "
          f"{train_config.eval_every}")
    print(f"{task.description}; {len(task.train)} training and {len(task.valid)} held-out "
          f"blocks")
    print(f"model: {model.num_parameters():,} parameters, {model.config}")
    try:
        trainer.fit()
    except interrupt.TrainingInterrupted as stop:
        return flags.interrupted(stop, " (a fine-tuning run cannot be resumed: start it again)")
    best = trainer.best_evaluation()
    trainer.load_best()
    save_pretrained(model, out, info.architecture, extra=extra_fields(model, info),
                    copy_from=folder)
    copied = [name for name in model_folder.COPIED_FILES if os.path.isfile(os.path.join(out, name))]
    print(f"held-out loss {best['loss']:.4f} at step {best['step']} (best of "
          f"{len(trainer.evaluations)} evaluations, {trainer.step} steps)")
    print(f"checkpoint: {trainer.checkpoint_path} (last), {trainer.best_checkpoint_path()} "
          f"(best held-out loss); model folder: {out} (config.json, model.safetensors, "
          f"{', '.join(copied)}): minitrans generate --pretrained {out} \"...\"")
    return 0


def check_model_folder(source, out, force):
    """Refuse, before any training, to write the model folder ``out`` where
    that would lose a model: over the folder being fine-tuned (``source``),
    or over an earlier run's without ``force``."""
    inside = os.path.realpath(source) + os.sep
    if inside.startswith(os.path.realpath(out) + os.sep):
        raise ValueError(f"--init-from {source}: is inside {out}, the model folder this run "
                         "writes (in --out); choose another --out")
    if os.path.lexists(out) and not force:
        raise ValueError(f"{out}: holds the model folder of an earlier run; choose another "
                         "--out, or add --force to replace it")
    model_folder.check_replaceable(out)


def check_flags(args):
    if args.task is not None:
        raise ValueError(f"--init-from: fine-tunes a pretrained model on --data, there is no "
                         f"task to train; drop {args.task}")
    given = [name for name in REFUSED if getattr(args, name, None) is not None]
    if given:
        names = ", ".join(resume_flags.FIXED.get(name, (f"--{name.replace('_', '-')}",))[0]
                          .replace("--target-exact-match", "--target") for name in given)
        raise ValueError(f"--init-from: these flags do not apply to fine-tuning a pretrained "
                         f"model: {names} (--resume: a fine-tuning run is started again; "
                         "--lr-factor: use --lr)")
    if args.data is None:
        raise ValueError("--init-from: --data is required, a plain UTF-8 text to fine-tune on")


def read_text(path, flag):
    """The corpus at ``path``, read by the household's rules: a regular file
    (a FIFO would wait for a writer, /dev/zero fill the memory), of at most
    ``rules.MAX_TEXT_BYTES``, UTF-8."""
    try:
        return rules.read_text(path, CORPUS)
    except rules.FileError as error:
        raise ValueError(f"{flag}: {error}") from None


def extra_fields(model, info):
    """The fields of the original config.json that name special tokens, and
    that the model's own config does not set."""
    own = hub_config(model.config, info.architecture)
    return {key: info.hub_config[key] for key in ("bos_token_id", "eos_token_id", "pad_token_id")
            if key in info.hub_config and key not in own}

"""``generate`` and ``evaluate`` with a model trained on a text (``train
text``): it reads characters, or byte-level BPE tokens, with no <bos>
before them, so a prompt is its tokens' ids alone, and a text to measure is
cut into windows of the model's positions. The tokenizer is the run's own,
rebuilt from the checkpoint's records (``training.text_run``).

    minitrans generate --checkpoint runs/input/best.npz "ROMEO:" --samples 3
    minitrans evaluate --checkpoint runs/input/best.npz --data test.txt

At level "char" a character the model never saw has no id it could read: a
prompt or a file holding one is refused, in one line that names and counts
them (at level "bpe" every text is bytes, none of them unknown).
"""

import dataclasses

from minitrans.core import backend
from minitrans.data import Tokenizer, pad
from minitrans.data.tasks import TEXT
from minitrans.data.text_corpus import EXAMPLES
from minitrans.data.vocab import BOS_ID, EOS_ID, PAD_ID, DataError
from minitrans.decoding import generate as continue_prompt
from minitrans.decoding.input_checks import check_rows_fit, room_after_prompt
from minitrans.training.text_recipe import bits_per_character, text_loss
from minitrans.training.text_run import text_file_tokens

UNITS = {"char": "characters", "bpe": "tokens"}  # what a window holds, by level


def prompt_ids(tokenizer, text):
    """The ids of the prompt ``text`` by the run's ``tokenizer``; an empty
    prompt, or one with characters the model lacks, refused."""
    if not text:
        raise DataError("prompt: empty, expected at least one character: a model trained on "
                        "a text continues a text")
    ids = [int(i) for i in tokenizer.encode(text)]
    # a CharacterTable's id of an unknown character (byte-level BPE knows every text)
    unknown = [character for character, i in zip(text, ids) if i == PAD_ID]
    if unknown:
        count, unknown = len(unknown), list(dict.fromkeys(unknown))
        raise DataError(f"prompt: {count} character{'s' * (count != 1)} unknown to the model "
                        f"({', '.join(map(repr, unknown[:EXAMPLES]))}), expected only characters "
                        "of its training text")
    return ids


def generate_text(args, model, task, prompts):
    """Print ``args.samples`` continuations of each of ``prompts``."""
    check_rows_fit("--samples", args.samples, model.config, what="samples")  # before any work
    rng = backend.device_rng(args.seed)  # one generator for every prompt: a seed, one output
    tokenizer = task.tokenizer  # the run's own: its characters or its byte-level BPE
    for text in prompts:
        ids = prompt_ids(tokenizer, text)
        room = room_after_prompt(len(ids), model.config.max_len, "--max-tokens",
                                 args.max_tokens)
        prompt = backend.to_device(pad([ids] * args.samples))  # (samples, prompt), no padding
        new = continue_prompt(model, prompt, args.max_tokens or room, strategy="sample",
                              temperature=args.temperature, top_k=args.top_k,
                              top_p=args.top_p, rng=rng)
        for row in backend.to_numpy(new).tolist():
            print(text + tokenizer.decode(shown(row)))
    return 0


def shown(ids):
    """A sample's ids as ``Vocab.decode`` shows a model's output: up to the
    first <eos>, without <pad> and <bos> (an <unk> stays, by its name)."""
    kept = []
    for i in ids:
        if i == EOS_ID:
            break
        if i not in (PAD_ID, BOS_ID):
            kept.append(i)
    return kept


def evaluate_text(args, model, task):
    """Print the mean cross-entropy per token, in nats, and the bits per
    character of ``model`` over every full window of the text ``args.data``
    (its tokens per character those of the whole text)."""
    block, tokenizer = model.config.max_len, task.tokenizer
    unit = UNITS[tokenizer.level]
    with text_file_tokens(args.data, tokenizer, block) as (ids, characters):
        if len(ids) < block + 1:
            raise DataError(f"{args.data}: {len(ids):,} {unit}, expected at least "
                            f"{block + 1:,} (one window of the model's {block} positions, "
                            "plus one)")
        loss, windows = text_loss(model, ids, block)
        left_out = len(ids) - 1 - windows * block  # after the last full window
        tokens = len(ids)
    print(f"{windows:,} windows of {block} {unit} from {args.data} ({windows * block:,} "
          f"predicted; the {left_out:,} after the last full window left out)")
    if tokenizer.level == "bpe":
        print(f"{characters:,} characters in {tokens:,} tokens of byte-level BPE "
              f"({characters / tokens:.2f} characters a token)")
    print(f"cross-entropy: {loss:.4f} nats per token")
    print(f"bits per character: {bits_per_character(loss, tokens, characters):.4f}")
    return 0


def attention_task(task, checkpoint):
    """``task`` as the attention maps read it, which split a text with a
    ``data.Tokenizer``: a character-level text model's characters are one;
    a byte-level BPE is refused, in one line."""
    if task.name != TEXT:
        return task
    if task.tokenizer.level != "char":
        raise ValueError(f"--checkpoint: {checkpoint} reads byte-level BPE tokens, whose "
                         "attention maps are not drawn; expected a model of characters")
    return dataclasses.replace(task, tokenizer=Tokenizer("char"))

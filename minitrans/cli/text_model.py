"""``generate`` and ``evaluate`` with a model trained on a text (``train
text``): it reads characters with no <bos> before them, so a prompt is its
characters' ids alone, and a text to measure is cut into windows of the
model's positions.

    minitrans generate --checkpoint runs/input/best.npz "ROMEO:" --samples 3
    minitrans evaluate --checkpoint runs/input/best.npz --data test.txt

A character the model never saw has no id it could read: a prompt or a
file holding one is refused, in one line that names and counts them.
"""

from minitrans.core import backend
from minitrans.data import pad
from minitrans.data.text_corpus import EXAMPLES
from minitrans.data.vocab import UNK_ID, DataError
from minitrans.decoding import generate as continue_prompt
from minitrans.decoding.input_checks import check_rows_fit, room_after_prompt
from minitrans.training.text_recipe import bits_per_character, text_loss
from minitrans.training.text_run import text_file_tokens


def prompt_ids(task, text):
    """The ids of the prompt ``text``'s characters; an empty prompt, or one
    with characters the model lacks, refused."""
    if not text:
        raise DataError("prompt: empty, expected at least one character: a model trained on "
                        "a text continues a text")
    tokens = task.tokenizer.split(text)
    ids = task.vocab.encode(tokens)
    unknown = [token for token, i in zip(tokens, ids) if i == UNK_ID]
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
    for text in prompts:
        ids = prompt_ids(task, text)
        room = room_after_prompt(len(ids), model.config.max_len, "--max-tokens",
                                 args.max_tokens)
        prompt = backend.to_device(pad([ids] * args.samples))  # (samples, prompt), no padding
        new = continue_prompt(model, prompt, args.max_tokens or room, strategy="sample",
                              temperature=args.temperature, top_k=args.top_k,
                              top_p=args.top_p, rng=rng)
        for row in backend.to_numpy(new).tolist():
            print(text + task.tokenizer.join(task.vocab.decode(row)))
    return 0


def evaluate_text(args, model, task):
    """Print the mean cross-entropy per token, in nats, and the bits per
    character of ``model`` over every full window of the text ``args.data``."""
    block = model.config.max_len
    with text_file_tokens(args.data, task.vocab) as ids:
        if len(ids) < block + 1:
            raise DataError(f"{args.data}: {len(ids):,} characters, expected at least "
                            f"{block + 1:,} (one window of the model's {block} positions, "
                            "plus one)")
        loss, windows = text_loss(model, ids, block)
        left_out = len(ids) - 1 - windows * block  # after the last full window
    tokens = windows * block
    print(f"{windows:,} windows of {block} characters from {args.data} ({tokens:,} "
          f"predicted; the {left_out:,} after the last full window left out)")
    print(f"cross-entropy: {loss:.4f} nats per token")
    print(f"bits per character: {bits_per_character(loss, tokens, tokens):.4f}")
    return 0

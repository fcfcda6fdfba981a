"""``minitrans generate`` and ``minitrans attention``: explore a trained model.

    minitrans generate --checkpoint lm.npz "12+" --temperature 0.8 --top-k 5 --samples 5
    minitrans generate --pretrained gpt2/ "Once upon a time" --top-p 0.9 --max-tokens 40
    minitrans attention --checkpoint CK "a sentence" --out attn.png [--layer L]

``generate`` samples continuations of a prompt from a decoder-only model
(``translate`` is the command for an encoder-decoder model), or from a
pretrained GPT-2 or Llama folder with its own tokenizer; ``attention``
draws the attention maps of a greedily decoded text, for both model kinds.
"""

import os

import numpy as np

from minitrans.cli import flags, pretrained_folder, text_input, text_model
from minitrans.core import backend
from minitrans.data import BOS_ID, EOS, pad
from minitrans.data.tasks import TEXT
from minitrans.decoding import generate as continue_prompt
from minitrans.decoding.input_checks import check_rows_fit, room_after_prompt
from minitrans.decoding.sampling import FirstIdsOnly
from minitrans.training import attention_maps, experiment
from minitrans.training.run_files import plots


DEFAULT_OUT = "attention.png"
# Formats every matplotlib of the last ten years writes (it knows the format
# by the extension, any case); newer ones write more (.webp, .avif).
IMAGE_EXTENSIONS = (".png", ".pdf", ".svg", ".jpg", ".jpeg", ".tif", ".tiff", ".eps", ".ps")


def add_parsers(commands):
    add_generate_parser(commands)
    add_attention_parser(commands)


def add_generate_parser(commands):
    generate = commands.add_parser(
        "generate",
        help="sample continuations of a prompt from a decoder-only model (train lm)",
        description="Sample continuations of a prompt from a decoder-only checkpoint, or from "
        "a pretrained GPT-2 or Llama folder (--pretrained, with its own tokenizer): each "
        "step divides the logits by the temperature, keeps the top-k, then the smallest set "
        "of tokens holding top-p of the probability, and draws one. Prints one line per "
        "sample: the prompt followed by its continuation, up to <eos> (a pretrained model's "
        "end-of-text token).",
        formatter_class=flags.HelpFormatter,
    )
    source = generate.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", metavar="FILE",
                        help="a decoder-only checkpoint of minitrans (train lm) (default: none; "
                        "this or --pretrained is required)")
    source.add_argument("--pretrained", metavar="FOLDER",
                        help="a GPT-2 or Llama model folder in the Hugging Face Hub layout: "
                        "config.json, model.safetensors and its tokenizer (tokenizer.json, or "
                        "vocab.json and merges.txt); samples end at its end-of-text token "
                        "(config.json's eos_token_id, else <|endoftext|>) (default: none; this or "
                        "--checkpoint is required)")
    generate.add_argument(
        "prompt",
        nargs="?",
        help="the text to continue (default: every line of standard input, each a prompt)",
    )
    generate.add_argument(
        "--temperature",
        type=flags.positive_number,
        default=1.0,
        help="divides the logits: below 1 sharper, above 1 flatter (default 1.0)",
    )
    generate.add_argument(
        "--top-k",
        type=flags.positive_int,
        default=None,
        help="draw only from the k most probable tokens (default: all)",
    )
    generate.add_argument(
        "--top-p",
        type=flags.probability_above_zero,
        default=None,
        help="draw only from the most probable tokens whose probabilities "
        "add up to p, in (0, 1] (default: all)",
    )
    generate.add_argument(
        "--samples",
        type=flags.sample_count,
        default=1,
        help=f"samples per prompt, decoded as one batch: at most {flags.MAX_SAMPLES}, and "
        "as many as the machine's memory holds (default 1)",
    )
    generate.add_argument(
        "--max-tokens",
        type=flags.positive_int,
        default=None,
        help="at most this many new tokens per sample (default: as many as "
        "the model has positions left after the prompt)",
    )
    flags.add_seed(generate, "of the draws: the same seed, the same samples")
    flags.add_device(generate)
    generate.set_defaults(run=run_generate)


def add_attention_parser(commands):
    attention = commands.add_parser(
        "attention",
        help="save heat maps of every layer's and head's attention on a text",
        description="Decode a text greedily (a translation, or a prompt's continuation) and "
        "save its attention as a grid of heat maps: a row per layer, a column per head. "
        "An encoder-decoder model gives three files, OUT's name with -encoder, -decoder and "
        "-cross before its extension (encoder self-attention, decoder self-attention, "
        "cross-attention); a decoder-only model gives OUT, its self-attention over the "
        "prompt and the continuation. OUT may be a folder (the files are named after "
        f"{DEFAULT_OUT} inside it); a name without an extension gets .png. The paths "
        "printed are those of the files written.",
        formatter_class=flags.HelpFormatter,
    )
    flags.add_checkpoint(attention)
    attention.add_argument("text", help="the sentence to translate, or the prompt to continue")
    attention.add_argument(
        "--out",
        default=DEFAULT_OUT,
        help=f"image file ending in {', '.join(IMAGE_EXTENSIONS)}, or in none (.png is "
        "added); its folder must exist. An existing folder: the files go inside it, named "
        f"after {DEFAULT_OUT} (default {DEFAULT_OUT})",
    )
    attention.add_argument(
        "--layer",
        type=flags.non_negative_int,
        default=None,
        help="draw only this layer, counted from 0 (default: every layer)",
    )
    flags.add_device(attention)
    attention.set_defaults(run=run_attention)


def run_generate(args):
    text_input.check_utf8("prompt", args.prompt)
    flags.use_device(args)
    if args.pretrained is not None:
        return run_generate_pretrained(args)
    model, task = experiment.load_trained(args.checkpoint)
    if task.kind != "lm":
        raise ValueError(
            f"--checkpoint: {args.checkpoint} holds an encoder-decoder model; "
            "use 'minitrans translate' for it (generate continues a prompt with "
            "a decoder-only model)"
        )
    prompts = [args.prompt] if args.prompt is not None else text_input.input_lines()
    if task.name == TEXT:  # trained on a text's windows: no <bos>
        return text_model.generate_text(args, model, task, prompts)
    check_rows_fit("--samples", args.samples, model.config, what="samples")  # before any work
    rng = backend.device_rng(args.seed)  # one generator for every prompt: a seed, one output
    for text in prompts:
        tokens = task.tokenizer.split(text)
        room = room_after_prompt(len(tokens), model.config.max_len, "--max-tokens",
                                 args.max_tokens, with_bos=True)
        text_input.warn_unknown(task, text)
        ids = [BOS_ID] + task.vocab.encode(tokens)
        prompt = backend.to_device(pad([ids] * args.samples))  # (samples, 1 + T_prompt)
        new = continue_prompt(
            model,
            prompt,
            args.max_tokens or room,
            strategy="sample",
            temperature=args.temperature,
            top_k=args.top_k,
            top_p=args.top_p,
            rng=rng,
        )
        for row in backend.to_numpy(new).tolist():
            print(task.tokenizer.join(tokens + task.vocab.decode(row)))
    return 0


def run_generate_pretrained(args):
    """generate --pretrained: the folder's tokenizer encodes each prompt and
    decodes its continuation, which stops at the end-of-text token."""
    model, tokenizer, info = pretrained_folder.load_model(args.pretrained, "--pretrained")
    check_rows_fit("--samples", args.samples, model.config, what="samples")
    eos = pretrained_folder.eos_id(info, tokenizer)
    start = info.bos_token_id if isinstance(info.bos_token_id, int) else eos
    rng = backend.device_rng(args.seed)
    prompts = [args.prompt] if args.prompt is not None else text_input.input_lines()
    for text in prompts:
        ids = pretrained_folder.encode(tokenizer, text)
        if not ids:  # an empty prompt: start from the beginning-of-text token
            if start is None:
                raise ValueError("prompt: empty, and the model names no beginning- or "
                                 "end-of-text token to start from; give a prompt")
            ids = [start]
        room = room_after_prompt(len(ids), model.config.max_len, "--max-tokens", args.max_tokens)
        prompt = backend.to_device(np.array([ids] * args.samples, dtype=np.int64))
        # Ids from len(tokenizer) on are rows of a padded embedding, no token's
        new = continue_prompt(FirstIdsOnly(model, len(tokenizer)), prompt,
                              args.max_tokens or room, eos_id=eos, pad_id=None,
                              strategy="sample", temperature=args.temperature,
                              top_k=args.top_k, top_p=args.top_p, rng=rng)
        for row in backend.to_numpy(new).tolist():
            if eos in row:
                row = row[:row.index(eos)]
            print(_continued(tokenizer, text, ids, row))
    return 0


def _continued(tokenizer, text, ids, new):
    """The prompt as typed followed by the decoded continuation: the text of
    the prompt's and the new ids together, less that of the prompt's alone
    (decoding the continuation alone could lose the space between)."""
    special = getattr(tokenizer, "special_ids", set())
    prompt_ids = [i for i in ids if i not in special]
    before = tokenizer.decode(prompt_ids)
    whole = tokenizer.decode(prompt_ids + [i for i in new if i not in special])
    return text + whole[len(before):] if whole.startswith(before) else whole


def run_attention(args):
    text_input.check_utf8("text", args.text)
    out = _image_path(args.out)  # before the model is read: a typo costs no decoding
    flags.use_device(args)
    model, task = experiment.load_trained(args.checkpoint)
    task = text_model.attention_task(task, args.checkpoint)
    if args.layer is not None and args.layer >= model.config.N:
        raise ValueError(
            f"--layer: expected an integer in [0, {model.config.N - 1}] (the model "
            f"has N={model.config.N} layers), got {args.layer}"
        )
    layers = range(model.config.N) if args.layer is None else [args.layer]
    panels, output = attention_maps.decode_and_attend(model, task, args.text)
    words = output[:-1] if output[-1:] == [EOS] else output
    print(f"{'continuation' if task.kind == 'lm' else 'translation'}: {task.tokenizer.join(words)}")
    for kind, panel in panels.items():
        path = out if task.kind == "lm" else _with_suffix(out, kind)
        plots.save_attention_grid(
            path,
            panel.weights[list(layers)],
            panel.queries,
            panel.keys,
            f"{TITLES[kind]}: {args.text!r}",
            layers=layers,
        )
        print(f"{kind} attention: {path}")
    return 0


TITLES = {
    "encoder": "encoder self-attention",
    "decoder": "decoder self-attention (causal)",
    "cross": "cross-attention, output over source",
}


def _image_path(out):
    """--out as the image file to write: inside a folder, DEFAULT_OUT; a name
    without an extension gets .png (matplotlib would add it when saving, and
    the path printed would not be the file written); an extension that is
    not an image format is refused."""
    if os.path.isdir(out):
        return os.path.join(out, DEFAULT_OUT)
    if out.endswith(("/", os.sep)):  # meant as a folder, and there is none
        raise ValueError(f"--out: the folder {os.path.abspath(out)} does not exist")
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise ValueError(f"--out: the folder {folder} does not exist")
    stem, extension = os.path.splitext(out)
    if extension in ("", "."):  # "attn." too: matplotlib would write attn.png
        return f"{stem}.png"
    if extension.lower() not in IMAGE_EXTENSIONS:
        raise ValueError(f"--out: expected an image file ending in "
                         f"{', '.join(IMAGE_EXTENSIONS)}, got {out}")
    return out


def _with_suffix(path, kind):
    """attn.png -> attn-cross.png"""
    stem, extension = os.path.splitext(path)
    return f"{stem}-{kind}{extension}"

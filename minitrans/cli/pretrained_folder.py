"""What ``generate --pretrained`` and ``train --init-from`` share: a
pretrained model's folder (Hugging Face Hub layout, ``minitrans.pretrained``)
read with its tokenizer, its end-of-text token, and its tokenizer files
copied beside a fine-tuned model."""

import os
import shutil

from minitrans.data.pretrained_tokenizer import load_tokenizer
from minitrans.pretrained import load_pretrained
from minitrans.pretrained.architectures import architecture_of, model_config
from minitrans.files.model_folder import CONFIG_NAME, read_config

# Every file a tokenizer may be read from (data/pretrained_tokenizer.py), and
# the ones that describe it further, copied beside a fine-tuned model.
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer_config.json",
                   "special_tokens_map.json", "generation_config.json")
END_OF_TEXT = "<|endoftext|>"  # GPT-2's, when config.json names none


def check_folder(path, flag):
    """Refuse a ``path`` that is no folder, naming ``flag``."""
    if not os.path.isdir(path):
        what = "is not a folder" if os.path.exists(path) else "no such folder"
        raise ValueError(f"{flag}: {path}: {what}; expected a model folder with config.json, "
                         "model.safetensors and the tokenizer's files")


def planned_config(path):
    """The ModelConfig the folder's config.json describes, read before any tensor."""
    hub = read_config(path)
    where = os.path.join(path, CONFIG_NAME)
    return model_config(where, hub, architecture_of(where, hub))


def read_tokenizer(path, flag):
    """The folder's tokenizer, read before the model (a folder without one is
    refused before its weights are read)."""
    check_folder(path, flag)
    try:
        return load_tokenizer(path)
    except ValueError as error:
        raise ValueError(f"{flag}: {error}") from None


def load_model(path, flag):
    """(model, tokenizer, info) of the folder: the tokenizer first, then the
    model, whose memory ``load_pretrained`` checks before reading a tensor."""
    tokenizer = read_tokenizer(path, flag)
    model, _, info = load_pretrained(path, tokenizer=False)
    if len(tokenizer) > model.config.vocab_size:
        raise ValueError(f"{flag}: {path}: the tokenizer has {len(tokenizer)} tokens, more than "
                         f"the model's vocab_size {model.config.vocab_size}")
    return model, tokenizer, info


def eos_id(info, tokenizer):
    """The end-of-text token: config.json's eos_token_id (the first of a
    list), else the tokenizer's <|endoftext|>, else None (no token ends a
    sample)."""
    eos = info.eos_token_id
    if isinstance(eos, list):
        eos = eos[0] if eos else None
    if isinstance(eos, int) and not isinstance(eos, bool):
        return eos
    found = [token_id for token_id, token in tokenizer.tokens.items() if token == END_OF_TEXT]
    return found[0] if found else None


def encode(tokenizer, text):
    """A prompt's ids, with the tokens the tokenizer's template puts before a
    text (Llama's <s>); GPT-2's vocab.json/merges.txt has none."""
    try:
        return list(tokenizer.encode(text, add_special_tokens=True))
    except TypeError:  # GPT2Tokenizer: no template
        return list(tokenizer.encode(text))


def copy_tokenizer_files(source, target):
    """Copy the tokenizer's files of folder ``source`` into ``target``; returns their names."""
    copied = []
    for name in TOKENIZER_FILES:
        if os.path.isfile(os.path.join(source, name)):
            shutil.copyfile(os.path.join(source, name), os.path.join(target, name))
            copied.append(name)
    return copied

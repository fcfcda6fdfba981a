"""What ``generate --pretrained`` and ``train --init-from`` share: a
pretrained model's folder (Hugging Face Hub layout, ``minitrans.pretrained``)
read with its tokenizer, and its end-of-text token. (A fine-tuned model's
folder gets the tokenizer's files by ``save_pretrained(..., copy_from=)``.)"""

import os

from minitrans.data.pretrained_tokenizer import load_tokenizer
from minitrans.pretrained import load_pretrained
from minitrans.pretrained.architectures import architecture_of, model_config
from minitrans.core import checks
from minitrans.files.model_folder import CONFIG_NAME, read_config
from minitrans.files.rules import FileError, short

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


def load_model(path, flag, also_needed=None):
    """(model, tokenizer, info) of the folder: the tokenizer first, then the
    model, whose memory ``load_pretrained`` checks before reading a tensor
    (with ``also_needed``, (bytes, what for), of what follows)."""
    tokenizer = read_tokenizer(path, flag)
    model, _, info = load_pretrained(path, tokenizer=False, also_needed=also_needed)
    if len(tokenizer) > model.config.vocab_size:
        raise ValueError(f"{flag}: {path}: the tokenizer has {len(tokenizer)} tokens, more than "
                         f"the model's vocab_size {model.config.vocab_size}")
    check_special_ids(os.path.join(path, CONFIG_NAME), info.hub_config, tokenizer)
    return model, tokenizer, info


def check_special_ids(where, hub_config, tokenizer):
    """config.json's bos_token_id and eos_token_id (a list of ids too) are
    null or ids of the tokenizer's tokens: an empty prompt starts from the
    first, samples end at the second, and an id of no token would be blamed
    on the prompt, or never end a sample."""
    count = len(tokenizer)
    for field in ("bos_token_id", "eos_token_id"):
        value = hub_config.get(field)
        ids = value if isinstance(value, list) and field == "eos_token_id" else [value]
        if value is not None and not all(checks.is_int(i, 0, count - 1) for i in ids):
            raise FileError(f"{where}: {field}: expected null or the id of one of the "
                            f"tokenizer's {count} tokens (0 to {count - 1}), got {short(value)}")


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

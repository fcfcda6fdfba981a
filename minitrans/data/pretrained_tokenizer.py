"""``load_tokenizer(folder)``: the tokenizer of a pretrained model's folder
in the Hugging Face Hub layout, chosen by the files present.

    tokenizer.json              -> HFTokenizer (Llama 2, Llama 3, GPT-2 too)
    vocab.json + merges.txt     -> GPT2Tokenizer (GPT-2's original files)

tokenizer.json is preferred where both are present: it says everything
(added tokens, the pre-tokenizer's pattern), where the older pair leaves
the pipeline to be known. Both tokenizers answer ``encode(text)`` and
``decode(ids)``.
"""

import os

from minitrans.data.gpt2_tokenizer import GPT2Tokenizer
from minitrans.data.hf_tokenizer import HFTokenizer
from minitrans.files.model_folder import GPT2_TOKENIZER, HF_TOKENIZER
from minitrans.files.tokenizer_files import TokenizerFileError


def load_tokenizer(folder):
    """The tokenizer read from ``folder``; a ``TokenizerFileError`` (a
    ValueError) when it holds none of the layouts or a file is malformed."""
    def path(name):
        return os.path.join(folder, name)

    if not os.path.isdir(folder):
        raise TokenizerFileError(f"{os.fspath(folder)}: not a folder")
    if os.path.isfile(path(HF_TOKENIZER)):
        return HFTokenizer.from_file(path(HF_TOKENIZER))
    if all(os.path.isfile(path(name)) for name in GPT2_TOKENIZER):
        return GPT2Tokenizer.from_files(*(path(name) for name in GPT2_TOKENIZER))
    raise TokenizerFileError(f"{os.fspath(folder)}: no tokenizer found: expected tokenizer.json, "
                             "or vocab.json with merges.txt")

"""Files a user hands us, read as untrusted input: checkpoints, pretrained
model folders (config.json, safetensors), corpora, texts and tokenizer files.

The rules every reader and writer here keeps live in ``rules`` (its
docstring says them once): a file's kind and size checked before it is
read, text in UTF-8, JSON strict and bounded, names kept inside their
folder, one ``FileError`` naming the file and the field, files written
atomically and folders swapped in whole (``folder_swap``). Each format's
parser is one module that reads through them:

    checkpoint_file     a minitrans checkpoint (.npz)
    safetensors_file    one .safetensors file
    model_folder        a pretrained model's folder (config.json, index, shards)
    tsv                 a parallel corpus (source<TAB>target)
    tokenizer_files     a pretrained tokenizer's files
    text_stream         a plain UTF-8 text of any size, read in chunks
    token_file          a text's token ids, written and memory-mapped (.npy)
"""

from minitrans.files.rules import FileError  # noqa: F401

"""Pretrained models from a local folder, in the layout the Hugging Face Hub
uses: ``config.json`` beside ``model.safetensors`` (or, for a large model,
``model.safetensors.index.json`` and shards ``model-00001-of-00002.safetensors``).

The files themselves are read and written by ``minitrans.files``
(``safetensors_file``, ``model_folder``), by the rules every file a user
hands us is read by (``files.rules``): anything malformed is a one-line
``PretrainedError`` (``FileError``) naming the file and the tensor or field.
Reading and writing tensors needs the ``safetensors`` package
(``pip install "minitrans[pretrained]"``); importing these modules does not.

On top of these files, GPT-2 and Llama models: ``load_pretrained(folder)`` gives
(model, tokenizer or None, info), a ``DecoderOnlyLM`` of minitrans's own
layers with the folder's weights; ``save_pretrained(model, folder,
architecture)`` writes one back as Hugging Face's ``transformers`` reads
it. ``architectures`` maps config.json to a ``ModelConfig`` and back,
``tensor_names`` every tensor's name to minitrans's parameters (the table is
in its docstring), ``load`` does the rest.
"""

from minitrans.pretrained.architectures import GPT2, LLAMA
from minitrans.files.rules import PretrainedError
from minitrans.files.model_folder import loaded_bytes, read_folder, write_folder
from minitrans.pretrained.load import PretrainedInfo, load_pretrained, save_pretrained

__all__ = ["GPT2", "LLAMA", "PretrainedError", "PretrainedInfo", "load_pretrained",
           "loaded_bytes", "read_folder", "save_pretrained", "write_folder"]

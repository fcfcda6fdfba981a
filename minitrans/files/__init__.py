"""Files a user hands us, read as untrusted input: checkpoints, pretrained
model folders (config.json, safetensors), corpora and tokenizer files.

The rules every reader here keeps (``rules``): a file's size and kind are
checked before it is read, JSON is strict and bounded, text must be UTF-8,
and every problem is one ``FileError`` naming the file and the field. Each
format's parser is one module; writers write atomically."""

from minitrans.files.rules import FileError  # noqa: F401

"""A pretrained model's folder, in the layout the Hugging Face Hub uses:

    config.json                       the model's sizes and kind: a JSON object
                                      with "model_type", "architectures", ...
    model.safetensors                 every tensor, in one file, or, for a large
                                      model, instead of it:
    model.safetensors.index.json      which shard holds which tensor
    model-00001-of-00002.safetensors  the shards
    model-00002-of-00002.safetensors

The index is a JSON object whose "weight_map" maps every tensor's name to
the file name of its shard (its "metadata", such as "total_size", is not
needed here and is not read):

    {"metadata": {"total_size": 2949120},
     "weight_map": {"embed.weight": "model-00001-of-00002.safetensors",
                    "lm_head.weight": "model-00002-of-00002.safetensors"}}

Beside them, a tokenizer's files (TOKENIZER_FILES, read by
``data.pretrained_tokenizer``) and generation_config.json.

Where both a single file and an index are present, the single file is read,
as Hugging Face's ``from_pretrained`` does. Every file is untrusted input,
read by the rules of ``files.rules``: config.json and the index are bounded,
strict JSON objects; a shard's name must be a plain ``.safetensors`` file
name (``rules.inside_folder``), so that an index cannot send the reader out
of the folder ("../../etc/passwd", "/dev/zero");
the shards are read by ``safetensors_file``, every header checked before any
tensor is read, and must hold exactly the tensors the index gives them, so
that every tensor is named once. A shard may be a link (the Hub's cache links
its snapshots' files to blobs elsewhere): the name is checked, not the target.

``loaded_bytes`` says from the headers alone how much memory the tensors will
take once read; ``read_folder`` compares it with the machine's memory
(``core.memory_budget``) before it reads a tensor.

``write_folder`` writes the whole folder beside its place and swaps it in
(``folder_swap``): a write killed at any moment leaves the old folder or the
new one, whole, never new weights beside an old config.json.
"""

import json
import os
import shutil

from minitrans.core import backend, memory_budget
from minitrans.files.folder_swap import swapped_folder
from minitrans.files.rules import (PretrainedError, atomic_file, inside_folder,
                                   parse_json_object, read_json_file, short)
from minitrans.files.safetensors_file import read_header, read_safetensors, save_safetensors

__all__ = ["PretrainedError", "check_fits", "has_tokenizer", "loaded_bytes", "read_config",
           "read_folder", "read_headers", "write_folder"]

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
INDEX_NAME = "model.safetensors.index.json"
SUFFIX = ".safetensors"
# Hugging Face's loader refuses a safetensors file whose metadata names no
# format it knows ("np" is not one); the tensors' bytes are the same as torch's.
DEFAULT_METADATA = {"format": "pt"}
# A tokenizer's files: Hugging Face's one file, which says everything, or
# GPT-2's original pair (data/pretrained_tokenizer.py reads either), and two
# that describe it; a folder holding the first of either layout has a tokenizer.
HF_TOKENIZER = "tokenizer.json"
GPT2_TOKENIZER = ("vocab.json", "merges.txt")
TOKENIZER_FILES = (HF_TOKENIZER, *GPT2_TOKENIZER, "tokenizer_config.json",
                   "special_tokens_map.json")
TOKENIZER_MARKERS = (HF_TOKENIZER, GPT2_TOKENIZER[0])
# What is copied beside a model written from another one's folder.
COPIED_FILES = (*TOKENIZER_FILES, "generation_config.json")


def read_folder(path, available=None):
    """(config, arrays) of the model folder at ``path``: the object in
    config.json and name -> NumPy array of every tensor (BF16 widened to
    float32). Refused before any tensor is read when they would take more
    than ``available`` bytes (default: the machine's memory, see
    ``check_fits``)."""
    path = _folder(path)
    config = read_config(path)
    headers = read_headers(path)
    check_fits(path, sum(header.loaded_bytes for header in headers), available)
    arrays = {}
    for header in headers:
        arrays.update(read_safetensors(header.path, header))
    return config, arrays


def read_config(path):
    """The JSON object in the folder's config.json. Its "model_type" and
    "architectures" are left for the code that builds the model to judge."""
    path = _folder(path)
    config = os.path.join(path, CONFIG_NAME)
    if not os.path.lexists(config):
        raise PretrainedError(f"{path}: no {CONFIG_NAME}, expected one beside the weights")
    return read_json_file(config, "the model's config")


def loaded_bytes(path):
    """The bytes every tensor of the folder will take once read (BF16 as
    float32), from the files' headers alone; a caller can check memory
    with it before loading anything."""
    return sum(header.loaded_bytes for header in read_headers(_folder(path)))


def check_fits(path, needed, available=None):
    """Refuse ``needed`` bytes of tensors of the folder ``path`` when they are
    more than ``available`` (default: ``memory_budget.machine_memory()``, a
    GPU's own memory on CuPy; no check where it is unknown)."""
    available = memory_budget.machine_memory() if available is None else available
    if available is None or needed <= available:
        return
    where = "the GPU" if backend.backend_name() == "cupy" else "this machine"
    raise PretrainedError(f"{path}: its tensors take {memory_budget.format_bytes(needed)} once "
                          f"read, expected at most what {where} has, "
                          f"{memory_budget.format_bytes(available)}")


def read_headers(path):
    """The checked headers of the folder's weight files: model.safetensors,
    or every shard the index names, checked against the index."""
    path = _folder(path)
    single = os.path.join(path, WEIGHTS_NAME)
    if os.path.lexists(single):
        return [read_header(single)]
    index = os.path.join(path, INDEX_NAME)
    if not os.path.lexists(index):
        raise PretrainedError(f"{path}: no {WEIGHTS_NAME} or {INDEX_NAME}")
    weight_map = read_index(index)
    shards = {}
    for name, shard in weight_map.items():
        shards.setdefault(shard, set()).add(name)
    headers = [read_header(os.path.join(path, shard)) for shard in sorted(shards)]
    for header, shard in zip(headers, sorted(shards)):
        _check_shard(index, weight_map, header, shard, shards[shard])
    return headers


def read_index(index):
    """The weight map of the index file at ``index``: tensor name -> the
    file name of its shard, each checked to be a plain file name."""
    content = read_json_file(index, "the weight index")
    weight_map = content.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise PretrainedError(f"{index}: weight_map is {short(weight_map)}, expected an object "
                              "naming the shard of every tensor")
    for name, shard in weight_map.items():
        where = f"{index}: weight_map puts tensor {short(name)} in"
        if not isinstance(shard, str) or not shard.endswith(SUFFIX) or shard == SUFFIX:
            raise PretrainedError(f"{where} {short(shard)}, expected the name of a {SUFFIX} "
                                  "file in the folder (no folder, no '..')")
        inside_folder(os.path.dirname(index), shard, where)
    return weight_map


def _check_shard(index, weight_map, header, shard, expected):
    """The shard holds exactly the tensors the index gives it: a tensor of
    two shards, or of a shard the index does not say, would be read twice
    or silently taken from the wrong file."""
    held = set(header.tensors)
    missing, extra = sorted(expected - held), sorted(held - expected)
    if missing:
        raise PretrainedError(f"{index}: weight_map puts tensor {short(missing[0])} in {shard}, "
                              "which does not hold it")
    if extra:
        name = extra[0]
        said = (f"which the index puts in {weight_map[name]}" if name in weight_map
                else "which the index does not name")
        raise PretrainedError(f"{header.path}: holds tensor {short(name)}, {said}; expected "
                              "every tensor in the one shard the index names")


def write_folder(path, config, arrays, metadata=None, copy_from=None):
    """Write config.json (``config``, a JSON object) and model.safetensors
    (``arrays``: name -> array; ``metadata``: text -> text, by default
    DEFAULT_METADATA) as the folder ``path``, with the COPIED_FILES that the
    folder ``copy_from`` holds (a tokenizer's files). The folder is written
    beside and swapped in whole (``folder_swap``); an existing folder is
    replaced only when it holds nothing but a model's files
    (``check_replaceable``). The config is checked as ``read_config`` would
    read it before anything is written. Returns the names of the copied files."""
    path = os.fspath(path)
    text = _config_text(os.path.join(path, CONFIG_NAME), config)
    check_replaceable(path)
    metadata = DEFAULT_METADATA if metadata is None else metadata
    copied = []
    with swapped_folder(path) as staging:
        save_safetensors(os.path.join(staging, WEIGHTS_NAME), arrays, metadata)
        with atomic_file(os.path.join(staging, CONFIG_NAME)) as temporary:
            with open(temporary, "w", encoding="utf-8") as file:
                file.write(text)
        for name in COPIED_FILES if copy_from is not None else ():
            if os.path.isfile(os.path.join(copy_from, name)):
                shutil.copyfile(os.path.join(copy_from, name), os.path.join(staging, name))
                copied.append(name)
    return copied


def check_replaceable(path):
    """Refuse to replace a folder that holds more than a model's files (a
    notes file, a subfolder): replacing the folder whole would lose them."""
    if not os.path.isdir(path):
        return
    for name in sorted(os.listdir(path)):
        model_file = name in (CONFIG_NAME, INDEX_NAME, *COPIED_FILES) or name.endswith(SUFFIX)
        if not model_file or not os.path.isfile(os.path.join(path, name)):
            raise PretrainedError(f"{path}: holds {short(name)}, which is no model's file; "
                                  "expected a model's folder to replace, or none")


def has_tokenizer(path):
    """Whether the folder ``path`` holds one of the TOKENIZER_MARKERS."""
    return any(os.path.lexists(os.path.join(path, name)) for name in TOKENIZER_MARKERS)


def _config_text(where, config):
    """config.json's text, written only if read_config would accept it: a
    key of 1 and one of "1" would both become "1", a NaN would be refused."""
    if not isinstance(config, dict):
        raise PretrainedError(f"{where}: config is {type(config).__name__}, expected a dict")
    try:
        text = json.dumps(config, indent=2) + "\n"
    except (TypeError, ValueError) as error:
        raise PretrainedError(f"{where}: config cannot be written as JSON ({error})") from None
    parse_json_object(where, "the model's config", text)
    return text


def _folder(path):
    path = os.fspath(path)
    if not os.path.isdir(path):
        what = "not a folder" if os.path.exists(path) else "no such folder"
        raise PretrainedError(f"{path}: {what}, expected a model's folder")
    return path

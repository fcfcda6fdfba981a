"""A pretrained GPT-2 or Llama model from a local folder in the Hugging Face
Hub layout, as a minitrans ``DecoderOnlyLM`` of minitrans's own layers, and
the way back.

``load_pretrained(folder)`` reads config.json (``architectures``), the
headers of the weights (``files.model_folder``), checks every tensor's name,
shape and dtype against the config (``tensor_names``) and, once, the memory
it will take before any tensor is read (``check_memory``), builds the model
in the current backend and dtype (``minitrans.using(dtype="float64")``),
copies each tensor into its parameters (a NaN or an infinity among them is
refused, naming the file and the tensor), and reads the tokenizer if the
folder has one.

``save_pretrained(model, folder, architecture)`` writes config.json and
model.safetensors as Hugging Face's ``save_pretrained`` would, so that
``transformers``' ``from_pretrained`` loads the same model; the folder is
written beside and swapped in whole.

Every problem is one line, a ``PretrainedError`` naming the file and the
tensor or field (a tokenizer's, a ``TokenizerFileError``).
"""

import os
from typing import NamedTuple

from minitrans.core import backend, memory_budget
from minitrans.data.pretrained_tokenizer import load_tokenizer
from minitrans.model.language_model import DecoderOnlyLM
from minitrans.pretrained.architectures import (MODEL_TYPES, architecture_of,
                                                check_expressible, hub_config, model_config)
from minitrans.files.model_folder import (CONFIG_NAME, has_tokenizer, read_config,
                                          read_headers, write_folder)
from minitrans.files.rules import PretrainedError, short
from minitrans.files.safetensors_file import read_safetensors
from minitrans.pretrained.tensor_names import links, match_names, to_hub, to_ours

__all__ = ["PretrainedInfo", "load_pretrained", "save_pretrained"]


class PretrainedInfo(NamedTuple):
    """What ``load_pretrained`` found besides the model.

    architecture: "GPT2LMHeadModel" or "LlamaForCausalLM"
    hub_config:   config.json's object, as read
    ignored:      names of the buffers in the files that were not loaded
                  (they are recomputed: a causal mask, rotary frequencies)
    dropped:      names of the tensors loaded only in part: GPT-2's c_attn
                  biases, whose key third changes no score
    """
    architecture: str
    hub_config: dict
    ignored: tuple
    dropped: tuple

    @property
    def eos_token_id(self):
        """config.json's end-of-text token (an id, a list of ids, or None)."""
        return self.hub_config.get("eos_token_id")

    @property
    def bos_token_id(self):
        return self.hub_config.get("bos_token_id")


def load_pretrained(path, tokenizer=True, available=None, rng=0, also_needed=None):
    """(model, tokenizer or None, PretrainedInfo) of the model folder ``path``.

    The model is a ``DecoderOnlyLM`` in evaluation mode, in the current
    backend and dtype, with ``config.pad_id=None`` (no padding token).
    ``tokenizer``: read the folder's tokenizer when it has one (None when it
    has none, or with ``tokenizer=False``). ``available``: the bytes the
    arrays may take (default: the machine's memory, or the GPU's on CuPy).
    ``rng`` seeds the initialisation that the loaded tensors overwrite.
    ``also_needed``: (bytes, what for) of what the caller will do with the
    model, fine-tuning it, checked in the same one check of memory
    (``check_memory``) before any tensor is read.
    """
    path = os.fspath(path)
    hub = read_config(path)
    where = os.path.join(path, CONFIG_NAME)
    architecture = architecture_of(where, hub)
    config = model_config(where, hub, architecture)
    headers = read_headers(path)
    found, ignored = match_names(headers, config, architecture)
    check_memory(path, headers, config, available, also_needed)
    model = DecoderOnlyLM(config, rng=rng)
    _copy_in(model, found)
    model.eval()
    info = PretrainedInfo(architecture, hub, tuple(ignored),
                          tuple(name for link, (name, _) in found.items() if None in link.ours))
    return model, _tokenizer(path) if tokenizer else None, info


def check_memory(path, headers, config, available=None, also_needed=None):
    """Refuse, before anything is read or built, a model that would not fit:
    the files' tensors and the model together, its parameters, their
    gradients (``add_param`` allocates one per parameter) and its tables, or
    ``also_needed`` (bytes, what for) where that is more. On CuPy the tensors
    lie in the host's memory and the model in the GPU's: the sum is an upper
    bound of either. This is the one check of the pretrained path."""
    itemsize = backend.get_dtype().itemsize
    read = sum(header.loaded_bytes for header in headers)
    needed = read + memory_budget.model_bytes(config) + config.parameter_count() * itemsize
    purpose = (f"loading takes about {memory_budget.format_bytes(needed)} (the tensors read, "
               f"the model's parameters, gradients and tables in {backend.get_dtype()})")
    if also_needed is not None and also_needed[0] > needed:
        needed = also_needed[0]
        purpose = f"{also_needed[1]} takes about {memory_budget.format_bytes(needed)}"
    available = memory_budget.machine_memory() if available is None else available
    if available is not None and needed > available:
        where = "the GPU" if backend.backend_name() == "cupy" else "this machine"
        raise PretrainedError(f"{path}: {purpose}, expected at most what {where} has, "
                              f"{memory_budget.format_bytes(available)}")


def _copy_in(model, found):
    """Copy every linked tensor into the model's parameters, in place, one
    file at a time (so that at most one file's arrays are held at once)."""
    params = {name: value for name, value, _ in model.named_parameters()}
    by_file = {}
    for link, (name, header) in found.items():
        by_file.setdefault(header.path, (header, []))[1].append((link, name))
    for header, pairs in by_file.values():
        arrays = read_safetensors(header.path, header, finite=True)  # no NaN weights
        for link, name in pairs:
            for ours, array in to_ours(link, arrays[name]).items():
                if tuple(params[ours].shape) != tuple(array.shape):  # the tables disagree
                    raise PretrainedError(f"{header.path}: tensor {short(name)} gives "
                                          f"{ours} the shape {list(array.shape)}, expected "
                                          f"{list(params[ours].shape)}")
                params[ours][...] = backend.to_device(array, dtype=params[ours].dtype)
        del arrays


def _tokenizer(path):
    """The folder's tokenizer, or None where it has no tokenizer files."""
    if not has_tokenizer(path):
        return None
    return load_tokenizer(path)


def save_pretrained(model, path, architecture, extra=None, copy_from=None):
    """Write ``model`` (a DecoderOnlyLM) into the folder ``path`` as
    ``architecture`` ("GPT2LMHeadModel" or "LlamaForCausalLM", or the
    model_type "gpt2" or "llama"): config.json and model.safetensors, the
    tensors in the model's dtype. ``extra``: more fields of config.json,
    none of those the model sets (``{"eos_token_id": info.eos_token_id}``).
    ``copy_from``: a folder whose tokenizer files are copied beside. The
    folder is written whole, beside, and swapped in (``write_folder``): a
    write killed halfway leaves the old folder as it was.
    A model the architecture cannot hold (other norms, positions, biases,
    ...) is refused, naming the first field that differs. Returns the
    folder's path."""
    path = os.fspath(path)
    where = os.path.join(path, CONFIG_NAME)
    by_type = {kind: name for name, kind in MODEL_TYPES.items()}
    architecture = by_type.get(architecture, architecture)
    if not isinstance(model, DecoderOnlyLM):
        raise PretrainedError(f"{path}: model is {type(model).__name__}, expected a "
                              "DecoderOnlyLM")
    check_expressible(where, model.config, architecture)
    hub = hub_config(model.config, architecture)
    params = {name: value for name, value, _ in model.named_parameters()}
    arrays = {link.file_name(architecture): to_hub(link, params)
              for link in links(model.config, architecture)}
    hub["dtype"] = str(params["embed.embedding.W_E"].dtype)  # what from_pretrained's "auto" takes
    clash = sorted(set(extra or {}) & set(hub))
    if clash:
        raise PretrainedError(f"{where}: extra sets {clash[0]!r}, which the model gives; "
                              "expected only fields it does not set")
    hub.update(extra or {})
    write_folder(path, hub, arrays, copy_from=copy_from)
    return path

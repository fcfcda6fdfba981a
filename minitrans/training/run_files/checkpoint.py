"""Checkpoints: what they hold, and how an older one is read as the current.

A checkpoint holds every parameter, the optimiser's state, the step, the
random-number state and the configs, so that training can resume exactly.
Arrays are stored under their qualified names ("param/encoder.layers.0...");
configs and other small records as JSON strings. The file itself (one
``.npz`` archive, written atomically, read as untrusted input without
pickle) is ``files.checkpoint_file``'s.

The record ``format_version`` says how parameters are named:

    version 1   (no record) the Add & Norm wrapper is named:
                "encoder.layers.0.self_attn.sublayer.W_Q", "...self_attn.norm.gamma",
                the pre-softmax projection "generator.W"
    version 2   the paper's sub-layers themselves: "encoder.layers.0.self_attn.W_Q.W",
                "...self_attn_norm.layer_norm.gamma"; still "generator.W"
    version 3   the pre-softmax projection after its class, OutputProjection:
                "output_projection.W", "output_projection.b"

``load_checkpoint`` brings an older file's arrays (parameters and optimiser
state alike: "param/NAME", "optim/m/NAME", ...) to the current names by a
chain of renaming steps, one per version, 1 -> 2 -> 3 (``RENAMING_STEPS``),
so that it loads, resumes and translates as before; a newer version is
refused.
"""

import contextlib
import os
import re

import numpy as np

from minitrans.core import backend, checks
from minitrans.files.checkpoint_file import (FORMAT, TEMP_SUFFIX,  # noqa: F401 (callers' names)
                                             CheckpointError, read_checkpoint, remove_unfinished,
                                             write_checkpoint)

FORMAT_VERSION = 3
# version 1 -> 2: "<block>.sublayer.W_Q" -> "<block>.W_Q.W", "<block>.sublayer.b_1" ->
# "<block>.W_1.b", "<block>.norm.gamma" -> "<block>_norm.layer_norm.gamma"
_V1_TO_V2 = [
    (re.compile(r"(self_attn|cross_attn|feed_forward)\.sublayer\.([Wb])_([QKVO12])$"),
     r"\1.W_\3.\2"),
    (re.compile(r"(self_attn|cross_attn|feed_forward)\.norm\.(gamma|beta)$"),
     r"\1_norm.layer_norm.\2"),
]
# version 2 -> 3: the model's attribute "generator" -> "output_projection", right
# after the kind of array ("param/", "optim/m/", "optim/velocity/", ...)
_V2_TO_V3 = [(re.compile(r"^(param|optim/\w+)/generator\."), r"\1/output_projection.")]


def save_checkpoint(path, arrays, records):
    """Write ``arrays`` (name -> array, any backend) and ``records`` (name ->
    JSON-serialisable value) to ``path`` atomically, with the format version."""
    content = {name: backend.to_numpy(value) for name, value in arrays.items()}
    write_checkpoint(os.fspath(path), content, {**records, "format_version": FORMAT_VERSION})


def load_checkpoint(path):
    """Read a checkpoint: (arrays as host NumPy arrays, records), the arrays
    named as in the current format version (an older file's are renamed).

    The file is untrusted input (``files.checkpoint_file``): every member's
    header is checked against the bytes really in the file before anything
    is allocated, so reading costs at most about the file's size. Raises
    CheckpointError, naming the file, when it is missing, truncated, not an
    ``.npz`` file, not written by minitrans, malformed, or written by a newer
    minitrans in a format version this one cannot read.
    """
    path = os.fspath(path)
    arrays, records = read_checkpoint(path)
    version = records.setdefault("format_version", 1)  # version 1 had no record
    if not checks.is_int(version, low=1):
        raise CheckpointError(f"{path}: malformed checkpoint, format_version is {version!r}")
    if version > FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: checkpoint format version {version}, newer than this minitrans reads "
            f"(up to {FORMAT_VERSION}); upgrade minitrans to load it"
        )
    records["format_version"] = FORMAT_VERSION
    return upgrade_arrays(path, arrays, version), records


def upgrade_arrays(path, arrays, version):
    """``arrays`` of format ``version`` under their current names. A file
    that holds an array under its old name and another under the new one
    is refused: renaming would silently drop one of them."""
    upgraded = {}
    for name, value in arrays.items():
        new_name = upgrade_name(name, version)
        if new_name in upgraded:
            raise CheckpointError(f"{path}: malformed checkpoint, two arrays of format version "
                                  f"{version} are both {new_name!r} once renamed")
        upgraded[new_name] = value
    return upgraded


def _renamed(name, renames):
    for pattern, replacement in renames:
        name = pattern.sub(replacement, name)
    return name


def rename_v1_to_v2(name):
    """An array's name in format version 2, from its name in version 1:
    "param/encoder.layers.0.self_attn.sublayer.W_Q" becomes
    "param/encoder.layers.0.self_attn.W_Q.W" (also under "optim/m/", ...);
    names that did not change come back as they are."""
    return _renamed(name, _V1_TO_V2)


def rename_v2_to_v3(name):
    """An array's name in format version 3, from its name in version 2:
    "param/generator.W" becomes "param/output_projection.W", "optim/m/generator.b"
    becomes "optim/m/output_projection.b"; other names come back as they are."""
    return _renamed(name, _V2_TO_V3)


# RENAMING_STEPS[v] takes a name of format version v to version v + 1.
RENAMING_STEPS = {1: rename_v1_to_v2, 2: rename_v2_to_v3}


def upgrade_name(name, version):
    """An array's name in the current format version, from its name in
    ``version`` (1 <= version <= FORMAT_VERSION): the renaming steps from
    that version on, in order."""
    for step_from in range(version, FORMAT_VERSION):
        name = RENAMING_STEPS[step_from](name)
    return name


def require(path, mapping, names, what):
    """Fail clearly when a checkpoint lacks some of the entries it needs."""
    missing = sorted(set(names) - set(mapping))
    if missing:
        shown = ", ".join(missing[:3]) + (" ..." if len(missing) > 3 else "")
        raise CheckpointError(f"{path}: checkpoint is missing {what}: {shown}")


@contextlib.contextmanager
def reading(path):
    """Report a record that is there but malformed (a missing field, a wrong
    type, a value out of range) as a CheckpointError naming the file."""
    try:
        yield
    except CheckpointError:
        raise
    except KeyError as error:
        raise CheckpointError(
            f"{path}: malformed checkpoint, a record lacks the field {error}"
        ) from None
    except (TypeError, ValueError, AttributeError) as error:
        raise CheckpointError(f"{path}: malformed checkpoint ({error})") from None


def check_arrays(path, arrays, prefix, model, what):
    """Every parameter of ``model`` has an array ``prefix + name`` in
    ``arrays``, of the parameter's shape, floating-point and finite.

    A checkpoint of another configuration is refused, naming the first
    mismatch; so is one with NaN or infinite weights, which would only make
    NaN outputs.
    """
    names = [name for name, _, _ in model.named_parameters()]
    require(path, arrays, [prefix + name for name in names], what)
    wanted = {prefix + name for name in names}
    extra = sorted(key for key in arrays if key.startswith(prefix) and key not in wanted)
    if extra:
        raise CheckpointError(f"{path}: {what} of no parameter of the model: {extra[:3]}")
    for name, value, _ in model.named_parameters():
        stored = arrays[prefix + name]
        if stored.shape != value.shape:
            raise CheckpointError(
                f"{path}: checkpoint of another model configuration: {prefix}{name} has shape "
                f"{stored.shape}, the model expects {tuple(value.shape)}"
            )
        if stored.dtype.kind != "f" or not np.isfinite(stored).all():
            problem = (
                f"dtype {stored.dtype}" if stored.dtype.kind != "f" else "NaN or infinite values"
            )
            raise CheckpointError(
                f"{path}: {prefix}{name} holds {problem}, expected finite floating-point numbers"
            )


def load_parameters(model, arrays, path, prefix="param/"):
    """Copy ``<prefix><name>`` arrays into the model's parameters, in place,
    after ``check_arrays``."""
    check_arrays(path, arrays, prefix, model, "parameters")
    for name, value, _ in model.named_parameters():
        value[...] = backend.to_device(arrays[f"{prefix}{name}"], dtype=value.dtype)

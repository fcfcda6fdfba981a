"""One ``.safetensors`` file, read as untrusted input and written atomically.

The format (github.com/huggingface/safetensors), every number little-endian:

    bytes 0 to 8        N, the header's length (an unsigned 64-bit integer)
    bytes 8 to 8 + N    the header: a JSON object in UTF-8, starting with "{",
                        perhaps padded with spaces at the end
    the rest            the data section: the tensors' bytes, one after another

A float32 matrix "w" of 2 x 3 and an int64 vector "ids" of 4 have the header

    {"__metadata__": {"format": "pt"},
     "w":   {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
     "ids": {"dtype": "I64", "shape": [4], "data_offsets": [24, 56]}}

The offsets count from the start of the data section: "w" is its bytes 0 to
24 (2 x 3 numbers of 4 bytes), "ids" its bytes 24 to 56 (4 of 8), and the
file is 8 + N + 56 bytes long. "__metadata__" (optional) maps text to text.

``read_header`` checks all of it against the file before any tensor is read,
so that a 1 kB file cannot make the reader allocate a terabyte: N at most
MAX_HEADER_BYTES and within the file, strict JSON (``rules``), every
entry's fields and types, a known dtype (DTYPES), a shape of non-negative
integers whose bytes are the entry's (end - begin == numbers x bytes per
number), offsets within the data section, and tensors that cover it with
no overlap and no gap, as the format requires. A truncated file fails there,
naming the tensor whose bytes are missing. ``read_safetensors`` then reads
the arrays with safetensors' NumPy API, except BF16, which that API cannot
read (NumPy has no bfloat16): those bytes are read here and widened to
float32 exactly (a bfloat16 is the top half of a float32, so its 16 bits
shifted left by 16 are that float32's bits).
"""

import math
import os
from typing import NamedTuple

import numpy as np

from minitrans.core import backend, checks
from minitrans.files.rules import (JSON_KINDS, MAX_JSON_BYTES, PretrainedError, atomic_file,
                                   parse_json_object, regular_file_size, short)

__all__ = ["DTYPES", "Header", "PretrainedError", "Tensor", "check_finite", "read_header",
           "read_safetensors", "save_safetensors"]

# The header's dtype -> how its bytes are laid out. BF16 is read as its raw
# 16 bits and widened to float32 (LOADED_ITEMSIZE: the bytes once loaded).
DTYPES = {"F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
          "BF16": np.dtype("<u2"), "I64": np.dtype("<i8"), "I32": np.dtype("<i4"),
          "I16": np.dtype("<i2"), "I8": np.dtype("i1"), "U8": np.dtype("u1"),
          "BOOL": np.dtype("?")}
LOADED_ITEMSIZE = {name: 4 if name == "BF16" else dtype.itemsize for name, dtype in DTYPES.items()}
# What can be written: NumPy's dtypes of the same names (NumPy has no bfloat16).
WRITABLE = {dtype.newbyteorder("="): name for name, dtype in DTYPES.items() if name != "BF16"}
# The reference reader allows 100 MB; this is the bound of every JSON text
# read here. At about 100 bytes a tensor, it is 160,000 tensors in one file.
MAX_HEADER_BYTES = MAX_JSON_BYTES
FIELDS = ("dtype", "shape", "data_offsets")
METADATA = "__metadata__"


class Tensor(NamedTuple):
    """One entry of a header; ``begin`` and ``end`` count from the start of
    the data section."""
    name: str
    dtype: str
    shape: tuple
    begin: int
    end: int

    @property
    def loaded_bytes(self):
        return math.prod(self.shape) * LOADED_ITEMSIZE[self.dtype]


class Header(NamedTuple):
    """A checked header: its tensors (name -> Tensor, in the header's order),
    its metadata (text -> text) and where its data section starts."""
    path: str
    tensors: dict
    metadata: dict
    data_start: int

    @property
    def loaded_bytes(self):
        """What the tensors take once read (BF16 as float32), from the header alone."""
        return sum(tensor.loaded_bytes for tensor in self.tensors.values())


def read_header(path):
    """The checked header of the ``.safetensors`` file at ``path`` (see the
    module's docstring); reads the header's bytes only."""
    path = os.fspath(path)
    size = regular_file_size(path, "a .safetensors file")
    if size < 8:
        raise PretrainedError(f"{path}: {size} bytes, expected at least the 8 bytes of a "
                              "safetensors header's length")
    with open(path, "rb") as file:
        length = int.from_bytes(file.read(8), "little")
        if length > MAX_HEADER_BYTES:  # refused unread: the bound is what keeps reading cheap
            raise PretrainedError(f"{path}: header of {length:,} bytes, expected at most "
                                  f"{MAX_HEADER_BYTES:,}")
        if 8 + length > size:
            raise PretrainedError(f"{path}: header of {length:,} bytes runs past the end of "
                                  f"the file ({size:,} bytes); truncated or not safetensors")
        raw = file.read(length)
    content = _parse_header(path, raw)
    metadata = _check_metadata(path, content.pop(METADATA, {}))
    data_bytes = size - 8 - length
    tensors = {name: _check_entry(path, name, entry, data_bytes)
               for name, entry in content.items()}
    _check_layout(path, tensors.values(), data_bytes)
    return Header(path, tensors, metadata, 8 + length)


def _parse_header(path, raw):
    if not raw.startswith(b"{"):  # the format requires it; it also turns other files away
        raise PretrainedError(f"{path}: header starts with {short(raw[:8])}, expected '{{' "
                              "(not a safetensors file?)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PretrainedError(f"{path}: header is not UTF-8 ({error.reason} at byte "
                              f"{8 + error.start})") from None
    return parse_json_object(path, "the header", text)


def _check_metadata(path, metadata):
    if not isinstance(metadata, dict) or not all(
            isinstance(key, str) and isinstance(value, str) for key, value in metadata.items()):
        raise PretrainedError(f"{path}: {METADATA} is {short(metadata)}, expected an object "
                              "of text values")
    return metadata


def _check_entry(path, name, entry, data_bytes):
    """The Tensor an entry of the header describes, its fields checked and
    its bytes found within the data section (``data_bytes`` long)."""
    where = f"{path}: tensor {short(name)}"
    if not isinstance(entry, dict) or sorted(entry) != sorted(FIELDS):
        got = (f"an object of {short(sorted(entry))}" if isinstance(entry, dict)
               else JSON_KINDS[type(entry)])
        raise PretrainedError(f"{where} is {got}, expected an object of the fields "
                              f"{', '.join(FIELDS)}")
    dtype, shape, offsets = (entry[field] for field in FIELDS)
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise PretrainedError(f"{where}: dtype {short(dtype)}, expected one of "
                              f"{', '.join(DTYPES)}")
    if not isinstance(shape, list) or not all(checks.is_int(n, low=0) for n in shape):
        raise PretrainedError(f"{where}: shape {short(shape)}, expected a list of "
                              "non-negative integers")
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(checks.is_int(n, low=0) for n in offsets) or offsets[0] > offsets[1]):
        raise PretrainedError(f"{where}: data_offsets {short(offsets)}, expected [begin, end] "
                              "with 0 <= begin <= end")
    begin, end = offsets
    needed = math.prod(shape) * DTYPES[dtype].itemsize
    if end - begin != needed:
        raise PretrainedError(f"{where}: shape {short(shape)} of {dtype} needs {needed:,} "
                              f"bytes, expected data_offsets that hold them, got {end - begin:,}")
    if end > data_bytes:
        raise PretrainedError(f"{where}: its bytes end at {end:,}, past the data section's "
                              f"{data_bytes:,} bytes; the file is truncated or its header wrong")
    return Tensor(name, dtype, tuple(shape), begin, end)


def _check_layout(path, tensors, data_bytes):
    """The tensors, in the order of their bytes, follow one another from the
    data section's start to its end: bytes shared by two tensors would make
    writing one change the other, and bytes of none are not the format."""
    position, previous = 0, None
    for tensor in sorted(tensors, key=lambda tensor: (tensor.begin, tensor.end)):
        if tensor.begin < position:
            raise PretrainedError(f"{path}: tensors {short(previous.name)} and "
                                  f"{short(tensor.name)} overlap (bytes {tensor.begin:,} to "
                                  f"{position:,}), expected each byte in one tensor")
        if tensor.begin > position:
            raise PretrainedError(f"{path}: bytes {position:,} to {tensor.begin:,} belong to no "
                                  f"tensor (a gap before {short(tensor.name)}), expected none")
        position, previous = tensor.end, tensor
    if position != data_bytes:
        raise PretrainedError(f"{path}: the data section's last {data_bytes - position:,} bytes "
                              "belong to no tensor, expected none")


def read_safetensors(path, header=None, finite=False):
    """name -> NumPy array of every tensor of the file, in the header's order,
    after ``read_header`` (pass its ``header`` if already read). BF16 comes
    back as float32, every other dtype as itself. With ``finite``, a tensor
    of floats that holds a NaN or an infinity is refused as it is read (the
    format allows them; a model of such weights computes nothing but NaN)."""
    path = os.fspath(path)
    header = header or read_header(path)
    safetensors = _safetensors_package(path)
    arrays = {}
    try:
        with safetensors.safe_open(path, framework="numpy") as stored, open(path, "rb") as raw:
            for name, tensor in header.tensors.items():
                array = (_read_bfloat16(raw, header, tensor) if tensor.dtype == "BF16"
                         else stored.get_tensor(name))
                arrays[name] = _as_declared(path, tensor, array)
                if finite:
                    check_finite(path, name, arrays[name])
    except (safetensors.SafetensorError, OSError) as error:  # e.g. the file changed since
        raise PretrainedError(f"{path}: cannot be read ({error})") from None
    return arrays


def check_finite(path, name, array):
    """Refuse a float ``array`` (the tensor ``name`` of the file ``path``)
    holding a NaN or an infinity, naming the first."""
    if array.dtype.kind != "f" or np.isfinite(array.sum(dtype=np.float64)):
        return  # one pass and no copy: a NaN or an infinity anywhere makes the sum one
    bad = ~np.isfinite(array)
    if bad.any():  # else finite numbers whose float64 sum overflowed
        first = np.unravel_index(int(np.argmax(bad)), array.shape)
        raise PretrainedError(f"{path}: tensor {short(name)}: NaN or infinite numbers "
                              f"({int(bad.sum()):,} of {bad.size:,}; the first, {array[first]}, "
                              f"at {list(map(int, first))}), expected finite weights")


def _read_bfloat16(file, header, tensor):
    file.seek(header.data_start + tensor.begin)
    raw = file.read(tensor.end - tensor.begin)
    if len(raw) != tensor.end - tensor.begin:
        raise PretrainedError(f"{header.path}: tensor {short(tensor.name)}: the file ended "
                              "while it was read; it changed after its header was checked")
    bits = np.frombuffer(raw, dtype=DTYPES["BF16"]).astype(np.uint32)
    np.left_shift(bits, 16, out=bits)  # in place: one float32-sized array, not two
    return bits.view(np.float32).reshape(tensor.shape)


def _as_declared(path, tensor, array):
    """The array as the checked header declared it, or an error: the file may
    have been replaced between the check and the read."""
    expected = np.float32 if tensor.dtype == "BF16" else DTYPES[tensor.dtype]
    if array.shape != tensor.shape or array.dtype.newbyteorder("=") != expected:
        raise PretrainedError(f"{path}: tensor {short(tensor.name)} was read as {array.dtype} "
                              f"{array.shape}, expected {tensor.dtype} {tensor.shape}")
    return array


def save_safetensors(path, arrays, metadata=None):
    """Write ``arrays`` (name -> array of any backend, of a dtype in
    WRITABLE) and ``metadata`` (text -> text) to ``path`` atomically, with
    safetensors' NumPy API."""
    path = os.fspath(path)
    host = {name: _writable_array(path, name, value) for name, value in arrays.items()}
    if metadata is not None:
        _check_metadata(path, metadata)
    numpy_api = _safetensors_package(path).numpy
    with atomic_file(path) as temporary:
        numpy_api.save_file(host, temporary, metadata=metadata)


def _writable_array(path, name, value):
    if not isinstance(name, str) or name == METADATA:
        raise PretrainedError(f"{path}: tensor name {short(name)}, expected text other than "
                              f"{METADATA!r}")
    array = backend.to_numpy(value)
    if array.dtype.newbyteorder("=") not in WRITABLE:
        raise PretrainedError(f"{path}: tensor {short(name)} has dtype {array.dtype}, expected "
                              f"one of {', '.join(str(dtype) for dtype in WRITABLE)}")
    # safetensors copies nbytes from the array's first byte: a strided view needs a copy
    return array if array.flags.c_contiguous else array.copy(order="C")


def _safetensors_package(path):
    """safetensors, imported when a tensor is read or written: the checks
    above need only the standard library and NumPy."""
    try:
        import safetensors
        import safetensors.numpy
    except ImportError:
        raise PretrainedError(f"{path}: reading and writing tensors needs safetensors, "
                              'expected it installed: pip install "minitrans[pretrained]"'
                              ) from None
    return safetensors

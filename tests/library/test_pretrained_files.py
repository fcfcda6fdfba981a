"""A pretrained model's files (minitrans.pretrained): safetensors files and
Hugging Face folders written and read back equal, files written by
safetensors' own PyTorch API read equal, and every malformed file refused
in one line that names the file and the tensor or field, before anything
large is allocated."""

import json
import os
import sys
import tracemalloc

import numpy as np
import pytest

from minitrans.files import model_folder as folder
from minitrans.files.rules import MAX_JSON_BYTES, atomic_file
from tests.library.conftest import pretrained_refusal as refused
from minitrans.files.safetensors_file import (MAX_HEADER_BYTES, WRITABLE, read_header,
                                                   read_safetensors, save_safetensors)

RNG = np.random.default_rng(23)


def some_array(dtype, shape=(3, 4)):
    if dtype == np.bool_:
        return RNG.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return RNG.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    return RNG.standard_normal(shape).astype(dtype)


def raw_file(path, header, data=b"", length=None):
    """A .safetensors file made by hand: ``header`` a dict (written as JSON)
    or the header's text itself; ``length`` the header length it claims."""
    text = header if isinstance(header, str) else json.dumps(header)
    raw = text.encode("utf-8")
    path.write_bytes((len(raw) if length is None else length).to_bytes(8, "little") + raw + data)
    return path


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def sharded(tmp_path, shards, weight_map=None):
    """A folder of config.json, the shards (file name -> arrays) and an index
    (by default, the weight map the shards make)."""
    tmp_path.mkdir(exist_ok=True)
    for name, arrays in shards.items():
        save_safetensors(tmp_path / name, arrays)
    if weight_map is None:
        weight_map = {tensor: name for name, arrays in shards.items() for tensor in arrays}
    (tmp_path / folder.INDEX_NAME).write_text(json.dumps({"weight_map": weight_map}))
    (tmp_path / folder.CONFIG_NAME).write_text('{"model_type": "toy"}')
    return tmp_path


# Round trips ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", sorted(WRITABLE, key=str))
def test_every_dtype_is_written_and_read_back_equal(tmp_path, dtype):
    arrays = {"matrix": some_array(dtype), "scalar": some_array(dtype, ()),
              "empty": some_array(dtype, (0, 5)), "strided": some_array(dtype, (4, 6))[:, ::2]}
    save_safetensors(tmp_path / "a.safetensors", arrays, {"note": "hello"})
    back = read_safetensors(tmp_path / "a.safetensors")
    assert sorted(back) == sorted(arrays)
    for name, array in arrays.items():
        assert back[name].dtype == array.dtype and back[name].shape == array.shape
        np.testing.assert_array_equal(back[name], array)
    assert read_header(tmp_path / "a.safetensors").metadata == {"note": "hello"}


def test_a_folder_is_written_and_read_back_equal(tmp_path):
    config = {"model_type": "toy", "architectures": ["ToyModel"], "d_model": 8,
              "rope_scaling": {"factor": 2.0}}
    arrays = {"embed.weight": some_array(np.dtype(np.float32), (10, 8)),
              "ids": some_array(np.dtype(np.int64), (5,))}
    folder.write_folder(tmp_path / "model", config, arrays)
    assert sorted(os.listdir(tmp_path / "model")) == ["config.json", "model.safetensors"]
    read_config, back = folder.read_folder(tmp_path / "model")
    assert read_config == config
    assert sorted(back) == sorted(arrays)
    for name, array in arrays.items():
        np.testing.assert_array_equal(back[name], array)
    assert folder.loaded_bytes(tmp_path / "model") == 10 * 8 * 4 + 5 * 8
    # Hugging Face's loader wants a format it knows in the metadata
    assert read_header(tmp_path / "model" / "model.safetensors").metadata == {"format": "pt"}


BF16_BITS = [0x3F80, 0xC000, 0x7F80, 0xFF80, 0x0001, 0x3FC0, 0x8000, 0x4049]
BF16_VALUES = [1.0, -2.0, np.inf, -np.inf, 2.0**-133, 1.5, -0.0, 3.140625]


def bf16_file(tmp_path):
    data = np.array(BF16_BITS, dtype="<u2").tobytes()
    return raw_file(tmp_path / "bf16.safetensors", {"x": entry("BF16", [2, 4], 0, 16)}, data)


def test_bfloat16_is_widened_to_float32_exactly(tmp_path):
    x = read_safetensors(bf16_file(tmp_path))["x"]
    assert x.dtype == np.float32 and x.shape == (2, 4)
    expected = np.array(BF16_VALUES, dtype=np.float32).reshape(2, 4)
    assert x.tobytes() == expected.tobytes()  # bit for bit, the sign of -0.0 too
    assert read_header(bf16_file(tmp_path)).loaded_bytes == 8 * 4
    empty = raw_file(tmp_path / "empty.safetensors", {"e": entry("BF16", [0, 3], 0, 0)})
    assert read_safetensors(empty)["e"].shape == (0, 3)


def test_bfloat16_matches_torchs_own_widening(tmp_path):
    torch = pytest.importorskip("torch")
    raw = bytearray(np.array(BF16_BITS, dtype="<u2").tobytes())
    theirs = torch.frombuffer(raw, dtype=torch.bfloat16).float().numpy().reshape(2, 4)
    assert read_safetensors(bf16_file(tmp_path))["x"].tobytes() == theirs.tobytes()


def test_a_file_written_by_safetensors_torch_api_is_read_equal(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file
    generator = torch.Generator().manual_seed(23)
    tensors = {str(dtype): (torch.randn(3, 5, generator=generator) * 50).to(dtype)
               for dtype in (torch.float64, torch.float32, torch.float16, torch.bfloat16,
                             torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
                             torch.bool)}
    tensors["scalar"] = torch.tensor(2.5)
    save_file(tensors, tmp_path / "torch.safetensors", metadata={"format": "pt"})
    back = read_safetensors(tmp_path / "torch.safetensors")
    for name, tensor in tensors.items():
        wide = tensor.float() if tensor.dtype == torch.bfloat16 else tensor
        np.testing.assert_array_equal(back[name], wide.numpy(), err_msg=name)
        assert back[name].dtype == wide.numpy().dtype


def test_a_sharded_folder_is_read_whole(tmp_path):
    first = {"a": some_array(np.dtype(np.float32)), "b": some_array(np.dtype(np.int8))}
    second = {"c": some_array(np.dtype(np.float16), (7,))}
    path = sharded(tmp_path, {"model-00001-of-00002.safetensors": first,
                              "model-00002-of-00002.safetensors": second})
    config, arrays = folder.read_folder(path)
    assert config == {"model_type": "toy"} and sorted(arrays) == ["a", "b", "c"]
    for name, array in {**first, **second}.items():
        np.testing.assert_array_equal(arrays[name], array)
    assert folder.loaded_bytes(path) == 12 * 4 + 12 + 7 * 2


def test_a_shard_may_be_a_link_out_of_the_folder_as_in_the_hubs_cache(tmp_path):
    blobs, snapshot = tmp_path / "blobs", tmp_path / "snapshot"
    blobs.mkdir()
    save_safetensors(blobs / "0123abcd", {"a": np.arange(3.0)})
    path = sharded(snapshot, {})
    os.symlink(blobs / "0123abcd", snapshot / "model-00001-of-00001.safetensors")
    (snapshot / folder.INDEX_NAME).write_text(
        json.dumps({"weight_map": {"a": "model-00001-of-00001.safetensors"}}))
    np.testing.assert_array_equal(folder.read_folder(path)[1]["a"], np.arange(3.0))


def test_a_single_file_is_read_before_an_index_as_hugging_face_does(tmp_path):
    path = sharded(tmp_path, {"model-00001-of-00001.safetensors": {"old": np.zeros(2)}})
    save_safetensors(path / "model.safetensors", {"new": np.ones(3)})
    assert sorted(folder.read_folder(path)[1]) == ["new"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "model.safetensors"
    save_safetensors(path, {"w": np.ones(2)})
    with pytest.raises(RuntimeError), atomic_file(path) as temporary:
        open(temporary, "wb").write(b"half of a fi")
        raise RuntimeError("killed")
    refused(lambda: save_safetensors(path, {"w": np.ones(2, complex)}), path, "'w'", "complex")
    assert os.listdir(tmp_path) == ["model.safetensors"]
    np.testing.assert_array_equal(read_safetensors(path)["w"], np.ones(2))


def test_without_safetensors_the_headers_are_still_checked(tmp_path, monkeypatch):
    path = tmp_path / "model.safetensors"
    save_safetensors(path, {"w": np.ones(2)})
    monkeypatch.setitem(sys.modules, "safetensors", None)  # as where it is not installed
    assert read_header(path).loaded_bytes == 16
    refused(lambda: read_safetensors(path), path, 'pip install "minitrans[pretrained]"')


# Malformed folders ------------------------------------------------------------------------------

def test_a_folder_without_its_files_is_named(tmp_path):
    nowhere = tmp_path / "nowhere"
    refused(lambda: folder.read_folder(nowhere), nowhere, "no such folder")
    refused(lambda: folder.read_folder(tmp_path), tmp_path, "no config.json")
    (tmp_path / "config.json").write_text("{}")
    refused(lambda: folder.read_folder(tmp_path), tmp_path,
            "no model.safetensors or model.safetensors.index.json")
    os.mkdir(tmp_path / "model.safetensors")
    refused(lambda: folder.read_folder(tmp_path), tmp_path / "model.safetensors", "a directory")


@pytest.mark.parametrize("text, parts", [
    ('{"model_type": "toy",', ["config.json", "not valid JSON"]),
    ('["model_type"]', ["config.json", "is an array, expected an object"]),
    ('{"d_model": 8, "d_model": 9}', ["config.json", "'d_model' twice"]),
    ('{"eps": NaN}', ["config.json", "NaN"]),
    ('{"a": ' * 50 + "1" + "}" * 50, ["config.json", "nests deeper"]),
    (b'{"name": "\xff"}', ["line 1: invalid UTF-8 (byte 0xff)"]),
])
def test_a_malformed_config_is_refused(tmp_path, text, parts):
    config = tmp_path / "config.json"
    config.write_bytes(text if isinstance(text, bytes) else text.encode())
    refused(lambda: folder.read_config(tmp_path), config, *parts)


def test_an_oversized_config_is_refused_unread(tmp_path):
    with open(tmp_path / "config.json", "wb") as file:
        file.truncate(MAX_JSON_BYTES + 1)  # sparse: no time spent writing it
    refused(lambda: folder.read_config(tmp_path), tmp_path / "config.json",
            "16,777,217 bytes, more than the limit of 16,777,216 bytes for the model's config")


@pytest.mark.parametrize("shard", ["../outside.safetensors", "/etc/model.safetensors",
                                   "sub/model.safetensors", "sub\\model.safetensors",
                                   "C:model.safetensors", "pytorch_model.bin", ".safetensors", 3])
def test_a_shard_name_that_leaves_the_folder_is_refused(tmp_path, shard):
    path = sharded(tmp_path, {"model-1.safetensors": {"a": np.zeros(2)}}, {"a": shard})
    refused(lambda: folder.read_folder(path), path / folder.INDEX_NAME, "tensor 'a'", repr(shard),
            "no '..'")


@pytest.mark.parametrize("index, parts", [
    ({"weight_map": {}}, ["weight_map is {}"]),
    ({"metadata": {}}, ["weight_map is None"]),
    ('{"weight_map": {"a": "m.safetensors", "a": "n.safetensors"}}', ["'a' twice"]),
])
def test_a_malformed_index_is_refused(tmp_path, index, parts):
    path = sharded(tmp_path, {"m.safetensors": {"a": np.zeros(2)}})
    (path / folder.INDEX_NAME).write_text(index if isinstance(index, str) else json.dumps(index))
    refused(lambda: folder.read_folder(path), path / folder.INDEX_NAME, *parts)


def test_every_tensor_is_in_the_one_shard_the_index_names(tmp_path):
    shards = {"m1.safetensors": {"a": np.zeros(2), "b": np.zeros(2)},
              "m2.safetensors": {"b": np.zeros(2), "c": np.zeros(2)}}
    both = sharded(tmp_path / "both", shards, {"a": "m1.safetensors", "b": "m2.safetensors",
                                               "c": "m2.safetensors"})
    refused(lambda: folder.read_folder(both), both / "m1.safetensors", "tensor 'b'",
            "which the index puts in m2.safetensors")
    unnamed = sharded(tmp_path / "unnamed", shards, {"a": "m1.safetensors", "c": "m2.safetensors"})
    refused(lambda: folder.read_folder(unnamed), unnamed / "m1.safetensors", "tensor 'b'",
            "which the index does not name")
    absent = sharded(tmp_path / "absent", shards, {"a": "m1.safetensors", "b": "m1.safetensors",
                                                   "c": "m1.safetensors"})
    refused(lambda: folder.read_folder(absent), absent / folder.INDEX_NAME, "tensor 'c'",
            "m1.safetensors, which does not hold it")
    missing = sharded(tmp_path / "missing", shards, {"a": "m1.safetensors", "b": "m1.safetensors",
                                                     "c": "m3.safetensors"})
    refused(lambda: folder.read_folder(missing), missing / "m3.safetensors", "no such file")


def test_a_folder_larger_than_the_memory_is_refused_before_reading(tmp_path):
    folder.write_folder(tmp_path, {}, {"w": np.zeros((4, 8), np.float32)})
    refused(lambda: folder.read_folder(tmp_path, available=100), tmp_path, "128 bytes once read",
            "100 bytes")


# Malformed safetensors files --------------------------------------------------------------------

F32_PAIR = {"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 8, 16)}


@pytest.mark.parametrize("header, data, parts", [
    ({"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 4, 12)}, 12,
     ["tensors 'a' and 'b' overlap"]),
    ({"a": entry("F32", [1], 0, 4), "b": entry("F32", [1], 8, 12)}, 12,
     ["bytes 4 to 8 belong to no tensor", "gap before 'b'"]),
    (F32_PAIR, 20, ["last 4 bytes belong to no tensor"]),
    ({"a": entry("F32", [3], 0, 8)}, 8, ["tensor 'a'", "needs 12 bytes", "got 8"]),
    ({"a": entry("F8_E4M3", [8], 0, 8)}, 8, ["tensor 'a'", "dtype 'F8_E4M3'", "expected one of"]),
    ({"a": entry("F32", [-2], 0, 8)}, 8, ["tensor 'a'", "shape [-2]"]),
    ({"a": entry("F32", [True], 0, 4)}, 4, ["tensor 'a'", "shape [True]"]),
    ({"a": entry("F32", [1], 4, 0)}, 4, ["tensor 'a'", "data_offsets [4, 0]"]),
    ({"a": entry("F32", [1], 0, 4.0)}, 4, ["tensor 'a'", "data_offsets [0, 4.0]"]),
    ({"a": {"dtype": "F32", "shape": [1]}}, 4, ["tensor 'a'", "expected an object of the fields"]),
    ({"a": {**entry("F32", [1], 0, 4), "x": 1}}, 4, ["tensor 'a'", "'x'"]),
    ({"a": [1, 2]}, 0, ["tensor 'a' is an array"]),
    ({"__metadata__": {"step": 3}}, 0, ["__metadata__", "text values"]),
    ('{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "a": {}}', 4, ["'a' twice"]),
    ('{"a": {"dtype": "F32", "shape": [NaN], "data_offsets": [0, 4]}}', 4, ["NaN"]),
    ('{"a": ', 4, ["header is not valid JSON"]),
    ("[1, 2]", 0, ["header starts with b'[1, 2]'", "expected '{'"]),
    ("{}", 4, ["last 4 bytes belong to no tensor"]),
])
def test_a_malformed_header_is_refused(tmp_path, header, data, parts):
    path = raw_file(tmp_path / "bad.safetensors", header, bytes(data))
    refused(lambda: read_safetensors(path), path, *parts)


def test_a_header_length_out_of_bounds_is_refused(tmp_path):
    oversized = raw_file(tmp_path / "oversized.safetensors", {}, length=MAX_HEADER_BYTES + 1)
    refused(lambda: read_header(oversized), oversized, f"header of {MAX_HEADER_BYTES + 1:,} bytes",
            f"expected at most {MAX_HEADER_BYTES:,}")
    beyond = raw_file(tmp_path / "beyond.safetensors", F32_PAIR, bytes(16), length=1000)
    refused(lambda: read_header(beyond), beyond, "header of 1,000 bytes runs past the end")
    stub = tmp_path / "stub.safetensors"
    stub.write_bytes(b"\x08\x00\x00")
    refused(lambda: read_header(stub), stub, "3 bytes, expected at least the 8 bytes")


def test_a_truncated_file_is_refused_naming_the_tensor_whose_bytes_are_missing(tmp_path):
    path = tmp_path / "model.safetensors"
    save_safetensors(path, {"first": np.zeros(4, np.float32), "second": np.ones(4, np.float32)})
    last = max(read_header(path).tensors.values(), key=lambda tensor: tensor.end).name
    path.write_bytes(path.read_bytes()[:-3])
    refused(lambda: read_safetensors(path), path, f"tensor '{last}'", "past the data section's",
            "truncated")


def test_a_terabyte_claimed_by_a_kilobyte_file_is_refused_by_the_size_check(tmp_path):
    terabyte = 2**40
    path = raw_file(tmp_path / "model.safetensors",
                    {"huge": entry("F32", [terabyte // 4], 0, terabyte)}, bytes(1000))
    (tmp_path / "config.json").write_text("{}")
    tracemalloc.start()
    try:
        refused(lambda: folder.read_folder(tmp_path), path, "tensor 'huge'",
                f"its bytes end at {terabyte:,}", "data section's 1,000 bytes")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20, f"{peak:,} bytes allocated to refuse it"

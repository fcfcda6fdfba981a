"""``train --init-from`` and ``generate --pretrained`` given hostile or
careless input: a run folder that holds another model, a run killed while
it writes its model folder, weights that are NaN, a corpus that is a pipe
or a device, a config.json over a limit, --out inside --init-from.

Each case is one line on stderr and a non-zero exit, before any training
where the input is known to be wrong. The model is a GPT-2 of d_model 8
and one layer, written by minitrans itself, with a byte-level tokenizer of
257 tokens (vocab.json and merges.txt with no merges)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("safetensors", reason="safetensors is not installed")
pytest.importorskip("regex", reason="the regex package is not installed")

from minitrans.cli import main as cli_main  # noqa: E402
from minitrans.data.byte_level_bpe import BYTE_TO_CHAR  # noqa: E402
from minitrans.files.safetensors_file import read_safetensors, save_safetensors  # noqa: E402
from minitrans.model.language_model import DecoderOnlyLM  # noqa: E402
from minitrans.pretrained import GPT2, load_pretrained, save_pretrained  # noqa: E402
from minitrans.pretrained.architectures import model_config  # noqa: E402

HUB = {"architectures": [GPT2], "model_type": "gpt2", "n_embd": 8, "n_head": 2, "n_layer": 1,
       "n_positions": 16, "vocab_size": 257}
TEXT = "the cat sat on the mat, and the dog sat on the log. " * 8
FAST = ["--steps", "1", "--batch-size", "2", "--block-size", "8", "--eval-every", "1",
        "--warmup", "1", "--no-progress"]


def tiny_folder(path, seed=0):
    """A GPT-2 folder: config.json, model.safetensors, vocab.json, merges.txt."""
    model = DecoderOnlyLM(model_config("config.json", HUB, GPT2), rng=seed)
    save_pretrained(model, path, GPT2)
    vocab = {char: byte for byte, char in BYTE_TO_CHAR.items()}
    vocab["<|endoftext|>"] = 256
    (path / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (path / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    return path


@pytest.fixture
def source(tmp_path):
    return tiny_folder(tmp_path / "source")


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def main(*args, capsys):
    """minitrans's command line in this process: (exit code, stdout, stderr)."""
    code = cli_main.main([str(arg) for arg in args])
    out, err = capsys.readouterr()
    return code, out, err


def assert_refused(code, err, *parts):
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for part in parts:
        assert str(part) in lines[0], (part, lines[0])


def weights_of(folder):
    return read_safetensors(folder / "model.safetensors")


def same_weights(first, second):
    return first.keys() == second.keys() and all(
        np.array_equal(first[name], second[name]) for name in first)


# ---- a model folder in --out is never replaced without --force ---------------------------------

def test_a_model_folder_in_out_is_kept_without_force(source, corpus, tmp_path, capsys):
    out = tmp_path / "run"
    other = tiny_folder(out / "pretrained", seed=5)  # another model; no .npz in out
    before = weights_of(other)
    code, _, err = main("train", "--init-from", source, "--data", corpus, "--out", out, *FAST,
                        capsys=capsys)
    assert_refused(code, err, str(out / "pretrained"), "--force")
    assert same_weights(weights_of(other), before)
    assert not (out / "checkpoint.npz").exists()  # refused before any training


def test_the_default_folder_s_model_is_kept_without_force(source, corpus, tmp_path, capsys,
                                                          monkeypatch):
    monkeypatch.chdir(tmp_path)
    other = tiny_folder(tmp_path / "runs" / "corpus" / "pretrained", seed=5)
    before = weights_of(other)
    code, _, err = main("train", "--init-from", source, "--data", corpus, *FAST, capsys=capsys)
    assert_refused(code, err, os.path.join("runs", "corpus", "pretrained"), "--force")
    assert same_weights(weights_of(other), before)


def test_with_force_the_model_folder_is_replaced_whole(source, corpus, tmp_path, capsys):
    out = tmp_path / "run"
    tiny_folder(out / "pretrained", seed=5)
    stale = out / "pretrained" / "model-00002-of-00002.safetensors"  # the old model's shard
    stale.write_bytes(b"")
    code, _, err = main("train", "--init-from", source, "--data", corpus, "--out", out,
                        "--force", *FAST, capsys=capsys)
    assert code == 0, err
    model, tokenizer, _ = load_pretrained(out / "pretrained")
    assert tokenizer is not None and len(tokenizer) == 257
    assert not stale.exists()  # a new folder, not a mix of the old and the new
    assert [name for name in os.listdir(out) if name.startswith(".")] == []  # nothing left


def test_a_model_folder_holding_other_files_is_not_replaced_even_with_force(source, corpus,
                                                                          tmp_path, capsys):
    out = tmp_path / "run"
    tiny_folder(out / "pretrained", seed=5)
    notes = out / "pretrained" / "notes.md"
    notes.write_text("my notes", encoding="utf-8")
    code, _, err = main("train", "--init-from", source, "--data", corpus, "--out", out,
                        "--force", *FAST, capsys=capsys)
    assert_refused(code, err, str(out / "pretrained"), "notes.md")
    assert notes.read_text(encoding="utf-8") == "my notes"
    assert not (out / "checkpoint.npz").exists()  # refused before any training


def test_init_from_inside_out_is_refused_before_training(source, corpus, tmp_path, capsys):
    out = tmp_path / "run"
    tiny_folder(out / "pretrained", seed=5)
    code, _, err = main("train", "--init-from", out / "pretrained", "--data", corpus, "--out",
                        out, "--force", *FAST, capsys=capsys)
    assert_refused(code, err, str(out / "pretrained"), str(out))
    assert not (out / "checkpoint.npz").exists()


# ---- a run killed while it writes its folder leaves a folder that loads -------------------------

class Killed(BaseException):
    """What a kill -9 would do at this point: nothing after it runs (a
    BaseException, so that no ``except Exception`` can catch it)."""


def kill_once_written(monkeypatch, name):
    """Stop the run (as a kill -9 would) right after the file ``name`` is in
    place: renamed over its final name, or copied there."""
    import shutil
    replace, copyfile = os.replace, shutil.copyfile

    def stop_at(target):
        if os.path.basename(target) == name:
            raise Killed(name)

    def replaced(source, target, *args, **kwargs):
        replace(source, target, *args, **kwargs)
        stop_at(target)

    def copied(source, target, *args, **kwargs):
        result = copyfile(source, target, *args, **kwargs)
        stop_at(target)
        return result
    monkeypatch.setattr(os, "replace", replaced)
    monkeypatch.setattr(shutil, "copyfile", copied)


@pytest.mark.parametrize("written", ["model.safetensors", "config.json", "vocab.json"],
                         ids=["after-model.safetensors", "after-config.json",
                              "between-vocab.json-and-merges.txt"])
def test_a_forced_rerun_killed_while_writing_leaves_the_old_folder(source, corpus, tmp_path,
                                                                   capsys, monkeypatch, written):
    out = tmp_path / "run"
    old = tiny_folder(out / "pretrained", seed=5)
    before = weights_of(old)
    kill_once_written(monkeypatch, written)
    with pytest.raises(Killed):
        main("train", "--init-from", source, "--data", corpus, "--out", out, "--force", *FAST,
             capsys=capsys)
    monkeypatch.undo()
    model, tokenizer, _ = load_pretrained(out / "pretrained")  # loads: the old model, whole
    assert tokenizer is not None and same_weights(weights_of(out / "pretrained"), before)
    code, _, err = main("train", "--init-from", source, "--data", corpus, "--out", out,
                        "--force", *FAST, capsys=capsys)  # a leftover does not stop a rerun
    assert code == 0, err
    assert not same_weights(weights_of(out / "pretrained"), before)
    load_pretrained(out / "pretrained")
    assert [name for name in os.listdir(out) if name.startswith(".")] == []


# ---- weights that are not numbers ---------------------------------------------------------------

def poisoned(folder, value, tensor="transformer.h.0.mlp.c_fc.weight"):
    arrays = weights_of(folder)
    assert tensor in arrays, sorted(arrays)
    arrays[tensor] = arrays[tensor].copy()
    arrays[tensor].flat[3] = value
    save_safetensors(folder / "model.safetensors", arrays, {"format": "pt"})
    return tensor


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_weights_that_are_not_finite_are_refused_by_file_and_tensor(source, corpus, tmp_path,
                                                                   capsys, value):
    tensor = poisoned(source, value)
    code, _, err = main("generate", "--pretrained", source, "the", "--max-tokens", "3",
                        capsys=capsys)
    assert_refused(code, err, "model.safetensors", tensor)
    code, _, err = main("train", "--init-from", source, "--data", corpus, "--out",
                        tmp_path / "run", *FAST, capsys=capsys)
    assert_refused(code, err, "model.safetensors", tensor)
    assert "step 1" not in err


# ---- a corpus that never ends -------------------------------------------------------------------

def run_with_timeout(*args):
    """The command in a process of its own, stopped after a few seconds, with
    its memory capped: a hang or an endless read fails the test instead of
    holding up the suite or filling the machine's memory."""
    import resource

    def cap_memory():
        resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))
    return subprocess.run([sys.executable, "-m", "minitrans", *map(str, args)],
                          capture_output=True, text=True, timeout=15, preexec_fn=cap_memory)


@pytest.mark.parametrize("data, kind", [("fifo", "named pipe"),
                                        ("/dev/zero", "character device")])
def test_a_corpus_that_never_ends_is_refused_in_one_line(source, tmp_path, data, kind):
    if data == "fifo":
        data = tmp_path / "corpus.fifo"
        os.mkfifo(data)
    result = run_with_timeout("train", "--init-from", source, "--data", data, "--out",
                              tmp_path / "run", *FAST)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "--data" in lines[0] and str(data) in lines[0] and kind in lines[0], lines[0]


# ---- config.json's own names --------------------------------------------------------------------

@pytest.mark.parametrize("field, value", [("n_layer", 10**6), ("n_embd", 2**20)])
def test_a_config_limit_is_named_by_config_json_s_field(source, capsys, field, value):
    config = json.loads((source / "config.json").read_text())
    config[field] = value
    if field == "n_embd":
        config["n_head"] = 1
    (source / "config.json").write_text(json.dumps(config))
    code, _, err = main("generate", "--pretrained", source, "the", capsys=capsys)
    assert_refused(code, err, "config.json", field)


# ---- memory, checked once ---------------------------------------------------------------------

def test_fine_tuning_checks_memory_once_before_a_tensor_is_read(source, corpus, tmp_path,
                                                                capsys, monkeypatch):
    from minitrans.core import memory_budget
    from minitrans.pretrained import load
    asked, read = [], []
    monkeypatch.setattr(memory_budget, "machine_memory", lambda: asked.append(1) or 10**4)
    monkeypatch.setattr(load, "read_safetensors", lambda *args, **kwargs: read.append(args))
    code, _, err = main("train", "--init-from", source, "--data", corpus, "--out",
                        tmp_path / "run", *FAST, capsys=capsys)
    assert_refused(code, err, str(source), "fine-tuning on batches of 2 x 8 tokens",
                   "takes about", "10 kB")
    assert len(asked) == 1 and read == []

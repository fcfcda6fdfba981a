"""The command-line tests' helpers: tiny models and checkpoints, a folder
of files made wrong on purpose (``Files``), the catalogue's ``case`` and
``cli`` entries, and the check that a command failed in one line (import
them with ``from tests.cli.conftest import ...``)."""

import functools
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import minitrans
from minitrans.core import backend
from minitrans.model.config import ModelConfig
from minitrans.model.language_model import DecoderOnlyLM
from minitrans.model.transformer import Transformer
from minitrans.training import experiment
from minitrans.training.trainer import TrainConfig

TINY = {"d_model": 16, "h": 2, "N": 1, "d_ff": 32, "dropout": 0.0}
TINY_FLAGS = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--no-progress"]


def ints(*shape, value=1):
    return backend.to_device(np.full(shape, value, dtype=np.int64))


def model(**sizes):
    """The "tiny" encoder-decoder: d_model 8, 2 heads, vocabulary 7, max_len 8."""
    return Transformer(ModelConfig.preset("tiny", vocab_size=7, max_len=8, **sizes), rng=0)


def language_model():
    return DecoderOnlyLM(ModelConfig.preset("tiny", vocab_size=7, max_len=8, decoder_only=True),
                         rng=0)


@functools.lru_cache(maxsize=None)
def checkpoint_bytes(task="copy"):
    """A real checkpoint: a tiny model of ``task`` ("lm": decoder-only) after
    one training step."""
    with tempfile.TemporaryDirectory() as folder, minitrans.using("numpy", dtype="float32"):
        config = TrainConfig(task=task, steps=1, batch_size=4, warmup=1, eval_every=1,
                             eval_pairs=2, out_dir=folder)
        trainer = experiment.new_trainer(config, TINY, progress=False, log=lambda message: None)
        trainer.train_step()
        trainer.save(trainer.checkpoint_path)
        return pathlib.Path(trainer.checkpoint_path).read_bytes()


class Files:
    """Good and bad files for a case, in the test's own temporary folder."""

    def __init__(self, folder):
        self.folder = folder

    def write(self, name, content):
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
        return path

    def checkpoint(self, name="checkpoint.npz", change=None):
        """A real checkpoint, or one that ``change(entries)`` has spoilt."""
        path = self.write(name, checkpoint_bytes())
        if change is not None:
            with np.load(path) as stored:
                entries = {key: stored[key] for key in stored.files}
            change(entries)
            np.savez(path, **entries)
        return path

    def truncated(self, name="truncated.npz"):
        good = checkpoint_bytes()
        return self.write(name, good[: len(good) // 2])


def record(name, value=None, text=None):
    """Replace the JSON record ``name`` by ``value`` (or by raw ``text``)."""

    def change(entries):
        entries[f"json/{name}"] = np.array(json.dumps(value) if text is None else text)

    return change


def case(provoke, error, *fragments, id):
    """``provoke(files)`` must raise ``error`` whose message names every
    fragment as a whole word."""
    return pytest.param(provoke, error, fragments, id=id)


def run_cli(args, env=None, stdin=b""):
    """``python -m minitrans *args``, ``stdin`` (bytes) on its standard input."""
    environment = {key: value for key, value in os.environ.items() if key != "MINITRANS_DEBUG"}
    result = subprocess.run([sys.executable, "-m", "minitrans", *map(str, args)],
                            capture_output=True, input=stdin,
                            env={**environment, **(env or {})}, timeout=300)
    result.stdout, result.stderr = result.stdout.decode(), result.stderr.decode()
    return result


def train(files, *args):
    """``minitrans train`` with small, quick settings that ``args`` override
    (the last value of a flag wins), writing only into ``files.folder/run``."""
    return ["train", "--steps", "1", "--eval-every", "1", "--out", files.folder / "run",
            *TINY_FLAGS, *args]


def cli(make_args, *fragments, env=None, stdin=b"", id):
    """``minitrans *make_args(files)`` (``stdin`` on its standard input) must
    fail with one stderr line that names every fragment as a whole word."""
    return pytest.param(make_args, fragments, env, stdin, id=id)


def assert_one_line_error(result, fragments):
    """A command's ``result`` failed with one line on stderr naming every
    fragment as a whole word, no traceback and nothing on stdout."""
    assert result.returncode != 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stdout == ""
    for fragment in fragments:
        assert re.search(rf"(?<![\w]){re.escape(fragment)}(?![\w])", lines[0]), (fragment, lines[0])


def assert_one_line_fails(result, *fragments):
    """A command's ``result`` failed with one line on stderr, no traceback,
    that contains every fragment (as text anywhere in the line, where
    ``assert_one_line_error`` asks for whole words and an empty stdout)."""
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]

"""A catalogue of bad inputs, each met by a clear error.

Every case provokes one mistake a user can make (a wrong shape, a token id
out of range, a broken file, a flag out of range) and lists what the error
message must say: the argument or file (and line), what was expected and
what was given. ``test_bad_input_gives_a_clear_error`` walks the catalogue
on every backend; ``test_bad_command_line_gives_one_line_and_a_non_zero_exit``
runs ``python -m minitrans`` on the command-line catalogue and wants one line
on stderr, a non-zero exit and no traceback; the last two tests check that a
failed command or load never overwrites, removes or adds a file.

To add a case, append a ``case(...)`` or ``cli(...)`` line with an id.
"""

import errno
import io
import json
import math
import os
import pathlib
import socket
import tempfile
import unittest.mock

import numpy as np
import pytest

import minitrans
from minitrans import decoding
from minitrans.core import backend
from minitrans.core.checks import NonFiniteError
from minitrans.data import (BPE, DataError, Tokenizer, Vocab, language_tasks, make_seq2seq_batch,
                            read_tsv)
from minitrans.files.rules import FileError
from minitrans.files.tsv import read_regular_file
from minitrans.data.tasks import load_task, task_from_tsv
from minitrans.layers.attention import ScaledDotProductAttention
from minitrans.layers.embedding import Embedding
from minitrans.layers.feedforward import FeedForward
from minitrans.layers.layernorm import LayerNorm
from minitrans.layers.linear import Linear
from minitrans.layers.loss import LabelSmoothedCrossEntropy
from minitrans.layers.multihead import MultiHeadAttention
from minitrans.layers.positional import PositionalEncoding
from minitrans.model.config import ModelConfig
from minitrans.model.transformer import Transformer
from minitrans_course import exercises
from minitrans_course import path_lengths
from minitrans.cli.text_input import input_lines
from minitrans.training import attention_maps, experiment
from minitrans.training.run_files.checkpoint import (CheckpointError, load_checkpoint,
                                                   load_parameters)
from minitrans.training.optimisation.parallel import DataParallel
from minitrans.training.trainer import TrainConfig, TrainingError
from tests.cli.conftest import (TINY, TINY_FLAGS, Files, assert_one_line_error, case, cli, ints,
                                language_model, model, record, run_cli, train)
from tests.library.conftest import assert_names


# ------------------------------------------------------------------ inputs


def floats(*shape, dtype=None, first=None):
    """An array of ones on the current backend (default dtype); ``first``
    replaces its first element (NaN, infinity)."""
    host = np.ones(shape)
    if first is not None:
        host.flat[0] = first
    return backend.to_device(host, dtype=dtype or backend.get_dtype())


def ids(rows):
    return backend.to_device(np.array(rows, dtype=np.int64))


def mask(*shape, dtype=bool):
    return backend.to_device(np.ones(shape, dtype=dtype))


# ------------------------------------------------------------------- files


def without(prefix):
    """Drop every entry whose name starts with ``prefix``."""

    def change(entries):
        for key in [key for key in entries if key.startswith(prefix)]:
            del entries[key]

    return change


def nan_weight(entries):
    name = "param/output_projection.W"
    entries[name] = np.full_like(entries[name], np.nan)


def loaded_arrays(files):
    arrays, _ = load_checkpoint(files.checkpoint())
    return arrays


def nan_inside_the_model(files):
    """A NaN weight deep in the encoder: the trainer stops with its own error."""
    config = TrainConfig(task="copy", steps=2, batch_size=4, warmup=1, eval_every=2, eval_pairs=2,
                         out_dir=str(files.folder / "run"))
    trainer = experiment.new_trainer(config, TINY, progress=False, log=lambda message: None)
    weights = {name: value for name, value, _ in trainer.model.named_parameters()}
    weights["encoder.layers.0.self_attn.W_Q.W"][0, 0] = float("nan")
    trainer.train_step()


def full_disk_at_the_second_save(files):
    """Train a tiny copy model for two steps, saving after each, on a disk
    that fills up after the first save."""
    config = TrainConfig(task="copy", steps=2, batch_size=4, warmup=1, eval_every=1,
                         eval_pairs=2, target_exact_match=2.0, out_dir=str(files.folder / "run"))
    trainer = experiment.new_trainer(config, TINY, progress=False, log=lambda message: None)
    trainer.fit(steps=1)
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    with unittest.mock.patch.object(np, "savez", side_effect=full):
        trainer.fit(steps=2)


# --------------------------------------------------------------- catalogue


NAN, INF = float("nan"), float("inf")

CATALOGUE = [
    # ---- layers: shapes, ranks, dtypes, values
    case(lambda f: Linear(4, 3).forward(floats(2, 5)), ValueError, "x", "last dimension 4",
         "(2, 5)", id="linear-wrong-width"),
    case(lambda f: Linear(4, 3).forward(floats()), ValueError, "x", "rank at least 1", "()",
         id="linear-scalar"),
    case(lambda f: Linear(4, 3).forward(floats(2, 4, dtype="float64")), TypeError, "x", "float32",
         "float64", id="linear-float64-into-float32"),
    case(lambda f: Linear(4, 3).forward([[1.0, 2.0, 3.0, 4.0]]), TypeError, "x", "list",
         "minitrans.to_device", id="linear-list-not-array"),
    case(lambda f: Linear(4, 3).forward(floats(2, 4, first=NAN)), NonFiniteError, "x", "finite",
         "1 NaN", "(2, 4)", id="linear-nan"),
    case(lambda f: LayerNorm(4).forward(floats(2, 3, 5)), ValueError, "x", "last dimension 4",
         "(2, 3, 5)", id="layernorm-wrong-width"),
    case(lambda f: LayerNorm(4).forward(ints(2, 4)), TypeError, "x", "float32", "int64",
         id="layernorm-int-input"),
    case(lambda f: LayerNorm(4).forward(floats(2, 4, first=INF)), NonFiniteError, "x", "finite",
         "1 infinite", id="layernorm-inf"),
    case(lambda f: FeedForward(4, 8).forward(floats(1, 2, 4, first=NAN)), NonFiniteError, "x",
         "1 NaN", id="feedforward-nan"),
    case(lambda f: MultiHeadAttention(8, 2).forward(floats(3, 8)), ValueError, "x", "rank 3",
         "(3, 8)", id="attention-x-rank-2"),
    case(lambda f: MultiHeadAttention(8, 2).forward(floats(2, 3, 8), floats(2, 4, 6)), ValueError,
         "memory", "last dimension 8", "(2, 4, 6)", id="attention-memory-wrong-width"),
    case(lambda f: MultiHeadAttention(8, 2).forward(floats(2, 3, 8), floats(3, 4, 8)), ValueError,
         "memory", "batch size 2", "(3, 4, 8)", id="attention-memory-other-batch"),
    case(lambda f: MultiHeadAttention(8, 2).forward(floats(2, 3, 8), floats(2, 4, 8,
                                                                            dtype="float64")),
                                                                            TypeError,
         "memory", "float32", "float64", id="attention-memory-float64"),
    case(lambda f: MultiHeadAttention(8, 2).forward(floats(2, 3, 8), floats(2, 4, 8, first=NAN)),
         NonFiniteError,
         "memory", "1 NaN", id="attention-memory-nan"),
    case(lambda f: MultiHeadAttention(8, 2).forward(floats(0, 3, 8)), ValueError, "x", "non-empty",
         "(0, 3, 8)", id="attention-empty-batch"),
    case(lambda f: MultiHeadAttention(8, 2).forward(floats(2, 3, 8), floats(2, 0, 8)), ValueError,
         "memory", "non-empty", "(2, 0, 8)", id="attention-empty-memory"),
    case(lambda f: MultiHeadAttention(8, 2).forward(floats(2, 3, 8), mask=mask(2, 4, 4)),
         ValueError,
         "mask", "(2, 3, 3)", "(2, 4, 4)", id="attention-mask-does-not-broadcast"),
    case(lambda f: MultiHeadAttention(8, 2).forward(floats(2, 3, 8), mask=mask(2, 3, 3,
                                                                               dtype=np.int64)),
                                                                               TypeError,
         "mask", "boolean", "int64", id="attention-mask-not-boolean"),
    case(lambda f: MultiHeadAttention(8, 2).forward(floats(2, 3, 8), mask=mask(2, 3, 3, 3)),
         ValueError,
         "mask", "(2, 2, 3, 3)", "(2, 3, 3, 3)", id="attention-mask-wrong-heads"),
    case(lambda f: MultiHeadAttention(8, 3), ValueError, "h", "d_model=8", "h=3",
         id="attention-heads-do-not-divide"),
    case(lambda f: ScaledDotProductAttention().forward(floats(2, 3, 4), floats(2, 3, 5), floats(2,
                                                                                                3,
                                                                                                4)),
         ValueError, "K", "d_k=4", "(2, 3, 5)", id="sdpa-K-wrong-width"),
    case(lambda f: ScaledDotProductAttention().forward(floats(2, 3, 4), floats(2, 3, 4),
                                                       floats(2, 3, 4, first=NAN)),
         NonFiniteError, "V", "1 NaN", id="sdpa-V-nan"),
    case(lambda f: ScaledDotProductAttention().forward(floats(2, 3, 4), floats(2, 3, 4), floats(2,
                                                                                                3,
                                                                                                4),
                                                       mask=mask(2, 3, 3, dtype=np.float64)),
         TypeError, "mask", "boolean", "float64", id="sdpa-mask-float"),
    case(lambda f: ScaledDotProductAttention().forward(floats(2, 3, 4), floats(2, 3, 4), floats(2,
                                                                                                3,
                                                                                                4),
                                                       mask=mask(2, 3, 5)),
         ValueError, "mask", "(2, 3, 3)", "(2, 3, 5)", id="sdpa-mask-does-not-broadcast"),
    case(lambda f: PositionalEncoding(8, max_len=5).forward(floats(1, 6, 8)), ValueError,
         "x", "length 6", "max_len=5", id="positional-too-long"),
    case(lambda f: PositionalEncoding(8, max_len=5).forward(floats(1, 3, 8), offset=3), ValueError,
         "x", "length 3", "position 3", "max_len=5", id="positional-offset-past-the-end"),
    case(lambda f: PositionalEncoding(8, max_len=5).forward(floats(1, 3, 8), offset=-1), ValueError,
         "offset", "non-negative integer", "-1", id="positional-negative-offset"),
    case(lambda f: Embedding(5, 4).forward(ids([[0, 5]])), ValueError, "ids", "[0, 5)", "5",
         id="embedding-id-too-large"),
    case(lambda f: Embedding(5, 4).forward(ids([[-1, 0]])), ValueError, "ids", "[0, 5)", "-1",
         id="embedding-negative-id"),
    case(lambda f: Embedding(5, 4).forward(floats(2, 3)), TypeError, "ids", "integer", "float32",
         id="embedding-float-ids"),
    case(lambda f: LabelSmoothedCrossEntropy(0.1).forward(floats(2, 5), ids([0, 1, 2])), ValueError,
         "targets", "(2,)", "(3,)", id="loss-targets-other-shape"),
    case(lambda f: LabelSmoothedCrossEntropy(0.1).forward(floats(2, 5, first=NAN), ids([0, 1])),
         NonFiniteError, "logits", "finite", "1 NaN", id="loss-nan-logits"),
    case(lambda f: LabelSmoothedCrossEntropy(0.1).forward(ints(2, 5), ids([0, 1])), TypeError,
         "logits", "floating-point", "int64", id="loss-integer-logits"),
    case(lambda f: LabelSmoothedCrossEntropy(0.1).forward(
        backend.to_device(np.ones((2, 5), dtype=np.complex64)), ids([0, 1])), TypeError,
         "logits", "floating-point", "complex64", id="loss-complex-logits"),
    # ---- the model
    case(lambda f: model().forward(ints(2, 9), ints(2, 3)), ValueError, "src", "max_len=8",
         "(2, 9)", id="model-source-longer-than-max-len"),
    case(lambda f: model().forward(ints(2, 3), ints(2, 9)), ValueError, "tgt_in", "max_len=8",
         "(2, 9)", id="model-target-longer-than-max-len"),
    case(lambda f: language_model().forward(ints(2, 9)), ValueError, "ids", "max_len=8", "(2, 9)",
         id="lm-longer-than-max-len"),
    case(lambda f: model().forward(ints(0, 3), ints(0, 3)), ValueError, "src",
         "at least one sequence", "(0, 3)", id="model-empty-batch"),
    case(lambda f: model().forward(ints(2, 0), ints(2, 3)), ValueError, "src",
         "at least one token", "(2, 0)", id="model-empty-sequences"),
    case(lambda f: language_model().forward(ints(0, 4)), ValueError, "ids", "(0, 4)",
         id="lm-empty-batch"),
    case(lambda f: model().forward(ints(2, 3), ints(3, 3)), ValueError, "tgt_in", "batch size 2",
         "3", id="model-batches-differ"),
    case(lambda f: model().forward(ints(2, 3), ints(2, 3, value=7)), ValueError, "tgt_in",
         "[0, 7)", "7", id="model-id-out-of-range"),
    case(lambda f: model().forward(ints(2, 3, value=-1), ints(2, 3)), ValueError, "src", "[0, 7)",
         "-1", id="model-negative-id"),
    case(lambda f: model().forward(floats(2, 3), ints(2, 3)), TypeError, "src", "integer",
         "float32", id="model-float-ids"),
    case(lambda f: model().forward(ints(3), ints(2, 3)), ValueError, "src", "rank 2", "(3,)",
         id="model-ids-rank-1"),
    case(lambda f: Transformer(ModelConfig.preset("tiny", vocab_size=7, decoder_only=True)),
         TypeError,
         "config", "encoder-decoder", id="model-decoder-only-config"),
    case(lambda f: decoding.greedy(model(), ints(1, 3), max_len=20), ValueError, "max_len",
         "8 positions", "20", id="greedy-longer-than-the-model"),
    case(lambda f: decoding.beam_search(model(), ints(1, 3), beam_size=0), ValueError,
         "beam_size", "positive integer", "0", id="beam-size-0"),
    # ---- configurations, backends, tasks
    case(lambda f: ModelConfig(vocab_size=7, d_model=10, h=3), ValueError, "h", "d_model=10", "h=3",
         id="config-heads-do-not-divide"),
    case(lambda f: ModelConfig(vocab_size=0), ValueError, "vocab_size", "positive integer", "0",
         id="config-vocab-size-0"),
    case(lambda f: ModelConfig(vocab_size=7, d_model="64"), ValueError, "d_model",
         "positive integer", "'64'", id="config-d-model-string"),
    case(lambda f: ModelConfig(vocab_size=7, dropout=1.0), ValueError, "dropout", "[0, 1)", "1.0",
         id="config-dropout-1"),
    case(lambda f: ModelConfig(vocab_size=7, pad_id=7), ValueError, "pad_id", "7",
         id="config-pad-id-outside"),
    case(lambda f: ModelConfig.from_dict({"vocab_size": 7, "colour": "red"}), ValueError, "config",
         "colour", id="config-unknown-field"),
    case(lambda f: ModelConfig.preset("huge", vocab_size=7), ValueError, "preset", "'huge'", "base",
         id="config-unknown-preset"),
    case(lambda f: TrainConfig(steps=0), ValueError, "steps", "positive integer", "0",
         id="train-steps-0"),
    case(lambda f: TrainConfig(batch_size=-1), ValueError, "batch_size", "positive integer", "-1",
         id="train-batch-size-negative"),
    case(lambda f: TrainConfig(lr_factor=math.inf), ValueError, "lr_factor",
         "finite positive number", "inf", id="train-lr-factor-inf"),
    case(lambda f: TrainConfig(label_smoothing="0.1"), ValueError, "label_smoothing", "[0, 1)",
         "'0.1'", id="train-label-smoothing-string"),
    case(lambda f: TrainConfig(clip_norm=-1.0), ValueError, "clip_norm", ">= 0", "-1.0",
         id="train-clip-negative"),
    case(lambda f: TrainConfig(target_exact_match=math.nan), ValueError, "target_exact_match",
         "nan", id="train-target-nan"),
    case(lambda f: TrainConfig(level="byte"), ValueError, "level", "'byte'", "'word'",
         id="train-unknown-level"),
    # ---- the common validators of minitrans.core.checks: a bool for an int, NaN or
    # infinity for a number, None where a value is needed, a string for a number
    case(lambda f: ModelConfig(vocab_size=7, h=True), ValueError, "h", "positive integer", "True",
         id="config-heads-bool"),
    case(lambda f: ModelConfig(vocab_size=7, pad_id=False), ValueError, "pad_id", "False",
         id="config-pad-id-bool"),
    case(lambda f: ModelConfig(vocab_size=7, dropout=NAN), ValueError, "dropout", "[0, 1)", "nan",
         id="config-dropout-nan"),
    case(lambda f: ModelConfig(vocab_size=None), ValueError, "vocab_size", "positive integer",
         "None", id="config-vocab-size-none"),
    case(lambda f: TrainConfig(steps=True), ValueError, "steps", "positive integer", "True",
         id="train-steps-bool"),
    case(lambda f: TrainConfig(workers=False), ValueError, "workers", "positive integer or None",
         "False", id="train-workers-bool"),
    case(lambda f: TrainConfig(seed=None), ValueError, "seed", "non-negative integer", "None",
         id="train-seed-none"),
    case(lambda f: TrainConfig(label_smoothing=NAN), ValueError, "label_smoothing", "[0, 1)", "nan",
         id="train-label-smoothing-nan"),
    case(lambda f: TrainConfig(weight_decay=INF), ValueError, "weight_decay", "finite number >= 0",
         "inf", id="train-weight-decay-inf"),
    case(lambda f: TrainConfig(clip_norm="1"), ValueError, "clip_norm", "finite number >= 0", "'1'",
         id="train-clip-string"),
    case(lambda f: decoding.sample(model(), ints(1, 3), 4, temperature=INF), ValueError,
         "temperature",
         "finite positive number", "inf", id="sample-temperature-inf"),
    case(lambda f: decoding.sample(model(), ints(1, 3), 4, top_k=True), ValueError, "top_k",
         "positive integer or None", "True", id="sample-top-k-bool"),
    case(lambda f: decoding.sample(model(), ints(1, 3), 4, top_p="0.9"), ValueError, "top_p",
         "(0, 1]", "'0.9'", id="sample-top-p-string"),
    case(lambda f: decoding.beam_search(model(), ints(1, 3), length_penalty=None), ValueError,
         "length_penalty",
         ">= 0", "None", id="beam-length-penalty-none"),
    case(lambda f: decoding.beam_search(model(), ints(1, 3), beam_size=2.0), ValueError,
         "beam_size",
         "positive integer", "2.0", id="beam-size-float"),
    case(lambda f: decoding.beam_search(model(), ints(2, 0)), ValueError, "src",
         "at least one token", "(2, 0)", id="beam-empty-sequences"),
    case(lambda f: decoding.generate(language_model(), floats(1, 2), 3), TypeError, "prompt",
         "integer", "float32", id="generate-float-prompt"),
    case(lambda f: decoding.generate(language_model(), ints(1, 2), 3, strategy="beam"), ValueError,
         "strategy",
         "'beam'", "'greedy'", "'sample'", id="generate-unknown-strategy"),
    case(lambda f: load_task("copy", num_train=True), ValueError, "num_train",
         "positive integer or None", "True", id="task-num-train-bool"),
    case(lambda f: Vocab.build([["a"]], min_freq=None), ValueError, "min_freq", "positive integer",
         "None", id="vocab-min-freq-none"),
    case(lambda f: task_from_tsv("unused.tsv", valid_fraction=NAN), ValueError, "valid_fraction",
         "(0, 1)", "nan", id="tsv-valid-fraction-nan"),
    case(lambda f: minitrans.use(dtype=3.5), ValueError, "dtype", "'float32'", "3.5",
         id="dtype-number"),
    case(lambda f: TrainConfig(merges=10**12), ValueError, "merges", "[0, 1048576]",
         "1000000000000", id="train-config-merges-beyond-the-checkpoint-limit"),
    case(lambda f: Vocab.build([["a", "b"]]).decode([4.9]), DataError, "ids", "integer",
         "4.9", id="vocab-decode-float-id"),
    case(lambda f: TrainConfig(seed=-1), ValueError, "seed", "non-negative integer", "-1",
         id="train-negative-seed"),
    case(lambda f: minitrans.use("tpu"), ValueError, "backend", "'tpu'", "'numpy'",
         id="unknown-backend"),
    case(lambda f: minitrans.use(dtype="float16"), ValueError, "dtype", "float16", "'float32'",
         id="unknown-dtype"),
    case(lambda f: load_task("sort"), ValueError, "task", "'sort'", "'copy'", id="unknown-task"),
    case(lambda f: experiment.new_trainer(TrainConfig(task="sort")), ValueError, "task", "'sort'",
         id="trainer-unknown-task"),
    case(nan_inside_the_model, TrainingError, "step 1", "inside the model",
         "encoder.layers.0.self_attn.W_Q.W", "NaN", "no checkpoint holds a good state",
         id="trainer-nan-weight-inside-the-model"),
    # ---- data
    case(lambda f: read_tsv(f.write("bad.tsv", "a\tb\nno tab here\n")), FileError,
         "bad.tsv", "line 2", "no tab", id="tsv-missing-tab"),
    case(lambda f: read_tsv(f.write("bad.tsv", "a\tb\tc\n")), FileError, "bad.tsv", "line 1",
         "2 tabs", id="tsv-two-tabs"),
    case(lambda f: read_tsv(f.write("bad.tsv", "a\tb\nc\t \n")), FileError, "bad.tsv", "line 2",
         "empty target", id="tsv-empty-side"),
    case(lambda f: read_tsv(f.write("empty.tsv", "")), FileError, "empty.tsv",
         "no source<TAB>target pairs", id="tsv-empty-file"),
    case(lambda f: read_tsv(f.write("latin1.tsv", "a\tb\ncaf\xe9\tx\n".encode("latin-1"))),
         FileError,
         "latin1.tsv", "line 2", "invalid UTF-8", "0xe9", id="tsv-invalid-utf8"),
    case(lambda f: read_tsv(f.folder / "missing.tsv"), FileError, "missing.tsv", "not found",
         id="tsv-missing-file"),
    case(lambda f: read_tsv(f.folder), FileError, "directory", id="tsv-directory"),
    case(lambda f: Vocab(["a"]).decode([9]), DataError, "ids", "9", "5 tokens",
         id="vocab-id-outside"),
    case(lambda f: make_seq2seq_batch([]), DataError, "pairs", "none", id="batch-of-nothing"),
    case(lambda f: Tokenizer("byte"), ValueError, "level", "'byte'", id="tokenizer-unknown-level"),
    # ---- checkpoints
    case(lambda f: load_checkpoint(f.truncated()), CheckpointError, "truncated.npz",
         "not a readable checkpoint", id="checkpoint-truncated"),
    case(lambda f: load_checkpoint(f.write("notes.txt", "hello")), CheckpointError, "notes.txt",
         "not a readable checkpoint", id="checkpoint-text-file"),
    case(lambda f: load_checkpoint(f.write("weights.npy", npy_bytes())), CheckpointError,
         "weights.npy", "not a readable checkpoint", id="checkpoint-npy-file"),
    case(lambda f: load_checkpoint(f.checkpoint("foreign.npz", without("format"))), CheckpointError,
         "foreign.npz", "not a minitrans checkpoint", id="checkpoint-foreign-npz"),
    case(lambda f: load_checkpoint(f.folder / "nothing.npz"), CheckpointError, "nothing.npz",
         "not found", id="checkpoint-missing-file"),
    case(lambda f: load_checkpoint(f.folder), CheckpointError, "directory",
         id="checkpoint-directory"),
    case(lambda f: load_checkpoint(f.checkpoint("json.npz", record("step", text="{not json"))),
         CheckpointError,
         "json.npz", "'step'", "not valid JSON", id="checkpoint-record-not-json"),
    case(lambda f: load_parameters(model(), loaded_arrays(f), "copy.npz"), CheckpointError,
         "copy.npz", "another model configuration", "the model expects",
         id="checkpoint-of-another-config"),
    case(lambda f: experiment.load_trained(f.checkpoint("partial.npz",
                                                        without("param/output_projection.b"))),
         CheckpointError, "partial.npz", "missing parameters", "param/output_projection.b",
         id="checkpoint-missing-array"),
    case(lambda f: experiment.load_trained(f.checkpoint("nan.npz", nan_weight)), CheckpointError,
         "nan.npz", "param/output_projection.W", "NaN or infinite", id="checkpoint-nan-weights"),
    case(lambda f: experiment.resume_trainer(f.checkpoint("no-adam.npz", without("optim/")),
                                             progress=False),
         CheckpointError, "no-adam.npz", "missing optimizer state",
         id="checkpoint-missing-optimizer-state"),
    case(lambda f: experiment.resume_trainer(f.checkpoint("old.npz", without("json/history")),
                                             progress=False),
         CheckpointError, "old.npz", "missing records", "history", id="checkpoint-missing-record"),
    case(lambda f: experiment.load_trained(f.checkpoint("odd.npz", record("task", {}))),
         CheckpointError,
         "odd.npz", "malformed checkpoint", "'name'", id="checkpoint-malformed-record"),
    case(lambda f: experiment.load_trained(f.checkpoint(
             "odd.npz", record("model_config", {"vocab_size": 14, "h": 3, "d_model": 16}))),
         CheckpointError, "odd.npz", "h", "d_model=16", "h=3", id="checkpoint-impossible-config"),
    case(lambda f: experiment.load_trained(f.checkpoint(
             "odd.npz", record("vocab", Vocab(list("012")).to_json()))),
         CheckpointError, "odd.npz", "7 tokens", "vocab_size is 14",
         id="checkpoint-vocabulary-of-another-model"),
    case(lambda f: experiment.load_trained(f.checkpoint("odd.npz", config(tie_embeddings="false"))),
         CheckpointError, "odd.npz", "model_config.tie_embeddings", "'false'",
         id="checkpoint-boolean-as-string"),
    case(lambda f: experiment.load_trained(f.checkpoint("odd.npz", config(vocab_size=10**9))),
         CheckpointError, "odd.npz", "model_config.vocab_size", "1000000000",
         id="checkpoint-huge-vocab-size"),
    case(lambda f: experiment.load_trained(f.checkpoint("odd.npz", config(N=1000))),
         CheckpointError, "odd.npz", "model_config", "describes a model of",
         id="checkpoint-more-layers-than-arrays"),
    case(lambda f: experiment.resume_trainer(f.checkpoint("odd.npz", record("history", {})),
                                             steps=5, progress=False),
         CheckpointError, "odd.npz", "history", id="checkpoint-malformed-history"),
    case(lambda f: load_checkpoint(f.checkpoint("deep.npz", record("step", text="[" * 10**5))),
         CheckpointError, "deep.npz", "'step'", "nests deeper", id="checkpoint-deep-json"),
    case(lambda f: load_checkpoint(f.checkpoint("extra.npz", extra_member)),
         CheckpointError, "extra.npz", "'notes.npy'", "not a checkpoint entry",
         id="checkpoint-unknown-member"),
    # exploring a trained model
    case(lambda f: attention_maps.attention_for(*experiment.load_trained(f.checkpoint()), ""),
         ValueError, "text", "empty", id="attention-empty-sentence"),
    case(lambda f: attention_maps.attention_for(*experiment.load_trained(f.checkpoint()),
                                                "1" * 100),
         ValueError, "text", "100 tokens", "64 positions", id="attention-text-too-long"),
    # runs never overwrite
    case(lambda f: experiment.resume_from(experiment.read_run(f.checkpoint()), changes={"seed": 3}),
         ValueError, "seed", "cannot change", id="resume-change-seed"),
    # inputs bounded
    case(lambda f: minitrans.Adam(model(), lr=INF), ValueError, "lr", "finite positive number",
         "inf", id="adam-lr-inf"),
    case(lambda f: minitrans.Adam(model(), eps=NAN), ValueError, "eps", "nan", id="adam-eps-nan"),
    case(lambda f: minitrans.Adam(model(), weight_decay=NAN), ValueError, "weight_decay", "nan",
         id="adam-weight-decay-nan"),
    case(lambda f: minitrans.Adam(model()).step(lr=INF), ValueError, "lr", "inf",
         id="adam-step-lr-inf"),
    case(lambda f: minitrans.SGD(model(), momentum=NAN), ValueError, "momentum", "[0, 1)", "nan",
         id="sgd-momentum-nan"),
    case(lambda f: minitrans.clip_grad_norm(model(), NAN), ValueError, "max_norm", "nan",
         id="clip-max-norm-nan"),
    case(lambda f: minitrans.transformer_lr(1, 16, 4, factor=INF), ValueError, "factor", "inf",
         id="schedule-factor-inf"),
    case(lambda f: decoding.sample(model(), ints(1, 3), 4, temperature=0), ValueError,
         "temperature", "finite positive number", "0", id="sample-temperature-0"),
    case(lambda f: decoding.sample(model(), ints(1, 3), 4, top_p=NAN), ValueError, "top_p",
         "(0, 1]", "nan", id="sample-top-p-nan"),
    case(lambda f: decoding.beam_search(model(), ints(1, 3), beam_size=10**6), ValueError,
         "beam_size", "vocabulary's size, 7", "1000000", id="beam-size-above-the-vocabulary"),
    case(lambda f: DataParallel(model(), LabelSmoothedCrossEntropy(0.1), workers=100000),
         ValueError, "workers", "at most 64", "100000", id="data-parallel-workers-huge"),
    case(lambda f: TrainConfig(batch_size=4, workers=8), ValueError, "workers", "at most 4",
         "batch_size=4", "8",
         id="train-workers-above-the-batch-size"),
    case(lambda f: ModelConfig(vocab_size=7, d_model=10**9, h=1), ValueError, "d_model",
         "at most 65536", "1000000000", id="config-d-model-huge"),
    case(lambda f: experiment.new_trainer(TrainConfig(task="copy", out_dir=str(f.folder / "run")),
                                          {"d_model": 65536, "h": 1, "N": 1024}, progress=False),
         ValueError, "d_model=65536", "N=1024", "training", "needs", "has", id="trainer-terabytes"),
    case(lambda f: read_tsv(f.write("nul.tsv", b"a\tb\nc\x00d\te\n")), FileError, "nul.tsv",
         "line 2", "NUL byte", id="tsv-nul-byte"),
    case(lambda f: read_tsv(f.write("utf16.tsv", "a b\tc d\n".encode("utf-16-le"))), FileError,
         "utf16.tsv", "UTF-16 without a byte-order mark", "UTF-8", id="tsv-utf16-without-bom"),
    case(lambda f: read_tsv(f.write("utf16.tsv", "a b\tc d\n".encode("utf-16"))), FileError,
         "utf16.tsv", "UTF-16", "byte-order mark", id="tsv-utf16-with-bom"),
    case(lambda f: read_tsv(fifo(f)), FileError, "pipe.tsv", "named pipe (FIFO)",
         id="tsv-named-pipe"),
    case(lambda f: read_regular_file(f.write("big.tsv", "a\tb\n" * 10), limit=16), FileError,
         "big.tsv", "40 bytes", "16 bytes", id="tsv-too-large"),
    case(lambda f: list(input_lines(io.BytesIO(b"ok\ncaf\xe9\n"))), DataError,
         "standard input", "line 2", "invalid UTF-8", "0xe9", id="stdin-invalid-utf8"),
    # sub-words and honest metrics
    case(lambda f: Tokenizer("bpe"), DataError, "bpe", "a BPE of learned merges",
         id="tokenizer-bpe-without-merges"),
    case(lambda f: TrainConfig(merges=-1), ValueError, "merges", "-1", id="train-config-merges"),
    case(full_disk_at_the_second_save, TrainingError, "step 2", "could not write",
         "checkpoint.npz", "No space left on device", "the last good checkpoint is",
         id="trainer-disk-full-names-the-file-and-the-last-good-checkpoint"),
    case(lambda f: TrainConfig(patience=0), ValueError, "patience", "0",
         id="train-config-patience-0"),
    case(lambda f: TrainConfig(max_minutes=math.inf), ValueError, "max_minutes", "inf",
         id="train-config-max-minutes-infinite"),
    case(lambda f: task_from_tsv(f.write("long.tsv", "x" * 1001 + "\ty\na\t" + "b" * 1001)),
         DataError, "long.tsv", "1000 characters", "nothing is left to train on",
         id="data-every-pair-too-long"),
    case(lambda f: experiment.load_trained(
             f.checkpoint("odd.npz", record("bpe", BPE([]).to_json()))),
         CheckpointError, "odd.npz", "bpe", "'char'", id="checkpoint-merges-beside-char-level"),
    case(lambda f: experiment.load_trained(f.checkpoint("odd.npz", record("bpe", "[[1, 2]]"))),
         CheckpointError, "odd.npz", "bpe", "expected a JSON object",
         id="checkpoint-bpe-not-merges"),
    # real-language tasks
    case(lambda f: language_tasks.number_pairs(backend.host_rng(0), 5, languages=("en", "xx")),
         ValueError, "languages", "'xx'", "'de'", id="numbers-unknown-language"),
    case(lambda f: language_tasks.number_pairs(backend.host_rng(0), 5, high=-1),
         ValueError, "high", "-1", id="numbers-negative-high"),
    case(lambda f: language_tasks.date_pairs(backend.host_rng(0), 5, formats=("longest",)),
         ValueError, "formats", "'longest'", "'long'", id="dates-unknown-format"),
    # exercise checkers
    case(lambda f: exercises.check_softmax(lambda z: z, quiet=True, seed=-1), ValueError,
         "seed", "non-negative integer", "-1", id="exercise-negative-seed"),
    case(lambda f: exercises.check_top_p(lambda q, p: q, quiet=True, seed=1.5), ValueError,
         "seed", "non-negative integer", "1.5", id="exercise-seed-not-an-integer"),
    # model options
    case(lambda f: ModelConfig(vocab_size=9, positions="rotary"), ValueError, "positions",
         "'rotary'", "'learned'", id="config-unknown-positions"),
    case(lambda f: ModelConfig(vocab_size=9, activation="swish"), ValueError, "activation",
         "'swish'", "'gelu'", id="config-unknown-activation"),
    case(lambda f: ModelConfig(vocab_size=9, d_k=-2), ValueError, "d_k", "-2",
         id="config-negative-d-k"),
    # a checkpoint that is a named pipe: the old code said "checkpoint not found"
    case(lambda f: load_checkpoint(fifo(f)), CheckpointError, "pipe.tsv", "named pipe (FIFO)",
         id="checkpoint-fifo"),
    # exercises of lessons 3 to 12
    case(lambda f: exercises.CHECKERS["shift_right"](lambda *a: a, quiet=True, seed=-2),
         ValueError, "seed", "non-negative integer", "-2", id="exercise-topic-module-seed"),
    # exercises of lessons 13-16 and 21 (topic modules)
    case(lambda f: exercises.CHECKERS["beam_search_step"](print, quiet=True, seed=-2),
         ValueError, "seed", "non-negative integer", "-2", id="exercise-topic-negative-seed"),
    # lesson 0 (the recurrent layer and Table 1)
    case(lambda f: minitrans.RecurrentLayer(0, 3), ValueError, "d_in", "0",
         id="recurrent-zero-d-in"),
    case(lambda f: minitrans.RecurrentLayer(4, 3).forward(floats(2, 4)), ValueError, "x",
         "rank 3", "(2, 4)", id="recurrent-not-a-sequence"),
    case(lambda f: minitrans.RecurrentLayer(4, 3).forward(floats(2, 5, 3)), ValueError, "x",
         "last dimension 4", "(2, 5, 3)", id="recurrent-wrong-width"),
    case(lambda f: path_lengths.path_length("rnn", 8), ValueError, "kind", "'rnn'",
         "'recurrent'", id="path-length-unknown-kind"),
    case(lambda f: path_lengths.path_length("attention", 1), ValueError, "n", "1",
         id="path-length-one-position"),
    # lesson 17's exercises (dropout, GELU, Xavier)
    case(lambda f: exercises.CHECKERS["xavier_init"](lambda u: u, quiet=True, seed="3"),
         ValueError, "seed", "non-negative integer", "'3'", id="exercise-xavier-seed-a-string"),
    # lesson 18 (the paper's experiments: perplexity)
    case(lambda f: exercises.CHECKERS["perplexity"](lambda *a: 1.0, quiet=True, seed=-1),
         ValueError, "seed", "non-negative integer", "-1", id="exercise-perplexity-negative-seed"),
]


def fifo(files):
    """A named pipe in the test's folder: opening it would wait for a writer."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes on this system")
    path = files.folder / "pipe.tsv"
    os.mkfifo(path)
    return path


def config(**changes):
    """Change fields of the model_config record."""

    def change(entries):
        values = json.loads(str(entries["json/model_config"]))
        entries["json/model_config"] = np.array(json.dumps({**values, **changes}))

    return change


def extra_member(entries):
    entries["notes"] = np.ones(3)


def npy_bytes():
    """A plain .npy file: np.load reads it, but it is no checkpoint."""
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "array.npy"
        np.save(path, np.ones(3))
        return path.read_bytes()


def test_the_catalogue_is_long_and_its_ids_unique():
    ids = [param.id for param in CATALOGUE]
    assert len(ids) >= 30 and len(set(ids)) == len(ids)


@pytest.mark.parametrize("provoke, error, fragments", CATALOGUE)
def test_bad_input_gives_a_clear_error(backend_name, tmp_path, provoke, error, fragments):
    with pytest.raises(error) as info:
        provoke(Files(tmp_path))
    assert "\n" not in str(info.value), str(info.value)
    assert_names(info, *fragments)


# ------------------------------------------------------------ command line


CLI_CATALOGUE = [
    cli(lambda f: train(f, "sort"), "task", "invalid choice", "'sort'", id="unknown-task"),
    cli(lambda f: train(f, "copy", "--steps", "0"), "--steps", "positive integer", "0",
        id="steps-0"),
    cli(lambda f: train(f, "copy", "--steps", "many"), "--steps", "invalid int value", "'many'",
        id="steps-not-a-number"),
    cli(lambda f: train(f, "copy", "--dropout", "1.5"), "--dropout", "[0, 1)", "1.5",
        id="dropout-1.5"),
    cli(lambda f: train(f, "copy", "--batch-size", "-1"), "--batch-size", "positive integer", "-1",
        id="batch-size-negative"),
    cli(lambda f: train(f, "copy", "--device", "tpu"), "--device", "'tpu'", "'gpu'",
        id="device-tpu"),
    cli(lambda f: train(f, "copy", "--seed", "-1"), "--seed", "non-negative integer", "-1",
        id="seed-negative"),
    cli(lambda f: train(f, "copy", "--heads", "3"), "h", "d_model=16", "h=3",
        id="heads-do-not-divide"),
    cli(lambda f: train(f, "copy", "--lr-factor", "inf"), "lr_factor", "inf", id="lr-factor-inf"),
    cli(lambda f: train(f, "copy", "--target", "-0.5"), "target_exact_match", "-0.5",
        id="target-negative"),
    cli(lambda f: train(f, "translate", "--data", f.folder / "missing.tsv"), "missing.tsv",
        "not found", id="data-missing"),
    cli(lambda f: train(f, "translate", "--data", f.write("bad.tsv", "a\tb\nno tab\n")), "bad.tsv",
        "line 2", "no tab", id="data-missing-tab"),
    cli(lambda f: train(f, "translate", "--data", f.write("empty.tsv", "")), "empty.tsv",
        "no source<TAB>target pairs", id="data-empty"),
    cli(lambda f: train(f, "translate", "--data", f.write("latin1.tsv", b"caf\xe9\tx\n")),
        "latin1.tsv", "line 1",
        "invalid UTF-8", id="data-invalid-utf8"),
    cli(lambda f: train(f, "copy", "--resume", f.truncated()), "truncated.npz",
        "not a readable checkpoint", id="resume-truncated"),
    cli(lambda f: train(f, "copy", "--resume", f.checkpoint("no-adam.npz", without("optim/"))),
        "no-adam.npz",
        "missing optimizer state", id="resume-missing-optimizer-state"),
    cli(lambda f: ["translate", "--checkpoint", f.checkpoint(), "--beam", "0", "12"], "--beam",
        "positive integer",
        "0", id="beam-0"),
    cli(lambda f: ["translate", "--checkpoint", f.folder / "none.npz", "12"], "none.npz",
        "not found", id="translate-missing-checkpoint"),
    cli(lambda f: ["translate", "--checkpoint", f.write("notes.txt", "hello"), "12"], "notes.txt",
        "not a readable checkpoint", id="translate-not-a-checkpoint"),
    cli(lambda f: ["translate", "--checkpoint", f.checkpoint("nan.npz", nan_weight), "12"],
        "nan.npz",
        "param/output_projection.W", "NaN or infinite", id="translate-nan-weights"),
    cli(lambda f: ["translate", "--checkpoint", f.checkpoint("odd.npz", record("task", {})), "12"],
        "odd.npz",
        "malformed checkpoint", id="translate-malformed-record"),
    cli(lambda f: ["translate", "--checkpoint",
                   f.checkpoint("odd.npz", config(tie_embeddings="false")), "12"],
        "odd.npz", "model_config.tie_embeddings", "'false'", id="translate-boolean-as-string"),
    cli(lambda f: train(f, "copy", "--resume", f.checkpoint("odd.npz", record("history", []))),
        "odd.npz", "history", id="resume-malformed-history"),
    cli(lambda f: ["translate", "--checkpoint",
                   f.checkpoint("deep.npz", record("step", text="[" * 10**5)), "12"],
        "deep.npz", "nests deeper", id="translate-deep-json"),
    cli(lambda f: ["evaluate", "--checkpoint", f.checkpoint(), "--data", f.write("bad.tsv",
                                                                                 "0\t0\n1 2\n")],
        "bad.tsv", "line 2", "no tab", id="evaluate-bad-data"),
    cli(lambda f: ["gradcheck", "--backend", "tpu"], "--backend", "'tpu'", "'numpy'",
        id="gradcheck-unknown-backend"),
    cli(lambda f: train(f, "copy"), "MINITRANS_BACKEND", "'tpu'", "'numpy'",
        env={"MINITRANS_BACKEND": "tpu"}, id="environment-unknown-backend"),
    cli(lambda f: ["gradcheck"], "MINITRANS_DTYPE", "'float16'", "'float32'",
        env={"MINITRANS_DTYPE": "float16"}, id="environment-unknown-dtype"),
    # exploring a trained model
    cli(lambda f: ["generate", "--checkpoint", f.checkpoint(), "12"], "--checkpoint",
        "encoder-decoder", "minitrans translate", id="generate-encoder-decoder-checkpoint"),
    cli(lambda f: ["generate", "--checkpoint", f.checkpoint(), "--top-p", "0", "12"], "--top-p",
        "(0, 1]", "0", id="generate-top-p-0"),
    cli(lambda f: ["generate", "--checkpoint", f.checkpoint(), "--temperature", "0", "12"],
        "--temperature", "positive number", "0", id="generate-temperature-0"),
    cli(lambda f: ["attention", "--checkpoint", f.checkpoint(), "12", "--out",
                   f.folder / "missing" / "attn.png"], "--out", "missing", "does not exist",
        id="attention-out-in-a-missing-folder"),
    cli(lambda f: ["attention", "--checkpoint", f.checkpoint(), "12", "--layer", "5"], "--layer",
        "[0, 0]", "5", id="attention-layer-too-deep"),
    # runs never overwrite
    cli(lambda f: train(f, "copy", "--resume", f.checkpoint(), "--steps", "2", "--d-model", "32"),
        "--d-model 32", "checkpoint: 16", id="resume-another-size"),
    cli(lambda f: train(f, "copy", "--resume", f.checkpoint()), "step 1", "--steps 1",
        "nothing to train", id="resume-steps-not-above"),
    cli(lambda f: train(f, "copy", "--out", f.checkpoint("old/checkpoint.npz").parent),
        "--out", "--resume", "--force", id="out-holds-a-checkpoint"),
    cli(lambda f: train(f, "copy", "--out", f.write("busy/.lock", json.dumps(
        {"pid": os.getpid(), "host": socket.gethostname(), "started": "now"})).parent),
        "in use by another trainer", f"pid {os.getpid()}", id="out-in-use"),
    # inputs bounded
    cli(lambda f: train(f, "copy", "--workers", "100000"), "--workers", "at most 64", "100000",
        id="workers-huge"),
    cli(lambda f: train(f, "copy", "--d-model", "1000000000"), "--d-model", "at most 65536",
        "1000000000", id="d-model-huge"),
    cli(lambda f: train(f, "copy", "--d-model", "65536", "--heads", "1", "--layers", "1024"),
        "d_model=65536", "N=1024", "PB", "has", id="model-of-petabytes"),
    cli(lambda f: train(f, "copy", "--steps", "100000000"), "--steps", "at most 10000000",
        "100000000", id="steps-huge"),
    cli(lambda f: train(f, "translate", "--data", f.write("nul.tsv", b"a\tb\n\x00\tc\n")),
        "nul.tsv", "line 2", "NUL byte", id="data-nul-byte"),
    cli(lambda f: train(f, "translate", "--data", f.write("utf16.tsv", UTF16)), "utf16.tsv",
        "UTF-16 without a byte-order mark", id="data-utf16-without-bom"),
    cli(lambda f: train(f, "translate", "--data", f.folder), "directory", id="data-directory"),
    cli(lambda f: train(f, "translate", "--data", fifo(f)), "pipe.tsv", "named pipe (FIFO)",
        id="data-named-pipe"),
    cli(lambda f: train(f, "translate", "--data", f.write("good.tsv", "a b\tc d\n" * 20),
                        "--valid", f.write("valid.tsv", UTF16)),
        "valid.tsv", "UTF-16 without a byte-order mark", id="valid-utf16-without-bom"),
    cli(lambda f: ["evaluate", "--checkpoint", f.checkpoint(), "--data",
                   f.write("utf16.tsv", UTF16)], "utf16.tsv", "UTF-16", id="evaluate-utf16-data"),
    cli(lambda f: ["translate", "--checkpoint", f.checkpoint()], "standard input", "line 1",
        "invalid UTF-8", "0xe9", stdin=b"caf\xe9 1 2\n", id="translate-stdin-invalid-utf8"),
    cli(lambda f: ["translate", "--checkpoint", f.checkpoint(), "--beam", "100000", "12"],
        "beam_size", "100000", id="beam-above-the-vocabulary"),
    # sub-words and honest metrics
    cli(lambda f: train(f, "translate", "--level", "byte"), "--level", "'byte'", "'bpe'",
        id="level-unknown"),
    cli(lambda f: train(f, "translate", "--merges", "-1"), "--merges", "-1", id="merges-negative"),
    cli(lambda f: train(f, "translate", "--data", f.write("long.tsv", "x" * 1001 + "\ty\n")),
        "long.tsv", "nothing is left to train on", id="data-every-pair-too-long"),
    cli(lambda f: ["evaluate", "--checkpoint", f.checkpoint(), "--data", f.write("t.tsv", "0\t0\n"),
                   "--show-errors", "-2"], "--show-errors", "-2", id="show-errors-negative"),
    # model options
    cli(lambda f: train(f, "copy", "--positions", "rotary"), "--positions", "'rotary'",
        "'learned'", id="positions-unknown"),
    cli(lambda f: train(f, "copy", "--d-k", "0"), "--d-k", "0", id="d-k-zero"),
    cli(lambda f: train(f, "copy", "--activation", "tanh"), "--activation", "'tanh'",
        id="activation-unknown"),
    # flags a corpus uses, refused without one (they were silently ignored, and
    # --merges recorded in the checkpoint); flags the checkpoint would refuse, refused first
    cli(lambda f: train(f, "copy", "--valid", f.write("v.tsv", "a\tb\n")), "--valid",
        "only used with --data", "copy", id="valid-without-data"),
    cli(lambda f: train(f, "reverse", "--merges", "50"), "--merges", "only used with --data",
        "reverse", "50", id="merges-with-a-built-in-task"),
    cli(lambda f: train(f, "copy", "--level", "char"), "--level", "only used with --data",
        "char", id="level-with-a-built-in-task"),
    cli(lambda f: train(f, "translate", "--data", f.write("c.tsv", "a\tb\n" * 9), "--merges",
                        "1000000000000"), "--merges", "at most 1048576", "1000000000000",
        id="merges-beyond-the-checkpoint-limit"),
    cli(lambda f: train(f, "copy", "--patience", "0"), "--patience", "0", id="patience-0"),
    cli(lambda f: train(f, "copy", "--max-minutes", "-1"), "--max-minutes", "-1",
        id="max-minutes-negative"),
    cli(lambda f: train(f, "copy", "--average-decay", "1"), "--average-decay", "1",
        id="average-decay-1"),
]

UTF16 = "a b\tc d\ne f\tg h\n".encode("utf-16-le")  # as some editors save "Unicode" text


@pytest.mark.parametrize("make_args, fragments, env, stdin", CLI_CATALOGUE)
def test_bad_command_line_gives_one_line_and_a_non_zero_exit(tmp_path, make_args, fragments, env,
                                                             stdin):
    assert_one_line_error(run_cli(make_args(Files(tmp_path)), env, stdin), fragments)
    assert not (tmp_path / "run").exists()  # nothing trained, nothing written


# ------------------------------------------------------- nothing is lost


def snapshot(folder):
    """Every file under ``folder`` and its bytes."""
    return {path.relative_to(folder): path.read_bytes()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def test_a_failed_command_overwrites_removes_and_adds_nothing(tmp_path):
    files = Files(tmp_path)
    out = tmp_path / "run"
    good = files.checkpoint("run/checkpoint.npz")
    bad_data = files.write("bad.tsv", "a\tb\nno tab\n")
    truncated = files.truncated()
    no_adam = files.checkpoint("no-adam.npz", without("optim/"))
    before = snapshot(tmp_path)
    commands = [
        ["train", "copy", "--out", out, "--steps", "0"],  # refused by the argument parser
        ["train", "copy", "--out", out, *TINY_FLAGS, "--heads", "3"],  # by the model's config
        ["train", "copy", "--out", out, *TINY_FLAGS, "--target", "-1"],  # by the training config
        ["train", "translate", "--out", out, *TINY_FLAGS, "--data", bad_data],  # by the data
        ["train", "copy", "--resume", truncated, "--no-progress"],  # by the checkpoint
        ["train", "copy", "--resume", no_adam, "--no-progress"],
        ["translate", "--checkpoint", truncated, "12"],
        ["evaluate", "--checkpoint", good, "--data", bad_data],
        ["train", "copy", "--resume", good, "--valid", bad_data],  # by the resume flags
        # the weights diverge (the held-out loss says so before any save)
        ["train", "copy", "--resume", good, "--steps", "2", "--eval-every", "1",
         "--lr-factor", "100000", "--no-progress"],
    ]
    for command in commands:
        result = run_cli(command)
        assert result.returncode != 0, (command, result.stdout)
        assert snapshot(tmp_path) == before, command


def load_trained(path):
    return experiment.load_trained(path)


def resume(path):
    return experiment.resume_trainer(path, steps=5, progress=False, log=lambda message: None)


SPOILT = [
    pytest.param(lambda files: files.truncated(), (load_trained, resume), id="truncated"),
    pytest.param(lambda files: files.checkpoint("nan.npz", nan_weight), (load_trained, resume),
                 id="nan-weights"),
    pytest.param(lambda files: files.checkpoint("odd.npz", record("model_config",
                                                                  {"vocab_size": 14, "h": 3})),
                 (load_trained, resume), id="impossible-config"),
    pytest.param(lambda files: files.checkpoint("no-adam.npz", without("optim/")), (resume,),
                 id="missing-optimizer-state"),  # translating needs no optimizer
]


@pytest.mark.parametrize("spoil, loaders", SPOILT)
def test_a_failed_load_leaves_the_file_as_it_was(tmp_path, spoil, loaders):
    path = spoil(Files(tmp_path))
    before = snapshot(tmp_path)
    for load in loaders:
        with pytest.raises(CheckpointError) as info:
            load(path)
        assert_names(info, path.name)
        assert snapshot(tmp_path) == before

"""Bad inputs to decoding and to the commands that explore a trained model
(``generate``, ``attention``), each met by a clear error: the catalogue of
``test_bad_inputs.py`` continued, in its style.

Each case here once ended otherwise: greedy given a language model (or
generate given an encoder-decoder) in a TypeError from deep inside the model,
a prompt longer than the model in "at most -9991", ``--samples 1000000000``
in a MemoryError traceback, ``--out a.txt`` in matplotlib's error after the
decoding. Three tests follow the catalogue: what is right at a limit is
accepted, generate names the prompt's unknown characters as translate does,
and attention writes its files where --out says and prints their real paths.
"""

import contextlib
import pathlib
import re
from unittest import mock

import pytest
from tests.cli.conftest import (Files, assert_one_line_error, checkpoint_bytes, ints,
                             language_model, model, run_cli)

from minitrans import decoding
from minitrans.core import memory_budget
from minitrans.decoding import input_checks
from minitrans.cli.main import main
from minitrans.training import experiment
from tests.library.conftest import assert_names

# ------------------------------------------------------------------- memory


@contextlib.contextmanager
def memory_for(rows, config, source_length=0):
    """The machine's memory, as decoding counts it, holds the model and
    ``rows`` rows of ``config`` and not one more."""
    size = memory_budget.model_bytes(config) + rows * input_checks.row_bytes(config, source_length)
    with mock.patch.object(memory_budget, "machine_memory", lambda: size):
        yield


def with_memory_for(rows, model, call, source_length=0):
    with memory_for(rows, model.config, source_length):
        return call(model)


# ---------------------------------------------------------------- catalogue


def case(provoke, error, *fragments, id):
    """``provoke(files)`` must raise ``error`` whose message names every
    fragment as a whole word."""
    return pytest.param(provoke, error, fragments, id=id)


ENCODER_DECODER, DECODER_ONLY = "encoder-decoder model", "decoder-only model"

CATALOGUE = [
    # a model of the other kind: named, with the function for the model given
    case(lambda f: decoding.greedy(language_model(), ints(1, 3), 4), TypeError, "model",
         ENCODER_DECODER, DECODER_ONLY, "DecoderOnlyLM", "decoding.generate",
         id="greedy-given-a-language-model"),
    case(lambda f: decoding.sample(language_model(), ints(1, 3), 4), TypeError, "model",
         ENCODER_DECODER, DECODER_ONLY, id="sample-given-a-language-model"),
    case(lambda f: decoding.beam_search(language_model(), ints(1, 3), beam_size=2), TypeError,
         "model", ENCODER_DECODER, DECODER_ONLY, id="beam-search-given-a-language-model"),
    case(lambda f: decoding.decode_with_attention(language_model(), ints(1, 3), 4), TypeError,
         "model", ENCODER_DECODER, DECODER_ONLY, id="attention-maps-given-a-language-model"),
    case(lambda f: decoding.generate(model(), ints(1, 3), 4), TypeError, "lm", DECODER_ONLY,
         ENCODER_DECODER, "Transformer", "decoding.greedy", id="generate-given-a-transformer"),
    case(lambda f: decoding.generate(model(), ints(1, 3), 4, strategy="sample"), TypeError, "lm",
         DECODER_ONLY, ENCODER_DECODER, id="sampling-a-prompt-given-a-transformer"),
    case(lambda f: decoding.generate_with_attention(model(), ints(1, 3), 4), TypeError, "lm",
         DECODER_ONLY, ENCODER_DECODER, id="attention-maps-of-a-prompt-given-a-transformer"),
    case(lambda f: decoding.greedy("model.npz", ints(1, 3), 4), TypeError, "model",
         ENCODER_DECODER, "str", id="greedy-given-a-file-name"),
    # lengths: the real limit, never a negative one ("at most -9991")
    case(lambda f: decoding.generate(language_model(), ints(1, 10000), 3), ValueError, "prompt",
         "at most 8 tokens", "8 positions", "10000", id="generate-prompt-longer-than-the-model"),
    case(lambda f: decoding.generate(language_model(), ints(1, 9), 1), ValueError, "prompt",
         "at most 8 tokens", "9", id="generate-prompt-one-longer-than-the-model"),
    case(lambda f: decoding.generate(language_model(), ints(1, 3), 7), ValueError,
         "max_new_tokens", "at most 6", "3 tokens", "8 positions", "7",
         id="generate-more-new-tokens-than-room-after-the-prompt"),
    # rows beyond the machine's memory: refused before the caches are allocated
    case(lambda f: with_memory_for(10, language_model(),
                                   lambda lm: decoding.generate(lm, ints(11, 2), 3)),
         ValueError, "prompt", "at most 10 rows", "11", id="generate-more-rows-than-memory"),
    case(lambda f: with_memory_for(10, model(), lambda m: decoding.sample(m, ints(11, 3), 4),
                                   source_length=3),
         ValueError, "src", "at most 10 rows", "11", id="sample-more-rows-than-memory"),
    case(lambda f: with_memory_for(10, model(), lambda m: decoding.greedy(m, ints(11, 3), 4),
                                   source_length=3),
         ValueError, "src", "at most 10 rows", "11", id="greedy-more-rows-than-memory"),
    case(lambda f: with_memory_for(10, model(), lambda m: decoding.beam_search(
        m, ints(3, 3), beam_size=4), source_length=3),
         ValueError, "src with beam_size=4", "at most 10 hypotheses", "12",
         id="beam-search-more-hypotheses-than-memory"),
]


@pytest.mark.parametrize("provoke, error, fragments", CATALOGUE)
def test_bad_decoding_input_gives_a_clear_error(backend_name, tmp_path, provoke, error,
                                               fragments):
    with pytest.raises(error) as info:
        provoke(Files(tmp_path))
    assert "\n" not in str(info.value), str(info.value)
    assert not re.search(r"most -\d", str(info.value)), str(info.value)
    assert_names(info, *fragments)


def test_decoding_accepts_what_is_right_at_each_limit(backend_name):
    """The limits above are the real ones: one less is decoded."""
    lm, transformer = language_model(), model()
    assert decoding.generate(lm, ints(1, 8), 1).shape == (1, 1)  # the prompt fills the model
    assert decoding.generate(lm, ints(1, 3), 6).shape[1] <= 6
    assert decoding.greedy(transformer, ints(1, 3), 8).shape[1] <= 8
    assert with_memory_for(10, lm, lambda m: decoding.generate(m, ints(10, 2), 3)).shape[0] == 10
    assert with_memory_for(10, transformer, lambda m: decoding.beam_search(
        m, ints(5, 3), beam_size=2), source_length=3).shape[0] == 5


# ------------------------------------------------------------ command line


def lm(files):
    return files.write("lm.npz", checkpoint_bytes("lm"))


def cli(make_args, *fragments, id):
    """``minitrans *make_args(files)`` must fail with one stderr line that
    names every fragment as a whole word."""
    return pytest.param(make_args, fragments, id=id)


CLI_CATALOGUE = [
    cli(lambda f: ["generate", "--checkpoint", lm(f), "--samples", "1000000000", "12+"],
        "--samples", "at most 65536", "1000000000", id="generate-a-billion-samples"),
    cli(lambda f: ["generate", "--checkpoint", lm(f), "1" * 80], "prompt", "at most 63 tokens",
        "64 positions", "<bos>", "80", id="generate-prompt-longer-than-the-model"),
    cli(lambda f: ["generate", "--checkpoint", lm(f), "1" * 64], "prompt", "at most 63 tokens",
        "64", id="generate-prompt-as-long-as-the-model"),
    cli(lambda f: ["generate", "--checkpoint", lm(f), "12+", "--max-tokens", "10000"],
        "--max-tokens", "at most 61", "3 tokens", "64 positions", "10000",
        id="generate-more-tokens-than-room-after-the-prompt"),
    cli(lambda f: ["attention", "--checkpoint", f.checkpoint(), "12", "--out",
                   f.folder / "attn.txt"], "--out", "attn.txt", ".png", ".svg",
        id="attention-out-not-an-image"),
    cli(lambda f: ["attention", "--checkpoint", f.checkpoint(), "12", "--out",
                   f"{f.folder / 'plots'}/"], "--out", "plots", "does not exist",
        id="attention-out-a-missing-folder"),
]


@pytest.mark.parametrize("make_args, fragments", CLI_CATALOGUE)
def test_bad_command_line_gives_one_line_and_a_non_zero_exit(tmp_path, make_args, fragments):
    files = Files(tmp_path)
    args = make_args(files)
    before = sorted(tmp_path.rglob("*"))
    assert_one_line_error(run_cli(args), fragments)
    assert sorted(tmp_path.rglob("*")) == before  # nothing written


def command(capsys, *args):
    """(exit status, stdout lines, stderr lines) of ``minitrans *args``, in process."""
    status = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err.splitlines()


def test_generate_refuses_more_samples_than_memory_holds_before_decoding(tmp_path, capsys):
    checkpoint = lm(Files(tmp_path))
    config = experiment.load_trained(checkpoint)[0].config
    with memory_for(10, config), mock.patch.object(decoding, "generate") as decode:
        status, out, err = command(capsys, "generate", "--checkpoint", checkpoint, "12+",
                                   "--samples", "11")
    assert status == 1 and out == [] and len(err) == 1 and not decode.called
    assert re.search(r"--samples: expected at most 10 samples .*, got 11$", err[0]), err[0]


def test_generate_names_unknown_characters_as_translate_does(tmp_path, capsys):
    """generate read "12+ab" as "12+<unk><unk>" without a word."""
    files = Files(tmp_path)
    status, out, err = command(capsys, "generate", "--checkpoint", lm(files), "12+ab",
                               "--max-tokens", "2")
    assert status == 0 and len(out) == 1 and out[0].startswith("12+ab")
    assert err == ["unknown to the model: 'a', 'b'"]
    status, out, err = command(capsys, "translate", "--checkpoint", files.checkpoint(), "12ab")
    assert status == 0 and err == ["unknown to the model: 'a', 'b'"]


def written(lines):
    """The paths printed by ``attention``: "KIND attention: PATH"."""
    return {pathlib.Path(line.split(": ", 1)[1]) for line in lines if " attention: " in line}


def test_attention_writes_inside_a_folder_and_prints_the_files_written(tmp_path, capsys):
    """--out FOLDER wrote FOLDER-encoder (printed) as FOLDER-encoder.png beside it."""
    files = Files(tmp_path)
    folder = tmp_path / "plots"
    folder.mkdir()
    for checkpoint, names in ((files.checkpoint(), {"attention-encoder.png",
                                                    "attention-decoder.png",
                                                    "attention-cross.png"}),
                              (lm(files), {"attention.png"})):
        before = set(tmp_path.rglob("*"))
        status, out, _ = command(capsys, "attention", "--checkpoint", checkpoint, "12",
                                 "--out", folder)
        assert status == 0 and written(out) == {folder / name for name in names}
        assert set(tmp_path.rglob("*")) - before == written(out)


def test_attention_adds_png_to_a_name_without_an_extension(tmp_path, capsys):
    files = Files(tmp_path)
    checkpoint = files.checkpoint()
    for out_name, names in (("attn", {"attn-encoder.png", "attn-decoder.png", "attn-cross.png"}),
                            ("map.", {"map-encoder.png", "map-decoder.png", "map-cross.png"})):
        before = set(tmp_path.iterdir())
        status, out, _ = command(capsys, "attention", "--checkpoint", checkpoint, "12",
                                 "--out", tmp_path / out_name)
        assert status == 0 and written(out) == {tmp_path / name for name in names}
        assert set(tmp_path.iterdir()) - before == written(out)

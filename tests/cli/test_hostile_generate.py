"""``minitrans generate`` as a hostile or careless user tries it: a
tokenizer.json whose Split pattern backtracks for ever, a config.json whose
special ids are no token, a prompt that is not UTF-8, a model whose
embedding has rows beyond its tokenizer's ids, ids with a gap.

The model is a GPT-2 of d_model 8 and one layer written by minitrans
itself, with a byte-level tokenizer of 257 tokens (the 256 bytes and
<|endoftext|>)."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("safetensors", reason="safetensors is not installed")
pytest.importorskip("regex", reason="the regex package is not installed")

from minitrans.cli import main as cli_main  # noqa: E402
from minitrans.data.byte_level_bpe import BYTE_TO_CHAR  # noqa: E402
from minitrans.model.language_model import DecoderOnlyLM  # noqa: E402
from minitrans.pretrained import GPT2, save_pretrained  # noqa: E402
from minitrans.pretrained.architectures import model_config  # noqa: E402
from tests.cli.conftest import checkpoint_bytes  # noqa: E402

TOKENS = 257  # the tokenizer's: 256 bytes and <|endoftext|>
VOCAB = {char: byte for byte, char in BYTE_TO_CHAR.items()} | {"<|endoftext|>": 256}


def tiny_folder(path, rows=TOKENS, extra=None, model=None):
    """A GPT-2 folder whose embedding has ``rows`` rows, with vocab.json and merges.txt."""
    hub = {"architectures": [GPT2], "model_type": "gpt2", "n_embd": 8, "n_head": 2,
           "n_layer": 1, "n_positions": 16, "vocab_size": rows}
    model = model or DecoderOnlyLM(model_config("config.json", hub, GPT2), rng=0)
    save_pretrained(model, path, GPT2, extra=extra)
    (path / "vocab.json").write_text(json.dumps(VOCAB), encoding="utf-8")
    (path / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    return path


def main(capsys, *args):
    """minitrans's command line in this process: (exit code, stdout, stderr)."""
    code = cli_main.main([str(arg) for arg in args])
    out, err = capsys.readouterr()
    return code, out, err


def run(*args, timeout=20):
    """minitrans's command line in a child process, which a hang cannot outlive."""
    try:
        done = subprocess.run([sys.executable, "-m", "minitrans", *map(str, args)],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"minitrans did not end within {timeout} s")
    return done.returncode, done.stdout, done.stderr


def assert_refused(code, out, err, *parts):
    assert code != 0 and out == "", (code, out)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for part in parts:
        assert str(part) in lines[0], (part, lines[0])


def test_a_backtracking_split_pattern_fails_in_one_line_not_a_hang(tmp_path, capsys):
    folder = tiny_folder(tmp_path / "model")
    split = {"type": "Split", "pattern": {"Regex": "(a|aa)+$"}, "behavior": "Isolated",
             "invert": False}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": False}
    (folder / "tokenizer.json").write_text(json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": None, "post_processor": None, "decoder": {"type": "ByteLevel"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split, byte_level]},
        "model": {"type": "BPE", "vocab": VOCAB, "merges": []}}), encoding="utf-8")
    assert main(capsys, "generate", "--pretrained", folder, "aab", "--max-tokens", "2")[0] == 0
    assert_refused(*run("generate", "--pretrained", folder, "a" * 40 + "b"),
                   "tokenizer.json", "pre_tokenizer.pretokenizers[0].pattern.Regex")


@pytest.mark.parametrize("field, value", [("bos_token_id", 999), ("bos_token_id", 300),
                                          ("eos_token_id", 999), ("eos_token_id", [2, 400]),
                                          ("bos_token_id", True)])
def test_a_special_id_that_is_no_token_is_blamed_on_config_json(tmp_path, capsys, field,
                                                                 value):
    """An empty prompt starts from bos_token_id: one outside the vocabulary
    was reported as a bad prompt. The model has 320 rows, 257 of them tokens."""
    folder = tiny_folder(tmp_path / "model", rows=320, extra={field: value})
    assert_refused(*main(capsys, "generate", "--pretrained", folder, ""),
                   "config.json", field, "257 tokens")


def test_a_prompt_that_is_not_utf8_is_named(tmp_path, capsys):
    """Python hands such an argument over with its bytes escaped as lone
    surrogates (os.fsdecode does the same here), and the codec's error named
    neither the prompt nor the byte."""
    folder = tiny_folder(tmp_path / "model")
    assert_refused(*main(capsys, "generate", "--pretrained", folder, os.fsdecode(b"ab\xffc")),
                   "prompt", "not UTF-8", "0xff", "character 3")
    checkpoint = tmp_path / "lm.npz"
    checkpoint.write_bytes(checkpoint_bytes("lm"))
    assert_refused(*main(capsys, "generate", "--checkpoint", checkpoint, os.fsdecode(b"12\xfe+")),
                   "prompt", "not UTF-8", "0xfe")
    assert_refused(*main(capsys, "attention", "--checkpoint", checkpoint, os.fsdecode(b"\xfe"),
                         "--out", tmp_path / "a.png"), "text", "not UTF-8", "0xfe")
    copy = tmp_path / "copy.npz"
    copy.write_bytes(checkpoint_bytes("copy"))
    assert_refused(*main(capsys, "translate", "--checkpoint", copy, os.fsdecode(b"1 \xfe")),
                   "text", "not UTF-8", "0xfe")


def test_rows_of_a_padded_embedding_are_never_drawn(tmp_path, capsys):
    """Real models pad their embedding beyond the tokenizer's ids (to a
    multiple of 64): a row without a token, made here the most likely at
    every step, was drawn and failed the decoding mid-sampling."""
    hub = {"architectures": [GPT2], "model_type": "gpt2", "n_embd": 8, "n_head": 2,
           "n_layer": 1, "n_positions": 16, "vocab_size": 320}
    model = DecoderOnlyLM(model_config("config.json", hub, GPT2), rng=0)
    params = {name: value for name, value, _ in model.named_parameters()}
    params["embed.embedding.W_E"][317] = 10.0  # the output projection is tied to it
    params["decoder.final_norm.gamma"][...] = 0.0  # every position's vector: all 10s
    params["decoder.final_norm.beta"][...] = 10.0
    folder = tiny_folder(tmp_path / "model", rows=320, model=model)
    code, out, err = main(capsys, "generate", "--pretrained", folder, "hi", "--top-k", "1",
                          "--max-tokens", "3", "--samples", "2")
    assert code == 0, err
    assert out.count("hi") == 2 and len(out) > len("hi\nhi\n"), out


def test_ids_with_a_gap_fail_before_any_sample(tmp_path, capsys):
    folder = tiny_folder(tmp_path / "model")
    gapped = {token: (token_id if token_id < 100 else token_id + 1)
              for token, token_id in VOCAB.items()}
    (folder / "vocab.json").write_text(json.dumps(gapped), encoding="utf-8")
    assert_refused(*main(capsys, "generate", "--pretrained", folder, "hi", "--samples", "3"),
                   "vocab.json", "id 100")

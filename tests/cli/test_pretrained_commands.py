"""generate --pretrained and train --init-from, end to end, on a tiny random
GPT-2 (vocab.json + merges.txt) and a tiny Llama (tokenizer.json), each with
a tokenizer trained here by the ``tokenizers`` library (no download)."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: pip install \".[torch]\"")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")
hf = pytest.importorskip("tokenizers", reason="the tokenizers library is not installed")
pytest.importorskip("safetensors", reason="safetensors is not installed")
pytest.importorskip("regex", reason="the regex package is not installed")

import minitrans  # noqa: E402
from minitrans.data.pretrained_tokenizer import load_tokenizer  # noqa: E402
from minitrans.pretrained import load_pretrained  # noqa: E402
from tests.cli.conftest import assert_one_line_fails  # noqa: E402

TEXT = ("The quick brown fox jumps over the lazy dog. A small model reads a small text, "
        "and the text says the same things again and again. ") * 12
EOT = "<|endoftext|>"


def run(*args):
    return subprocess.run([sys.executable, "-m", "minitrans", *args], capture_output=True,
                          text=True)


def _tokenizer(special):
    tokenizer = hf.Tokenizer(hf.models.BPE())
    tokenizer.pre_tokenizer = hf.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = hf.decoders.ByteLevel()
    trainer = hf.trainers.BpeTrainer(vocab_size=300, show_progress=False,
                                     special_tokens=special,
                                     initial_alphabet=hf.pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator([TEXT], trainer)
    return tokenizer


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """{"gpt2": folder with vocab.json + merges.txt, "llama": folder with tokenizer.json}"""
    made = {}
    gpt2_tok = _tokenizer([EOT])
    llama_tok = _tokenizer(["<s>", "</s>"])
    configs = {
        "gpt2": transformers.GPT2Config(n_embd=32, n_head=4, n_layer=2, n_positions=64,
                                        vocab_size=gpt2_tok.get_vocab_size(),
                                        bos_token_id=None, eos_token_id=None),
        "llama": transformers.LlamaConfig(hidden_size=32, num_attention_heads=4,
                                          num_key_value_heads=2, num_hidden_layers=2,
                                          intermediate_size=64, max_position_embeddings=64,
                                          vocab_size=llama_tok.get_vocab_size(),
                                          bos_token_id=llama_tok.token_to_id("<s>"),
                                          eos_token_id=llama_tok.token_to_id("</s>")),
    }
    for name, config in configs.items():
        torch.manual_seed(23)
        model = transformers.AutoModelForCausalLM.from_config(config)
        made[name] = tmp_path_factory.mktemp(name)
        model.save_pretrained(made[name], safe_serialization=True)
    gpt2_tok.model.save(str(made["gpt2"]))  # vocab.json, merges.txt
    llama_tok.save(str(made["llama"] / "tokenizer.json"))
    return made


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


# generate --pretrained ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_generate_samples_continuations_of_the_prompt(folders, name):
    flags = ["generate", "--pretrained", str(folders[name]), "The quick", "--max-tokens", "8",
             "--samples", "3", "--seed", "4"]
    first, again = run(*flags), run(*flags)
    assert first.returncode == 0, first.stderr
    # a random model writes newlines too: a sample may take more than one line
    assert first.stdout.startswith("The quick") and first.stdout.count("\nThe quick") == 2
    assert first.stdout == again.stdout  # the same seed, the same samples
    other = run(*flags[:-1], "5")
    assert other.returncode == 0 and other.stdout != first.stdout


def test_the_sampling_flags_work(folders):
    folder = str(folders["gpt2"])
    greedy = [run("generate", "--pretrained", folder, "A small", "--max-tokens", "6", "--top-k",
                  "1", "--samples", "2", "--seed", str(seed)).stdout for seed in (0, 1)]
    half = len(greedy[0]) // 2
    assert greedy[0] == greedy[1] and greedy[0][:half] == greedy[0][half:]  # top-k 1: argmax
    cold = run("generate", "--pretrained", folder, "A small", "--max-tokens", "6",
               "--temperature", "0.01", "--top-p", "0.5")
    assert cold.returncode == 0 and cold.stdout == greedy[0][:half]


def test_generation_stops_at_the_end_of_text_token(folders, tmp_path):
    """A GPT-2 made to predict <|endoftext|> first at every step: nothing is added
    (its config.json names no eos_token_id: the tokenizer's <|endoftext|> ends a sample)."""
    folder = tmp_path / "eot"
    shutil.copytree(folders["gpt2"], folder)
    eot = [i for i, token in load_tokenizer(folder).tokens.items() if token == EOT]
    model = transformers.AutoModelForCausalLM.from_pretrained(folder)
    with torch.no_grad():  # every position's last hidden vector: <|endoftext|>'s embedding
        row = model.transformer.wte.weight[eot[0]]
        row *= 10
        model.transformer.ln_f.weight.zero_()
        model.transformer.ln_f.bias.copy_(row)
    model.save_pretrained(folder, safe_serialization=True)
    result = run("generate", "--pretrained", str(folder), "The quick", "--top-k", "1")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "The quick\n"


# train --init-from -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_fine_tuning_writes_checkpoints_and_a_folder_transformers_loads(folders, corpus, name,
                                                                       tmp_path):
    out = tmp_path / "run"
    result = run("train", "--init-from", str(folders[name]), "--data", str(corpus), "--steps",
                 "6", "--eval-every", "3", "--batch-size", "4", "--block-size", "16", "--lr",
                 "3e-3", "--warmup", "1", "--out", str(out), "--no-progress")
    assert result.returncode == 0, result.stderr
    assert "step 3: held-out loss" in result.stdout and "step 6: held-out loss" in result.stdout
    losses = [float(line.split("held-out loss ")[1].split()[0])
              for line in result.stdout.splitlines() if ": held-out loss" in line]
    assert losses[-1] < losses[0], result.stdout  # it learns the repeated text
    assert {"checkpoint.npz", "best.npz", "pretrained"} <= {p.name for p in out.iterdir()}
    folder = out / "pretrained"
    assert (folder / ("vocab.json" if name == "gpt2" else "tokenizer.json")).exists()
    with minitrans.using("numpy", dtype="float64"):
        ours, tokenizer, _ = load_pretrained(folder)
        ids = np.array([tokenizer.encode("the same things again")])
        logits = minitrans.core.backend.to_numpy(ours.forward(ids))
    theirs = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64)
    with torch.no_grad():
        expected = theirs(torch.tensor(ids)).logits.numpy()
    np.testing.assert_allclose(logits, expected, atol=1e-4, rtol=1e-4)
    again = run("generate", "--pretrained", str(folder), "The quick", "--max-tokens", "4")
    assert again.returncode == 0, again.stderr


# errors ------------------------------------------------------------------------------------------

def test_a_missing_folder_and_a_folder_without_a_tokenizer_are_one_line(folders, corpus,
                                                                         tmp_path):
    assert_one_line_fails(run("generate", "--pretrained", str(tmp_path / "nope"), "hi"),
                          "--pretrained", "no such folder")
    bare = tmp_path / "bare"
    shutil.copytree(folders["gpt2"], bare)
    for name in ("vocab.json", "merges.txt"):
        (bare / name).unlink()
    assert_one_line_fails(run("generate", "--pretrained", str(bare), "hi"), "no tokenizer")
    assert_one_line_fails(run("train", "--init-from", str(bare), "--data", str(corpus)),
                          "no tokenizer")
    assert_one_line_fails(run("train", "--init-from", str(tmp_path / "nope"), "--data",
                              str(corpus)), "--init-from", "no such folder")


def test_conflicting_or_missing_flags_are_one_line(folders, corpus, tmp_path):
    folder = str(folders["gpt2"])
    assert_one_line_fails(run("generate", "--pretrained", folder, "--checkpoint", "x.npz", "hi"),
                          "not allowed with")
    assert_one_line_fails(run("generate", "hi"), "--checkpoint", "--pretrained", "required")
    assert_one_line_fails(run("train", "--init-from", folder), "--data is required")
    assert_one_line_fails(run("train", "copy", "--init-from", folder, "--data", str(corpus)),
                          "drop copy")
    assert_one_line_fails(run("train", "--init-from", folder, "--data", str(corpus),
                              "--resume", "x.npz"), "--resume")
    assert_one_line_fails(run("train", "--init-from", folder, "--data", str(corpus),
                              "--average-decay", "0.9"), "do not apply", "--average-decay")
    assert_one_line_fails(run("train", "copy", "--lr", "0.1"), "--lr: only used with --init-from")
    assert_one_line_fails(run("train", "--init-from", folder, "--data", str(tmp_path / "no.txt")),
                          "--data", "no such file")
    short = tmp_path / "short.txt"
    short.write_text("tiny", encoding="utf-8")
    assert_one_line_fails(run("train", "--init-from", folder, "--data", str(short)),
                          "--block-size")


def test_the_config_of_the_fine_tuned_folder_keeps_the_special_tokens(folders, corpus, tmp_path):
    out = tmp_path / "run"
    result = run("train", "--init-from", str(folders["llama"]), "--data", str(corpus), "--steps",
                 "1", "--batch-size", "2", "--block-size", "16", "--out", str(out),
                 "--no-progress")
    assert result.returncode == 0, result.stderr
    written = json.loads((out / "pretrained" / "config.json").read_text())
    original = json.loads((folders["llama"] / "config.json").read_text())
    assert written["eos_token_id"] == original["eos_token_id"]

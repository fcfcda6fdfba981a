"""The train, translate and evaluate commands, end to end, on tiny runs."""

import subprocess
import sys

import pytest

from minitrans.core import backend
from tests.cli.conftest import assert_one_line_fails

TINY = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--no-progress"]


def run(*args, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "minitrans", *args], capture_output=True, text=True, input=stdin
    )


@pytest.fixture(scope="module")
def trained_copy(tmp_path_factory):
    out = tmp_path_factory.mktemp("copy")
    result = run("train", "copy", "--steps", "4", "--eval-every", "2", "--out", str(out), *TINY)
    assert result.returncode == 0, result.stderr
    return out, result.stdout


def test_train_prints_progress_accuracy_and_samples(trained_copy):
    out, stdout = trained_copy
    assert "task copy" in stdout and "parameters" in stdout
    assert "step 2: held-out loss" in stdout and "step 4: held-out loss" in stdout
    assert "held-out exact match" in stdout and stdout.count(" -> ") == 5
    assert {p.name for p in out.iterdir()} == {"checkpoint.npz", "best.npz", "loss.png", "lr.png"}
    assert f"checkpoint: {out / 'checkpoint.npz'} (last), {out / 'best.npz'} (best held-out" \
        in stdout


def test_resume_continues_from_the_checkpoint(trained_copy):
    out, _ = trained_copy
    result = run(
        "train", "copy", "--resume", str(out / "checkpoint.npz"), "--steps", "6", "--no-progress"
    )
    assert result.returncode == 0, result.stderr
    assert "step 6: held-out loss" in result.stdout and "step 2:" not in result.stdout


def test_translate_one_sentence_and_standard_input(trained_copy):
    out, _ = trained_copy
    one = run("translate", "--checkpoint", str(out / "checkpoint.npz"), "0123456789")
    assert one.returncode == 0, one.stderr
    assert len(one.stdout.splitlines()) == 1
    many = run(
        "translate",
        "--checkpoint",
        str(out / "checkpoint.npz"),
        "--beam",
        "3",
        stdin="0123\n98765\n",
    )
    assert many.returncode == 0, many.stderr
    assert len(many.stdout.splitlines()) == 2


def test_evaluate_prints_exact_match_and_bleu(trained_copy, tmp_path):
    out, _ = trained_copy
    data = tmp_path / "test.tsv"
    data.write_text("0123456789\t0123456789\n5555500000\t5555500000\n", encoding="utf-8")
    result = run("evaluate", "--checkpoint", str(out / "checkpoint.npz"), "--data", str(data))
    assert result.returncode == 0, result.stderr
    assert (
        "2 pairs" in result.stdout and "exact match:" in result.stdout and "BLEU:" in result.stdout
    )
    assert "(sacrebleu, tokenize=char)" in result.stdout  # digits: no spaces to speak of


def test_evaluate_shows_errors_beside_their_references(trained_copy, tmp_path):
    out, _ = trained_copy
    data = tmp_path / "test.tsv"
    data.write_text("".join(f"{n:010d}\t{n:010d}\n" for n in range(0, 10**9, 10**8)))
    result = run("evaluate", "--checkpoint", str(out / "checkpoint.npz"), "--data", str(data),
                 "--show-errors", "2")
    assert result.returncode == 0, result.stderr
    assert "2 of 10 wrong predictions:" in result.stdout  # a model after 4 steps gets none right
    assert result.stdout.count("  source     '") == 2
    assert result.stdout.count("  prediction '") == 2
    assert "  reference  '0000000000'" in result.stdout


def test_training_on_a_tsv_holds_out_a_slice_and_says_so(tmp_path):
    data = tmp_path / "corpus.tsv"
    data.write_text("".join(f"a b {i}\tx {i} y\n" for i in range(30)), encoding="utf-8")
    result = run("train", "translate", "--data", str(data), "--steps", "2", "--eval-every", "2",
                 "--out", str(tmp_path / "run"), *TINY)
    assert result.returncode == 0, result.stderr
    assert "held out 3 of 30 pairs" in result.stdout
    assert "(bpe level)" in result.stdout  # the default with --data
    assert "unknown held-out tokens at bpe level: source 0.0%, target 0.0%" in result.stdout
    checkpoint = str(tmp_path / "run" / "checkpoint.npz")
    named = run("translate", "--checkpoint", checkpoint, stdin="a b 7\na ¥ b €€\n")
    assert named.returncode == 0, named.stderr
    assert named.stderr == "unknown to the model: '¥', '€'\n"  # one line per line that has any
    assert len(named.stdout.splitlines()) == 2


def test_a_high_unknown_share_is_warned_of_naming_the_level(tmp_path):
    """Number words -> digits at word level: every held-out target unknown.
    The old code trained on silently, to 0% exact match."""
    data = tmp_path / "numbers.tsv"
    words = "zero one two three four five six seven eight nine".split()
    pairs = [(" ".join(words[int(d)] for d in str(n)), str(n)) for n in range(10, 40)]
    data.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    result = run("train", "translate", "--data", str(data), "--level", "word", "--steps", "2",
                 "--eval-every", "2", "--out", str(tmp_path / "run"), *TINY)
    assert result.returncode == 0, result.stderr
    assert "target 100.0%" in result.stdout
    assert result.stderr == ("minitrans: warning: 100.0% of the held-out target tokens are "
                             "unknown at word level; try --level bpe (sub-words: unseen words "
                             "are made of known pieces)\n")


def test_user_errors_are_one_line(trained_copy, tmp_path):
    out, _ = trained_copy
    assert_one_line_fails(run("train", "translate", "--data", str(tmp_path / "missing.tsv"), *TINY),
                          "missing.tsv", "not found")
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tb\nno tab here\n", encoding="utf-8")
    assert_one_line_fails(run("train", "translate", "--data", str(bad), *TINY), "bad.tsv", "line 2")
    assert_one_line_fails(
        run("translate", "--checkpoint", str(tmp_path / "none.npz"), "hi"), "none.npz", "not found"
    )
    assert_one_line_fails(
        run("translate", "--checkpoint", str(bad), "hi"), "bad.tsv", "not a readable checkpoint"
    )
    assert_one_line_fails(
        run("evaluate", "--checkpoint", str(out / "checkpoint.npz"), "--data", str(bad)), "line 2"
    )
    if "cupy" not in backend.available_backends():  # where a GPU works, this trains
        assert_one_line_fails(run("train", "copy", "--device", "gpu", *TINY), "cupy")
    assert_one_line_fails(run("train", "copy", "--lr-factor", "-1", *TINY), "lr_factor")
    # the checkpoint's own limit, refused before training rather than on --resume
    assert_one_line_fails(run("train", "copy", "--merges", "1000000000000", *TINY), "merges",
                          "1048576")


def test_a_language_model_with_llama_s_options_trains_resumes_and_generates(tmp_path):
    """The flags of the options after the paper build the model they name,
    are kept in the checkpoint (a resumed run may not change them) and
    decode with the key/value cache of its shared heads."""
    out = tmp_path / "llama"
    modern = ["--norm", "rms", "--positions", "rope", "--activation", "swiglu", "--kv-heads",
              "1", "--no-bias", "--no-output-bias", "--no-scale-embedding", "--rope-base",
              "500000", "--norm-eps", "1e-6", "--pre-norm"]
    result = run("train", "lm", "--steps", "2", "--eval-every", "2", "--out", str(out), *TINY,
                 *modern)
    assert result.returncode == 0, result.stderr
    for shown in ("positions='rope'", "activation='swiglu'", "norm='rms'", "norm_eps=1e-06",
                  "rope_base=500000.0", "kv_heads=1", "bias=False", "output_bias=False",
                  "scale_embedding=False"):
        assert shown in result.stdout
    checkpoint = str(out / "checkpoint.npz")
    refused = run("train", "lm", "--resume", checkpoint, "--steps", "3", "--norm", "layer",
                  "--kv-heads", "2", "--no-bias")
    assert_one_line_fails(refused, "--norm layer (checkpoint: rms)",
                          "--kv-heads 2 (checkpoint: 1)")
    assert "--no-bias" not in refused.stderr  # the checkpoint has no biases either
    generated = run("generate", "--checkpoint", checkpoint, "12+")
    assert generated.returncode == 0, generated.stderr
    assert generated.stdout.startswith("12+")

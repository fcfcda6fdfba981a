"""``minitrans train text``, end to end on a tiny run: the files it writes,
generate and evaluate with its model, --resume, and bad input refused in one
line with nothing written. In-process (``cli.main.main``): quick."""

import contextlib
import io

import numpy as np
import pytest

from minitrans.cli.main import main
from minitrans.training import experiment
from minitrans.training.run_files import checkpoint

TINY = ["--d-model", "16", "--heads", "2", "--layers", "1", "--no-progress"]
QUICK = ["--block-size", "16", "--batch-size", "4", "--warmup", "2", "--eval-windows", "8",
         "--workers", "1"]
WORDS = "the quick brown fox jumps over a lazy dog and runs home".split()


def write_text(path, lines=300, seed=0):
    rng = np.random.default_rng(seed)
    path.write_text("\n".join(" ".join(rng.choice(WORDS, size=6)) for _ in range(lines)) + "\n",
                    encoding="utf-8")
    return path


def run(capsys, *args):
    code = main([str(arg) for arg in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("text")
    data = write_text(folder / "input.txt")
    out = folder / "run"
    code = main(["train", "text", "--data", str(data), "--steps", "30", "--eval-every", "10",
                 "--out", str(out), *QUICK, *TINY])
    assert code == 0
    return folder, data, out


def test_a_short_run_writes_its_checkpoints_and_the_loss_falls(trained):
    _, _, out = trained
    assert {"checkpoint.npz", "best.npz", "train.npy", "valid.npy"} <= {p.name for p in
                                                                        out.iterdir()}
    _, records = checkpoint.load_checkpoint(out / "checkpoint.npz")
    losses = [evaluation["loss"] for evaluation in records["evaluations"]]
    assert len(losses) == 3 and losses[-1] < losses[0]


def test_the_first_line_says_which_model_was_chosen_and_why(tmp_path, capsys):
    data = write_text(tmp_path / "input.txt")
    code, out, err = run(capsys, "train", "text", "--data", data, "--steps", "2", "--out",
                         tmp_path / "run", *QUICK, "--no-progress")
    assert code == 0, err
    assert out.splitlines()[0].startswith("chosen for this text: d_model 64, layers 2, heads 4")
    assert "below 100,000" in out.splitlines()[0]


def test_generate_continues_a_prompt_from_best(trained, capsys):
    _, _, out = trained
    code, printed, err = run(capsys, "generate", "--checkpoint", out / "best.npz", "the q",
                             "--samples", "2", "--max-tokens", "8")
    assert code == 0 and err == "" and printed.startswith("the q")
    samples = printed.split("the q")[1:]  # each sample: the prompt, then its continuation
    assert len(samples) == 2 and all(len(sample) > 1 for sample in samples)


def test_evaluate_reports_nats_and_bits_per_character(trained, capsys):
    folder, data, out = trained
    code, printed, err = run(capsys, "evaluate", "--checkpoint", out / "best.npz", "--data", data)
    assert code == 0, err
    nats = float(printed.split("cross-entropy: ")[1].split()[0])
    bits = float(printed.split("bits per character: ")[1].split()[0])
    assert bits == pytest.approx(nats / np.log(2), abs=1e-3)
    assert "windows of 16 characters" in printed


def test_evaluate_refuses_a_text_with_unknown_characters(trained, capsys):
    folder, _, out = trained
    odd = folder / "odd.txt"
    odd.write_text("the quick brown fox é and Z and é again " * 3, encoding="utf-8")
    code, printed, err = run(capsys, "evaluate", "--checkpoint", out / "best.npz", "--data", odd)
    assert code == 1 and printed == "" and len(err.splitlines()) == 1
    assert "9 characters unknown to the model (2 distinct, such as 'é', 'Z')" in err


def test_resume_continues_with_the_same_batches(tmp_path, capsys):
    """A constant rate after warm-up (--min-lr = --lr), so that raising --steps
    on resume leaves the schedule alone: 10 + 10 steps repeat 20 in one go."""
    data = write_text(tmp_path / "input.txt")
    flat = ["--lr", "1e-3", "--min-lr", "1e-3", "--eval-every", "10", *QUICK, *TINY]
    assert main(["train", "text", "--data", str(data), "--steps", "20", "--out",
                 str(tmp_path / "whole"), *flat]) == 0
    assert main(["train", "text", "--data", str(data), "--steps", "10", "--out",
                 str(tmp_path / "cut"), *flat]) == 0
    capsys.readouterr()
    code, out, err = run(capsys, "train", "text", "--resume", tmp_path / "cut" / "checkpoint.npz",
                         "--steps", "20", "--no-progress")
    assert code == 0, err
    assert "resuming at step 10" in out and "changed: steps 10 -> 20" in out
    whole = checkpoint.load_checkpoint(tmp_path / "whole" / "checkpoint.npz")[1]["history"]
    resumed = checkpoint.load_checkpoint(tmp_path / "cut" / "checkpoint.npz")[1]["history"]
    assert resumed["loss"] == whole["loss"]


@pytest.mark.parametrize("make_args, code, fragment", [
    (lambda t: ["--data", t / "empty.txt"], 1, "empty"),
    (lambda t: ["--data", t / "one.txt"], 1, "single distinct character"),
    (lambda t: ["--data", t], 1, "is a directory"),
    (lambda t: ["--data", t / "input.txt", "--valid", t / "odd.txt"], 1, "lacks"),
    (lambda t: ["--data", t / "input.txt", "--block-size", "2000000"], 1, "at most 1048576"),
    (lambda t: ["--data", t / "input.txt", "--block-size", "20000"], 1, "expected at least"),
    (lambda t: ["--data", t / "input.txt", "--merges", "10"], 1,
     "--merges: byte-pair merges are learned at --level bpe alone"),
    (lambda t: ["--data", t / "input.txt", "--level", "word"], 1,
     "expected --level char or --level bpe"),
    (lambda t: ["--data", t / "input.txt", "--target", "0.5"], 1, "--target"),
    (lambda t: ["--data", t / "input.txt", "--steps", "10"], 1, "--warmup"),
    (lambda t: ["--data", t / "input.txt", "--heads", "3"], 1, "divisible"),
    (lambda t: ["--data", t / "input.txt", "--min-lr", "-1"], 2, "--min-lr"),
    (lambda t: [], 1, "--data"),
], ids=["empty", "one character", "directory", "unseen held-out", "block above positions",
        "block above the text", "merges at char", "word level", "paper flag",
        "warmup above steps", "bad heads", "bad flag value", "no data"])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, make_args, code, fragment):
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    (tmp_path / "one.txt").write_text("aaaa", encoding="utf-8")
    write_text(tmp_path / "input.txt", lines=40)
    (tmp_path / "odd.txt").write_text("é" * 40, encoding="utf-8")
    out = tmp_path / "runs" / "x"
    returned, printed, err = run(capsys, "train", "text", *make_args(tmp_path), "--out", out)
    assert returned == code and printed == "" and len(err.splitlines()) == 1, err
    assert fragment in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_the_text_tasks_own_flags_are_refused_elsewhere(capsys, tmp_path):
    code, printed, err = run(capsys, "train", "copy", "--min-lr", "1e-4", "--out", tmp_path / "r")
    assert code == 1 and "--min-lr: only used by the text task" in err


@pytest.mark.parametrize("prompt, fragment", [("the Zé", "2 characters unknown to the model"),
                                              ("", "prompt: empty")])
def test_generate_refuses_a_prompt_the_model_cannot_read(trained, capsys, prompt, fragment):
    """No <unk> was ever a target of a text model, nor an empty start: the lm's
    way (<bos>, then <unk> for what it lacks, and a warning) is refused."""
    _, _, out = trained
    code, printed, err = run(capsys, "generate", "--checkpoint", out / "best.npz", prompt)
    assert code == 1 and printed == "" and len(err.splitlines()) == 1 and fragment in err


@pytest.fixture(scope="module")
def trained_bpe(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bpe")
    data = write_text(folder / "input.txt")
    out = folder / "run"
    args = ["train", "text", "--data", str(data), "--level", "bpe", "--merges", "40", "--steps",
            "20", "--eval-every", "10", "--out", str(out), *QUICK, *TINY]
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        assert main(args) == 0
    return folder, data, out, printed.getvalue()


def test_a_bpe_run_says_its_level_and_merges_and_trains(trained_bpe):
    _, data, out, printed = trained_bpe
    described = next(line for line in printed.splitlines() if line.startswith("text at level"))
    assert described.startswith(f"text at level bpe: {len(data.read_text()):,} characters")
    assert "296 tokens (the 256 bytes and 40 merges learned from the whole text" in described
    _, records = checkpoint.load_checkpoint(out / "checkpoint.npz")
    assert records["task"]["level"] == "bpe" and len(records["byte_bpe"]["merges"]) == 40


def test_generate_at_bpe_encodes_the_prompt_and_decodes_text(trained_bpe, capsys):
    """A prompt of characters never seen in training is bytes all the same;
    the continuation prints as text, not as byte-level tokens, whose
    stand-ins for spaces, newlines and control bytes are U+0100 to U+0143
    (Ġ a space): a third of the tokens hold one."""
    _, _, out, _ = trained_bpe
    code, printed, err = run(capsys, "generate", "--checkpoint", out / "best.npz", "the Zé",
                             "--samples", "4", "--max-tokens", "12")
    assert code == 0 and err == "" and printed.count("the Zé") == 4
    assert not any(0x100 <= ord(c) <= 0x143 for c in printed) and "<bos>" not in printed


def test_evaluate_at_bpe_counts_bits_by_the_files_characters(trained_bpe, capsys):
    folder, data, out, _ = trained_bpe
    code, printed, err = run(capsys, "evaluate", "--checkpoint", out / "best.npz", "--data", data)
    assert code == 0, err
    text = data.read_text(encoding="utf-8")
    tokens = len(experiment.load_trained(out / "best.npz")[1].tokenizer.encode(text))
    assert f"{len(text):,} characters in {tokens:,} tokens of byte-level BPE" in printed
    nats = float(printed.split("cross-entropy: ")[1].split()[0])
    bits = float(printed.split("bits per character: ")[1].split()[0])
    assert bits == pytest.approx(nats / np.log(2) * tokens / len(text), abs=1e-3)
    assert "windows of 16 tokens" in printed


@pytest.mark.parametrize("flag, shown", [(["--merges", "41"], "--merges 41 (checkpoint: 40)"),
                                         (["--level", "char"], "--level char (checkpoint: bpe)")])
def test_resume_at_bpe_goes_on_and_refuses_another_level_or_merges(trained_bpe, capsys, flag,
                                                                   shown):
    _, _, out, _ = trained_bpe
    code, printed, err = run(capsys, "train", "text", "--resume", out / "checkpoint.npz",
                             "--steps", "30", *flag, "--no-progress")
    assert code == 1 and printed == "" and shown in err and len(err.splitlines()) == 1


def test_resume_at_bpe_goes_on_with_the_checkpoints_merges(trained_bpe, tmp_path, capsys):
    _, _, out, _ = trained_bpe
    code, printed, err = run(capsys, "train", "text", "--resume", out / "checkpoint.npz",
                             "--steps", "30", "--merges", "40", "--level", "bpe", "--out",
                             tmp_path / "resumed", "--no-progress")
    assert code == 0, err
    assert "resuming at step 20" in printed and "40 merges given, none learned" in printed


def test_attention_draws_a_character_model_and_refuses_a_bpe_one(trained, trained_bpe, capsys,
                                                               tmp_path):
    maps = tmp_path / "maps.png"
    code, out, err = run(capsys, "attention", "--checkpoint", trained[2] / "best.npz", "the",
                         "--out", maps)
    assert code == 0, err
    assert out.startswith("continuation: ") and list(tmp_path.glob("maps*.png"))
    code, _, err = run(capsys, "attention", "--checkpoint", trained_bpe[2] / "best.npz", "the",
                       "--out", tmp_path / "bpe.png")
    assert code == 1 and err.count("\n") == 1 and "byte-level BPE" in err

"""``minitrans train`` never overwrites a run: new runs
into free folders, --resume into --out with its flags checked, one trainer
per folder, divergence and Ctrl-C. Where a test guards against a failure
once seen, its docstring names that failure."""

import os
import signal
import subprocess
import sys

import pytest

from minitrans.training.run_files.checkpoint import load_checkpoint

TINY = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--no-progress"]


def run(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "minitrans", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def train(*args, cwd=None):
    return run("train", "copy", "--steps", "4", "--eval-every", "2", *TINY, *args, cwd=cwd)


def one_line_error(result, *fragments):
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def step_of(path):
    _, records = load_checkpoint(path)
    return records["step"]


@pytest.fixture(scope="module")
def earlier(tmp_path_factory):
    """A finished run at step 4 (batch size 16) and its checkpoint's bytes."""
    folder = tmp_path_factory.mktemp("earlier") / "run"
    result = train("--out", folder, "--batch-size", "16")
    assert result.returncode == 0, result.stderr
    return folder / "checkpoint.npz", (folder / "checkpoint.npz").read_bytes()


def test_a_new_run_goes_to_a_free_folder_and_says_so(tmp_path):
    """The old code trained the second run into runs/copy over the first."""
    assert train(cwd=tmp_path).returncode == 0
    first = (tmp_path / "runs" / "copy" / "checkpoint.npz").read_bytes()
    second = train(cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[0] == (
        f"{os.path.join('runs', 'copy')} holds another run; "
        f"this one writes into {os.path.join('runs', 'copy-2')}"
    )
    assert (tmp_path / "runs" / "copy" / "checkpoint.npz").read_bytes() == first
    assert step_of(tmp_path / "runs" / "copy-2" / "checkpoint.npz") == 4


def test_a_run_on_one_s_own_data_gets_a_folder_of_its_own(tmp_path):
    """The old code wrote --data runs into runs/translate, over the built-in
    translator."""
    (tmp_path / "numbers.tsv").write_text(
        "".join(f"a b {i}\tx {i} y\n" for i in range(30)), encoding="utf-8"
    )
    result = run(
        "train",
        "translate",
        "--data",
        "numbers.tsv",
        "--steps",
        "2",
        "--eval-every",
        "2",
        *TINY,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert os.listdir(tmp_path / "runs") == ["numbers"]
    assert step_of(tmp_path / "runs" / "numbers" / "checkpoint.npz") == 2


def test_an_out_that_holds_a_checkpoint_is_refused_unless_forced(earlier, tmp_path):
    """The old code replaced the checkpoint without a word."""
    path, saved = earlier
    one_line_error(
        train("--out", path.parent), f"--out {path.parent}", f"--resume {path}", "--force"
    )
    assert path.read_bytes() == saved
    forced = tmp_path / "forced"
    forced.mkdir()
    (forced / "checkpoint.npz").write_bytes(saved)
    result = train("--out", forced, "--force", "--steps", "2")
    assert result.returncode == 0, result.stderr
    assert step_of(forced / "checkpoint.npz") == 2


def test_resume_writes_into_out_and_leaves_the_checkpoint_it_resumed(earlier, tmp_path):
    """The old code ignored --out and overwrote the checkpoint it resumed."""
    path, saved = earlier
    result = train("--resume", path, "--steps", "6", "--out", tmp_path / "more")
    assert result.returncode == 0, result.stderr
    assert path.read_bytes() == saved
    assert step_of(tmp_path / "more" / "checkpoint.npz") == 6
    assert {"loss.png", "lr.png"} <= set(os.listdir(tmp_path / "more"))
    assert f"writing into {tmp_path / 'more'}" in result.stdout


def test_resume_writes_into_the_checkpoint_s_folder_not_the_one_it_records(earlier, tmp_path):
    """The old code wrote the plots into the folder recorded in the file
    (here one that has been moved away)."""
    path, saved = earlier
    moved = tmp_path / "moved"
    moved.mkdir()
    (moved / "checkpoint.npz").write_bytes(saved)
    result = train("--resume", moved / "checkpoint.npz", "--steps", "6", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert step_of(moved / "checkpoint.npz") == 6
    assert {"checkpoint.npz", "loss.png", "lr.png"} == set(os.listdir(moved))
    assert os.listdir(tmp_path) == ["moved"] and path.read_bytes() == saved
    _, records = load_checkpoint(moved / "checkpoint.npz")
    assert records["train_config"]["out_dir"] == str(moved)


def test_resume_refuses_every_flag_that_would_make_another_run_in_one_line(earlier, tmp_path):
    """The old code ignored them all and exited 0."""
    path, saved = earlier
    result = run(
        "train",
        "reverse",
        "--resume",
        path,
        "--steps",
        "6",
        *TINY,
        "--d-model",
        "32",
        "--seed",
        "3",
        "--warmup",
        "7",
        "--positions",
        "learned",
        "--activation",
        "gelu",
        "--d-k",
        "4",
        "--out",
        tmp_path / "other",
    )
    line = one_line_error(
        result,
        "task reverse (checkpoint: copy)",
        "--d-model 32 (checkpoint: 16)",
        "--seed 3 (checkpoint: 0)",
        "--warmup 7 (checkpoint: 100)",
        "--positions learned (checkpoint: sinusoidal)",
        "--activation gelu (checkpoint: relu)",
        "--d-k 4 (checkpoint: None)",
    )
    assert "--heads" not in line  # given, but the checkpoint's own value
    assert not (tmp_path / "other").exists() and path.read_bytes() == saved


def test_resume_honours_and_reports_what_may_change(earlier, tmp_path):
    """The old code took --steps only, silently."""
    path, _ = earlier
    result = train(
        "--resume",
        path,
        "--steps",
        "6",
        "--batch-size",
        "8",
        "--lr-factor",
        "0.5",
        "--target",
        "0.99",
        "--average-decay",
        "0.9",
        "--out",
        tmp_path / "more",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == (
        f"resuming at step 4 of {path}; changed: steps 4 -> 6, batch_size 16 -> 8, "
        f"lr_factor 0.2 -> 0.5, target_exact_match 1.0 -> 0.99, average_decay 0.0 -> 0.9 "
        f"(batches from here on differ from the original run's); writing into "
        f"{tmp_path / 'more'}"
    )
    arrays, records = load_checkpoint(tmp_path / "more" / "checkpoint.npz")
    config = records["train_config"]
    assert (config["steps"], config["batch_size"], config["lr_factor"]) == (6, 8, 0.5)
    assert config["average_decay"] == 0.9
    assert any(name.startswith("optim/weights/") for name in arrays)  # the weights, beside


@pytest.mark.parametrize("steps", ["4", "2"])
def test_resume_with_steps_not_above_the_checkpoint_s_is_an_error(earlier, steps):
    """The old code did nothing, said nothing and exited 0."""
    path, saved = earlier
    one_line_error(
        train("--resume", path, "--steps", steps),
        f"the checkpoint is at step 4; --steps {steps} is not above it: nothing to train",
    )
    assert path.read_bytes() == saved


def test_a_diverging_run_exits_with_an_error(tmp_path):
    """The old code trained on (the loss finite but enormous) and exited 0."""
    result = train(
        "--lr-factor", "10000", "--steps", "40", "--eval-every", "20", "--out", tmp_path / "run"
    )
    one_line_error(result, "diverged", "no checkpoint holds a good state of this run")
    assert not (tmp_path / "run" / "checkpoint.npz").exists()


def test_a_default_folder_inside_a_file_is_refused_before_training(tmp_path):
    """The old code trained, then failed with "[Errno 17] File exists"."""
    (tmp_path / "runs").write_text("notes", encoding="utf-8")
    result = train(cwd=tmp_path)
    one_line_error(result, f"the default folder {os.path.join('runs', 'copy')}: expected a "
                   "folder, runs is a file; choose a folder with --out")
    assert result.stdout == ""


def test_a_resumed_run_that_diverges_leaves_the_good_state_under_the_name_it_prints(tmp_path):
    """The failure guarded against: the diverged weights saved over
    checkpoint.npz, and that file then named "the last good checkpoint"."""
    folder = tmp_path / "run"
    assert train("--out", folder).returncode == 0
    good = (folder / "checkpoint.npz").read_bytes()
    result = train("--resume", folder / "checkpoint.npz", "--steps", "8", "--eval-every", "1",
                   "--lr-factor", "100000")
    one_line_error(result, "step 5: the weights diverged", "not saved",
                   f"the last good checkpoint is {folder / 'checkpoint.npz'}")
    assert (folder / "checkpoint.npz").read_bytes() == good
    assert train("--resume", folder / "checkpoint.npz", "--steps", "5").returncode == 0


def test_ctrl_c_saves_and_a_second_trainer_on_the_folder_is_refused(tmp_path):
    """The old code lost the steps since the last evaluation on Ctrl-C, and
    let a second trainer write into the same folder."""
    out = tmp_path / "run"
    first = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "minitrans",
            "train",
            "copy",
            "--steps",
            "100000",
            "--eval-every",
            "3",
            "--out",
            str(out),
            *TINY,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        for line in first.stdout:  # wait until it has trained and saved step 3
            if line.startswith("step 3:"):
                break
        second = train("--out", out, "--force")
        one_line_error(second, f"in use by another trainer (pid {first.pid}")
        first.send_signal(signal.SIGINT)
        _, stderr = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 130, stderr
    path = out / "checkpoint.npz"
    step = step_of(path)
    assert step >= 3
    assert stderr.strip().splitlines()[-1] == (
        f"interrupted at step {step}; saved {path}; resume with minitrans train copy "
        f"--resume {path}"
    )
    assert not (out / ".lock").exists()


def test_the_options_after_the_paper_reach_the_model(tmp_path):
    """--d-k, --positions and --activation build the model they name, and a
    resume keeps them."""
    out = tmp_path / "run"
    result = train("--out", out, "--heads", "4", "--d-k", "3", "--positions", "learned",
                   "--activation", "gelu")
    assert result.returncode == 0, result.stderr
    assert "d_k=3, positions='learned', activation='gelu'" in result.stdout
    config = load_checkpoint(out / "checkpoint.npz")[1]["model_config"]
    assert (config["d_k"], config["positions"], config["activation"]) == (3, "learned", "gelu")
    resumed = run("train", "copy", "--resume", out / "checkpoint.npz", "--steps", "6",
                  "--no-progress")
    assert resumed.returncode == 0, resumed.stderr


def test_a_corpus_trains_with_the_translate_task_only(tmp_path):
    """The old code trained `train copy --data FILE` as a corpus recorded under
    the task copy, which then had to be resumed as copy."""
    (tmp_path / "pairs.tsv").write_text("a b\tx\nc d\ty\n", encoding="utf-8")
    one_line_error(run("train", "copy", "--data", "pairs.tsv", "--steps", "2", *TINY,
                       cwd=tmp_path),
                   "--data", "minitrans train translate --data FILE", "got copy")
    assert not (tmp_path / "runs").exists()


def test_a_checkpoint_calling_the_corpus_tsv_resumes_and_translates(tmp_path):
    """A corpus run's checkpoint as older files name it ("tsv", and the
    command line's "translate" in train_config) resumes with `train translate
    --resume`, writing the one name, and translates."""
    import json

    import numpy as np

    (tmp_path / "numbers.tsv").write_text(
        "".join(f"a b {i}\tx {i} y\n" for i in range(30)), encoding="utf-8")
    first = run("train", "translate", "--data", "numbers.tsv", "--steps", "2", "--eval-every",
                "2", *TINY, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    with np.load(tmp_path / "runs" / "numbers" / "checkpoint.npz") as stored:
        entries = {key: stored[key] for key in stored.files}
    task, config = (json.loads(str(entries[f"json/{name}"])) for name in ("task", "train_config"))
    assert task["name"] == config["task"] == "corpus"
    entries["json/task"] = np.array(json.dumps({**task, "name": "tsv"}))
    entries["json/train_config"] = np.array(json.dumps({**config, "task": "translate"}))
    np.savez(tmp_path / "old.npz", **entries)
    resumed = run("train", "translate", "--resume", "old.npz", "--steps", "4", "--out", "more",
                  "--no-progress", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    records = load_checkpoint(tmp_path / "more" / "checkpoint.npz")[1]
    assert records["step"] == 4 and records["task"]["name"] == records["train_config"]["task"]
    assert records["task"]["name"] == "corpus"
    translated = run("translate", "--checkpoint", "old.npz", "a b 3", cwd=tmp_path)
    assert translated.returncode == 0 and len(translated.stdout.splitlines()) == 1, translated

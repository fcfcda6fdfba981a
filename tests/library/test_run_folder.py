"""One trainer per folder, stale locks, the choice of a new run's folder,
Ctrl-C and a diverging loss inside the trainer."""

import dataclasses
import errno
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from minitrans.training import experiment
from minitrans.training.run_files import run_folder
from minitrans.training.run_files.checkpoint import load_checkpoint
from minitrans.training.optimisation.divergence import divergence, held_out_divergence
from minitrans.training.run_files.interrupt import TrainingInterrupted
from minitrans.training.run_files.run_folder import FolderInUseError, RunLock
from minitrans.training.trainer import TrainingError
from tests.conftest import tiny_trainer


def _dead_pid():
    """The pid of a process that has exited (and been reaped)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _write_lock(folder, **record):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".lock").write_text(json.dumps(record), encoding="utf-8")


# ------------------------------------------------------------ the lock


def test_a_second_lock_on_a_folder_is_refused_naming_the_holder(tmp_path):
    with RunLock(tmp_path, log=None):
        holder = json.loads((tmp_path / ".lock").read_text())
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        with pytest.raises(
            FolderInUseError, match=rf"in use by another trainer \(pid {os.getpid()}"
        ):
            with RunLock(tmp_path, log=None):
                pass
    assert not (tmp_path / ".lock").exists()  # released
    with RunLock(tmp_path, log=None):
        pass


def test_a_lock_left_by_a_killed_run_is_stale_removed_and_said(tmp_path):
    pid = _dead_pid()
    _write_lock(tmp_path, pid=pid, host=socket.gethostname(), started="yesterday")
    messages = []
    with RunLock(tmp_path, log=messages.append):
        assert json.loads((tmp_path / ".lock").read_text())["pid"] == os.getpid()
    assert len(messages) == 1 and "stale" in messages[0] and str(pid) in messages[0]
    assert run_folder.lock_holder(tmp_path) is None


def test_a_lock_of_another_host_cannot_be_checked_and_is_respected(tmp_path):
    _write_lock(tmp_path, pid=_dead_pid(), host="elsewhere.invalid", started="now")
    with pytest.raises(FolderInUseError, match=r"elsewhere\.invalid.*remove .*\.lock"):
        with RunLock(tmp_path, log=None):
            pass


def test_an_unreadable_lock_is_respected_while_young_and_stale_once_old(tmp_path):
    (tmp_path / ".lock").write_text("")  # a trainer between creating and writing it
    with pytest.raises(FolderInUseError):
        with RunLock(tmp_path, log=None):
            pass
    old = time.time() - 2 * run_folder.UNREADABLE_LOCK_AGE
    os.utime(tmp_path / ".lock", (old, old))  # ... or one killed right then
    messages = []
    with RunLock(tmp_path, log=messages.append):
        pass
    assert "unreadable" in messages[0]


def test_a_trainer_refuses_a_folder_another_trainer_holds(tmp_path):
    """The old code had no lock: both trainers ran, and the later writer's
    checkpoint silently won."""
    trainer = tiny_trainer(tmp_path)
    with RunLock(tmp_path, log=None):  # another trainer of this process holds the folder
        with pytest.raises(FolderInUseError, match=str(os.getpid())):
            trainer.fit()
    assert trainer.step == 0 and not (tmp_path / "checkpoint.npz").exists()
    trainer.fit()  # once it is free
    assert trainer.step == 6 and not (tmp_path / ".lock").exists()


# ------------------------------------------------------------ the folder


def test_a_new_run_s_default_folder_skips_folders_that_hold_a_run(tmp_path):
    base = tmp_path / "runs" / "copy"
    assert run_folder.free_folder(str(base)) == str(base)
    base.mkdir(parents=True)
    (base / ".tmp-half.npz").write_bytes(b"")  # an unfinished save is no checkpoint
    assert run_folder.free_folder(str(base)) == str(base)
    (base / "best.npz").write_bytes(b"")  # any checkpoint counts
    assert run_folder.free_folder(str(base)) == f"{base}-2"
    _write_lock(tmp_path / "runs" / "copy-2", pid=os.getpid(), host=socket.gethostname())
    assert run_folder.free_folder(str(base)) == f"{base}-3"  # a trainer works in copy-2
    assert run_folder.default_folder("translate", "data/numbers.tsv") == os.path.join(
        "runs", "numbers"
    )
    assert run_folder.default_folder("copy") == os.path.join("runs", "copy")


def test_a_named_folder_with_a_checkpoint_is_refused_unless_forced(tmp_path):
    (tmp_path / "checkpoint.npz").write_bytes(b"")
    with pytest.raises(ValueError, match=r"--resume .*checkpoint.npz.*another --out.*--force"):
        run_folder.check_new_run(str(tmp_path))
    run_folder.check_new_run(str(tmp_path), force=True)
    run_folder.check_resume_into(str(tmp_path), str(tmp_path / "checkpoint.npz"))  # its own
    (tmp_path / "best.npz").write_bytes(b"")
    run_folder.check_resume_into(str(tmp_path), str(tmp_path / "best.npz"), force=True)
    with pytest.raises(ValueError, match="checkpoint.npz of an earlier run"):  # would replace it
        run_folder.check_resume_into(str(tmp_path), str(tmp_path / "best.npz"))


# ------------------------------------------------------------ Ctrl-C


def test_ctrl_c_saves_the_last_completed_step_and_restores_the_handler(tmp_path):
    """The old code lost every step since the last evaluation."""
    before = signal.getsignal(signal.SIGINT)

    def log(message):  # Ctrl-C while step 3 is being evaluated
        if message.startswith("step 3: held-out"):
            os.kill(os.getpid(), signal.SIGINT)

    trainer = tiny_trainer(tmp_path, log=log, steps=100, eval_every=3)
    with pytest.raises(TrainingInterrupted) as info:
        trainer.fit()
    assert info.value.step == trainer.step == 3
    assert info.value.checkpoint == trainer.checkpoint_path
    _, records = load_checkpoint(trainer.checkpoint_path)
    assert records["step"] == 3 and len(records["history"]["loss"]) == 3
    assert signal.getsignal(signal.SIGINT) is before
    assert not (tmp_path / ".lock").exists()


# ------------------------------------------------------------ divergence


def test_the_divergence_rule():
    assert divergence([], 3.0) is None  # step 1: nothing to compare with
    assert divergence([3.0, 2.9, 2.5] + [0.5] * 40, 0.5) is None  # learning
    assert divergence([3.0] * 9, 30.0) is None  # one bad batch: a mean of 5.7, not above 12
    assert divergence([3.0], 22.0) is not None  # thrown off by the first update
    message = divergence([3.0] * 20, 1e15)  # finite, but far off
    assert "diverged" in message and "1e+14" in message and "3" in message


def test_the_held_out_divergence_rule():
    assert held_out_divergence([], 1e9) is None  # no step 1 to compare with
    assert held_out_divergence([3.0, 2.0], 0.4) is None  # learning
    assert held_out_divergence([3.0, 2.0], 11.9) is None  # over-fitted, not diverged
    message = held_out_divergence([3.0, 2.0], 1.6e7)
    assert "diverged" in message and "1.6e+07" in message and "step 1, 3" in message
    assert "nan" in held_out_divergence([3.0], math.nan)


def test_a_resumed_run_that_diverges_at_once_keeps_the_last_good_checkpoint(tmp_path):
    """The failure guarded against: resuming a healthy step-20 run at 1e5
    times the learning rate saved the diverged step-21 weights (held-out loss
    1.6e7) over checkpoint.npz and called it the last good checkpoint."""
    trainer = tiny_trainer(tmp_path, steps=20, eval_every=10)
    trainer.fit()
    saved = {name: (tmp_path / name).read_bytes() for name in ("checkpoint.npz", "best.npz")}
    resumed = experiment.resume_trainer(tmp_path / "checkpoint.npz", steps=30)
    resumed.config = dataclasses.replace(resumed.config, lr_factor=1e5, eval_every=1)
    with pytest.raises(TrainingError) as error:
        resumed.fit()
    message = str(error.value)
    assert "step 21: the weights diverged" in message and "not saved" in message
    assert message.endswith(f"the last good checkpoint is {tmp_path / 'checkpoint.npz'}")
    for name, content in saved.items():
        assert (tmp_path / name).read_bytes() == content, name
    assert experiment.read_run(tmp_path / "checkpoint.npz").step == 20  # loadable, step 20's


def test_a_fresh_run_that_diverges_at_once_saves_nothing_and_says_so(tmp_path):
    """The failure guarded against: a fresh run that diverged at once saved its
    step-1 weights (held-out loss 4.4e9) as checkpoint.npz and best.npz, and
    called them good."""
    trainer = tiny_trainer(tmp_path, steps=5, eval_every=1, lr_factor=1e5)
    with pytest.raises(TrainingError, match="step 1: the weights diverged.*no checkpoint holds "
                       "a good state of this run"):
        trainer.fit()
    assert not list(tmp_path.glob("*.npz"))


def test_a_full_disk_names_the_file_and_the_last_good_checkpoint(tmp_path, monkeypatch):
    """The failure guarded against: a full disk printed "[Errno 28] No space left on device",
    naming neither the file nor the last good checkpoint."""
    trainer = tiny_trainer(tmp_path, steps=6, eval_every=3)
    trainer.fit(steps=3)
    saved = (tmp_path / "checkpoint.npz").read_bytes()

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(np, "savez", full_disk)
    with pytest.raises(TrainingError) as error:
        trainer.fit(steps=6)
    checkpoint = tmp_path / "checkpoint.npz"
    assert str(error.value) == (f"step 6: could not write {checkpoint}: No space left on "
                                f"device; training stopped, the last good checkpoint is "
                                f"{checkpoint}")
    assert checkpoint.read_bytes() == saved
    assert sorted(path.name for path in tmp_path.iterdir() if path.name != ".lock") == [
        "best.npz", "checkpoint.npz"]  # no temporary file left


def test_a_finite_diverging_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path):
    """The old code trained on (a loss of 1e5, finite) and saved the
    diverged weights."""
    trainer = tiny_trainer(tmp_path, steps=30, eval_every=10)
    trainer.fit(steps=20)
    saved = (tmp_path / "checkpoint.npz").read_bytes()
    trainer.config = dataclasses.replace(trainer.config, lr_factor=1e4)  # far too large
    with pytest.raises(TrainingError, match=r"diverged.*last good checkpoint is .*checkpoint.npz"):
        trainer.fit(steps=30)
    assert 20 < trainer.step < 30
    assert all(math.isfinite(loss) for loss in trainer.history["loss"])
    assert (tmp_path / "checkpoint.npz").read_bytes() == saved  # step 20's, not the diverged

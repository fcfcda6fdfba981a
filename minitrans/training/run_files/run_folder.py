"""Where a run writes, and one trainer per folder.

A run's folder holds its checkpoints (``checkpoint.npz``, and any other
``*.npz``), its plots and, while a trainer works in it, a lock file.

* Choosing the folder is the command line's policy: a new run never lands
  in a folder that holds a checkpoint. The default folder (``runs/TASK``,
  or ``runs/<stem of the data file>``) moves on to the next free numbered
  one (``runs/copy-2``, ``runs/copy-3``...); a folder the user named is
  refused unless they say ``--force``.
* The lock is the trainer's: ``Trainer.fit`` holds ``<folder>/.lock`` while
  it trains, so a second trainer on the same folder is refused instead of
  silently replacing the first one's checkpoints. The lock is created with
  ``O_CREAT | O_EXCL`` (only one process can create it) and holds JSON
  ``{"pid", "host", "started"}``. A lock whose process is gone (this host,
  ``os.kill(pid, 0)`` finds no such process) was left by a killed run: it
  is stale, removed with a one-line notice, and training goes on.
"""

import json
import os
import socket
import time

from minitrans.core import checks
from minitrans.files.rules import TEMP_PREFIX

LOCK_NAME = ".lock"
# A trainer writes its lock's content right after creating the file, so a
# lock that cannot be read is either being written this instant or was left
# by a process killed between the two calls. Younger than this it is
# respected (a trainer is starting); older it is stale. A minute is far
# longer than a write of a few bytes and short enough not to block anyone.
UNREADABLE_LOCK_AGE = 60.0


class FolderInUseError(RuntimeError):
    """Another trainer holds the folder's lock."""


# ------------------------------------------------------------ the folder


def default_folder(task, data=None):
    """``runs/TASK``, or for a TSV corpus ``runs/<its file name without
    extension>`` (``numbers.tsv`` -> ``runs/numbers``), so that a run on
    one's own data never lands on the built-in task's run."""
    stem = os.path.splitext(os.path.basename(os.fspath(data)))[0] if data else ""
    return os.path.join("runs", stem or task)


def checkpoints_in(folder):
    """The checkpoint files (``*.npz``) in ``folder``: ``checkpoint.npz``
    (a run's last step, the one to resume) first, then the others sorted;
    the temporary files of an unfinished save do not count."""
    if not os.path.isdir(folder):
        return []
    names = [name for name in os.listdir(folder)
             if name.endswith(".npz") and not name.startswith(TEMP_PREFIX)]
    names.sort(key=lambda name: (name != "checkpoint.npz", name))
    return [os.path.join(folder, name) for name in names]


def free_folder(folder):
    """``folder`` if no run uses it (no checkpoint, no live lock), else the
    first of ``folder-2``, ``folder-3``... that is free."""
    candidate, number = folder, 1
    while checkpoints_in(candidate) or lock_holder(candidate) is not None:
        number += 1
        candidate = f"{folder}-{number}"
    return candidate


def check_new_run(folder, force=False):
    """Refuse to start a run in ``folder`` when it is not a folder, while
    another trainer works there, or, unless ``force``, when it holds a
    checkpoint of an earlier run."""
    check_is_folder(folder)
    check_not_in_use(folder)
    found = checkpoints_in(folder)
    if found and not force:
        raise ValueError(refusal(folder, found[0]))


def check_resume_into(folder, resumed, force=False):
    """Refuse to continue the run of the checkpoint ``resumed`` in ``folder``
    when it is not a folder, while another trainer works there, or, unless
    ``force``, when that would replace a checkpoint of another run: in the
    folder of ``resumed``, a ``checkpoint.npz`` that is not ``resumed``
    itself; in another folder, any checkpoint."""
    check_is_folder(folder)
    check_not_in_use(folder)
    if force:
        return
    same_folder = os.path.realpath(folder) == os.path.realpath(os.path.dirname(resumed) or ".")
    found = checkpoints_in(folder)
    if same_folder:
        own = os.path.join(folder, "checkpoint.npz")
        found = [own] if own in found and not os.path.samefile(own, resumed) else []
    if found:
        raise ValueError(refusal(folder, found[0]))


def check_is_folder(folder, named="--out"):
    """Refuse a ``folder`` that is a file, or lies inside one ("notes.txt/run"),
    before anything is built: the trainer would fail to create it only once
    the data and the model are ready, with "[Errno 17] File exists" (or
    "[Errno 20] Not a directory"). ``named``: how the message names it
    ("--out", or "the default folder")."""
    existing = os.path.normpath(folder)
    while existing not in ("", ".", os.sep) and not os.path.lexists(existing):
        existing = os.path.dirname(existing)  # the nearest part of the path that exists
    if os.path.lexists(existing) and not os.path.isdir(existing):
        kind = "a file" if os.path.isfile(existing) else "not a folder"
        raise ValueError(f"{named} {folder}: expected a folder, {existing} is {kind}"
                         + ("" if named == "--out" else "; choose a folder with --out"))


def check_not_in_use(folder):
    holder = lock_holder(folder)
    if holder is not None:
        raise FolderInUseError(in_use_message(folder, holder))


def refusal(folder, found):
    return (
        f"--out {folder}: holds the checkpoint {found} of an earlier run; continue it "
        f"with --resume {found}, choose another --out, or add --force to replace it"
    )


# ------------------------------------------------------------ the lock


def lock_path(folder):
    return os.path.join(folder, LOCK_NAME)


def read_lock(path):
    """The lock's ``{"pid", "host", "started"}``, or None when the file is
    empty or not such a record (being written, or left half written)."""
    try:
        with open(path, encoding="utf-8") as handle:
            holder = json.loads(handle.read(4096))
    except (OSError, ValueError):
        return None
    if not (
        isinstance(holder, dict)
        and checks.is_int(holder.get("pid"), low=1)
        and isinstance(holder.get("host"), str)
    ):
        return None
    return holder


def is_stale(path, holder):
    """Why the lock at ``path`` no longer guards a run (a sentence), or None
    while its trainer may still be working. A trainer on another host cannot
    be checked from here: its lock is respected."""
    if holder is None:
        try:
            age = time.time() - os.stat(path).st_mtime
        except FileNotFoundError:
            return "it is gone"
        if age > UNREADABLE_LOCK_AGE:
            return f"unreadable and {age:.0f} s old"
        return None
    if holder["host"] != socket.gethostname():
        return None
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return f"process {holder['pid']} is no longer running"
    except PermissionError:  # alive, but another user's
        return None
    return None


def lock_holder(folder):
    """The record of the trainer that holds ``folder``'s lock, or None when
    there is no lock or it is stale (an unreadable young lock counts as
    held: a trainer is writing it)."""
    path = lock_path(folder)
    if not os.path.exists(path):
        return None
    holder = read_lock(path)
    if is_stale(path, holder) is not None:
        return None
    return holder or {"pid": "?", "host": "?", "started": "just now"}


def in_use_message(folder, holder):
    return (
        f"{folder} is in use by another trainer (pid {holder['pid']} on {holder['host']}, "
        f"started {holder.get('started', '?')}); wait for it to finish or train into another "
        f"folder (if that run is over, remove {lock_path(folder)})"
    )


class RunLock:
    """``with RunLock(folder, log):`` holds ``folder``'s lock for the block.

    Raises FolderInUseError when another trainer holds it; removes a stale
    lock, saying so through ``log``. Two trainers that find the same stale
    lock at the same instant could both remove it and start: only a lock
    left by a killed run opens that window, and only for a moment.
    """

    def __init__(self, folder, log=print):
        self.folder, self.log = folder, log
        self.path = lock_path(folder)
        self.record = None

    def __enter__(self):
        os.makedirs(self.folder, exist_ok=True)
        record = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        for _ in range(3):  # a stale lock removed, then try again
            try:
                descriptor = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = read_lock(self.path)
                reason = is_stale(self.path, holder)
                if reason is None:
                    raise FolderInUseError(
                        in_use_message(
                            self.folder, holder or {"pid": "?", "host": "?", "started": "just now"}
                        )
                    ) from None
                self.log(f"removed the stale lock {self.path} ({reason})")
                try:
                    os.remove(self.path)
                except FileNotFoundError:
                    pass
                continue
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                json.dump(record, handle)
            self.record = record
            return self
        raise FolderInUseError(f"{self.folder}: could not take the lock {self.path}")

    def __exit__(self, *exception):
        """Remove the lock, if it is still this run's."""
        if self.record is not None and read_lock(self.path) == self.record:
            os.remove(self.path)
        self.record = None
        return False

"""Running one section of the device check: a command with a time limit.

Every section of the device check (``check.py``) is a child process, so that a section
that hangs (a GPU kernel that never returns, a test stuck in C code) can be
stopped and the check goes on to the next. The child leads a process group,
so that its own children (vs_pytorch's workers) stop with it.
"""

import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GRACE_SECONDS = 5  # from the first signal to SIGKILL, for a section past its limit


@dataclasses.dataclass
class Outcome:
    """What a command did: its exit status (None when it was stopped at its
    limit), wall time, and its standard output and error."""

    command: list
    returncode: int
    seconds: float
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def output(self):
        """stdout, then stderr, as one text."""
        parts = [self.stdout.rstrip("\n"), self.stderr.rstrip("\n")]
        return "\n".join(part for part in parts if part)


def python_command(*arguments):
    """A command that runs this Python with ``arguments``."""
    return [sys.executable, *arguments]


def child_env(extra=None):
    """This process's environment, with the repository first on PYTHONPATH
    (a plain checkout, not installed) and unbuffered output (so that a
    child stopped at its limit has written what it did)."""
    env = dict(os.environ)
    paths = [REPO] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env.update(PYTHONPATH=os.pathsep.join(paths), PYTHONUNBUFFERED="1")
    env.update(extra or {})
    return env


def run_command(command, limit, env=None, stop=signal.SIGTERM):
    """Run ``command`` in the repository for at most ``limit`` seconds, then
    send ``stop`` to its process group (SIGTERM ends Python quietly; pytest
    answers SIGINT with a summary of the tests that ran).

    Its output goes to temporary files, not pipes, so that a child that
    writes a lot never blocks on a full pipe. The child leads a process
    group of its own (in the check's own Unix session, so that whoever stops the check
    stops it too); if this process is interrupted while it waits, the group
    is stopped before the interruption goes on. Returns an Outcome."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=REPO, env=env or child_env(), stdout=out,
                                   stderr=err, stdin=subprocess.DEVNULL, text=True,
                                   **_own_process_group())
        try:
            timed_out = not _wait(process, limit)
        except BaseException:
            _stop_group(process, stop)
            raise
        if timed_out:
            _stop_group(process, stop)
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        return Outcome(list(command), None if timed_out else process.returncode, seconds,
                       out.read(), err.read(), timed_out)


def _own_process_group():
    """Popen's argument that makes the child lead a process group of its own
    (``process_group`` is new in Python 3.11; before, setpgrp in the child)."""
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"preexec_fn": os.setpgrp}


def _wait(process, limit):
    """True when ``process`` ended within ``limit`` seconds."""
    try:
        process.wait(timeout=max(limit, 0.1))
    except subprocess.TimeoutExpired:
        return False
    return True


def _stop_group(process, stop):
    """``stop`` to the child's process group, SIGKILL if it has not ended
    GRACE_SECONDS later, and SIGKILL again for any grandchild that outlived
    it."""
    _signal_group(process.pid, stop)
    if not _wait(process, GRACE_SECONDS):
        _signal_group(process.pid, signal.SIGKILL)
        process.wait()
    _signal_group(process.pid, signal.SIGKILL)


def _signal_group(group, signum):
    try:
        os.killpg(group, signum)
    except (ProcessLookupError, PermissionError):  # the group has ended
        pass


def tail(text, lines=60):
    """The last ``lines`` lines of ``text``, saying how many came before."""
    rows = text.rstrip("\n").splitlines()
    if len(rows) <= lines:
        return "\n".join(rows)
    return "\n".join([f"[... {len(rows) - lines} earlier lines ...]"] + rows[-lines:])

"""Ctrl-C during training: finish the step, save, then stop.

Python turns SIGINT into a KeyboardInterrupt wherever the main thread is,
perhaps halfway through Adam's update of the parameters, and a checkpoint
saved then would mix two steps. While ``deferred_sigint()`` is active the
first SIGINT only sets a flag, which the training loop reads between steps
(after the optimizer's update, the end of a step): it saves the checkpoint
of the last completed step and raises ``TrainingInterrupted``. A second
SIGINT raises KeyboardInterrupt at once, for a user who will not wait.
"""

import contextlib
import signal
import threading


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped by Ctrl-C after ``step``, saved in ``checkpoint``."""

    def __init__(self, step, checkpoint):
        super().__init__(f"interrupted at step {step}; saved {checkpoint}")
        self.step, self.checkpoint = step, checkpoint


class Flag:
    requested = False


@contextlib.contextmanager
def deferred_sigint():
    """Within the block, the first SIGINT sets ``flag.requested`` (the
    yielded flag) instead of raising. Signal handlers can be installed only
    in the main thread; elsewhere the flag is never set and Ctrl-C reaches
    the main thread as usual. The previous handler is restored on leaving."""
    flag = Flag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum, frame):
        if flag.requested:  # the second Ctrl-C: stop now
            raise KeyboardInterrupt
        flag.requested = True

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)

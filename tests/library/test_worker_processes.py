"""Worker processes: a batch's shards computed in forked processes give the
numbers of worker threads, bit for bit, follow whatever the trainer changes,
hand their errors back, and end with the object that made them."""

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import minitrans
from minitrans.layers.dropout import Dropout
from minitrans.layers.loss import LabelSmoothedCrossEntropy
from minitrans.training.optimisation import worker_processes
from minitrans.training.optimisation.parallel import DataParallel
from minitrans.training.optimisation.worker_processes import WorkerLost, WorkerProcess
from tests.library.test_parallel import VOCAB, make_batch, make_model

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="worker processes are made by fork() on Linux only")


@pytest.fixture(autouse=True)
def numpy_float32():
    with minitrans.using("numpy", dtype="float32"):
        yield


def new_parallel(processes, workers=2, dropout=0.3, decoder_only=False):
    model = make_model(dropout=dropout, decoder_only=decoder_only)
    return DataParallel(model, LabelSmoothedCrossEntropy(0.1, pad_id=0), workers=workers,
                        processes=processes)


def train(parallel, steps, inputs, targets, first_step=1):
    """A trainer's steps, with a plain SGD update between them (so that the
    parameters change in place): [(loss, [gradient, ...]) per step]."""
    model, results = parallel.model, []
    for step in range(first_step, first_step + steps):
        for module in parallel.modules():
            if isinstance(module, Dropout):
                module.reset_rng(step)
        model.zero_grad()
        loss = float(parallel.forward_backward(inputs, targets))
        grads = [grad.copy() for _, _, grad in model.named_parameters()]
        results.append((loss, grads))
        for _, param, grad in model.named_parameters():
            param -= 0.1 * grad
    return results


def alive(pid):
    """Whether process ``pid`` runs: it exists and has not ended (an ended
    process that nobody has waited for yet is a zombie, state Z)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def assert_same(ours, theirs):
    for (loss, grads), (expected_loss, expected_grads) in zip(ours, theirs, strict=True):
        assert loss == expected_loss
        for grad, expected in zip(grads, expected_grads, strict=True):
            np.testing.assert_array_equal(grad, expected)


@pytest.mark.parametrize("workers,decoder_only", [(2, False), (3, True), (8, False)])
def test_processes_give_the_numbers_of_threads_bit_for_bit(workers, decoder_only):
    """With dropout, over steps that change the parameters in place; 8
    workers on a batch of 5 run 5 shards."""
    inputs, targets = make_batch()
    if decoder_only:
        inputs = inputs[1:]
    runs = []
    for processes in (True, False):
        parallel = new_parallel(processes, workers, decoder_only=decoder_only)
        assert (parallel._processes is not None) == processes
        runs.append(train(parallel, 3, inputs, targets))
    assert_same(*runs)


def test_the_parameters_live_in_shared_memory_and_references_follow_them():
    """Made with processes, a DataParallel moves the model's parameters into
    shared memory; a weight taken from its layer afterwards keeps following
    the training (the workers read the same memory)."""
    inputs, targets = make_batch()
    parallel = new_parallel(True)
    weight = parallel.model.decoder.layers[0].self_attn.W_Q.params["W"]
    before = weight.copy()
    train(parallel, 1, inputs, targets)
    assert weight is parallel.model.decoder.layers[0].self_attn.W_Q.params["W"]
    assert not np.array_equal(weight, before)  # the update wrote into it
    pool = parallel._processes
    assert all(holder[key] is view for holder, key, view, _ in pool.parameters.slots)


def test_the_comparison_fails_when_a_worker_misses_the_dropout_streams(monkeypatch):
    """The check above can fail: a worker that kept the masks of the step it
    was forked at draws other masks from the second step on."""
    inputs, targets = make_batch()
    expected = train(new_parallel(False), 2, inputs, targets)
    start = WorkerProcess.start

    def start_with_stale_streams(self, *args):
        dropouts = self.dropouts
        self.dropouts = []  # nothing sent: the worker keeps its own streams
        try:
            start(self, *args)
        finally:
            self.dropouts = dropouts

    monkeypatch.setattr(WorkerProcess, "start", start_with_stale_streams)
    stale = train(new_parallel(True), 2, inputs, targets)
    assert stale[0][0] == expected[0][0]  # the first step's streams are the fork's
    with pytest.raises(AssertionError):
        assert_same(stale, expected)


def test_a_workers_error_is_raised_in_the_trainer_and_the_next_step_is_exact():
    inputs, targets = make_batch()
    expected = train(new_parallel(False), 2, inputs, targets)
    parallel = new_parallel(True)
    bad = targets.copy()
    bad[-1, 0] = VOCAB + 5  # in the worker's shard only
    model = parallel.model
    with pytest.raises(ValueError, match="targets"):
        parallel.forward_backward(inputs, bad)
    model.zero_grad()
    assert_same(train(parallel, 2, inputs, targets), expected)


def test_an_interrupted_wait_stops_the_workers_and_the_next_step_is_exact(monkeypatch):
    """Ctrl-C while a worker computes: its answer would wait in the pipe and
    be read as the next step's, so every worker is stopped, and the next
    step forks new ones."""
    inputs, targets = make_batch()
    expected = train(new_parallel(False), 2, inputs, targets)
    parallel = new_parallel(True)
    train(parallel, 1, inputs, targets)  # the workers are running
    first = [worker.pid for worker in parallel._processes.workers]
    result = WorkerProcess.result

    def interrupted(self):
        monkeypatch.setattr(WorkerProcess, "result", result)
        raise KeyboardInterrupt

    monkeypatch.setattr(WorkerProcess, "result", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train(parallel, 1, inputs, targets)
    assert parallel._processes.workers == []
    assert not any(alive(pid) for pid in first)
    assert_same(train(parallel, 1, inputs, targets, first_step=2), expected[1:])


def test_a_worker_killed_between_steps_is_named_and_replaced():
    """A worker the system killed (out of memory, say) fails the step with
    a message that says so; the next step forks a new one."""
    inputs, targets = make_batch()
    expected = train(new_parallel(False), 2, inputs, targets)
    parallel = new_parallel(True)
    assert_same(train(parallel, 1, inputs, targets), expected[:1])
    victim = parallel._processes.workers[0].pid
    os.kill(victim, signal.SIGKILL)
    with pytest.raises(WorkerLost, match=f"worker process {victim} .*ended without an answer"):
        train(parallel, 1, inputs, targets, first_step=2)
    assert parallel._processes.workers == [] and not alive(victim)
    assert_same(train(parallel, 1, inputs, targets, first_step=2), expected[1:])


def test_workers_follow_replaced_parameters_and_a_new_dtype():
    """A checkpoint load replaces the parameter arrays; a new dtype changes
    them, and the gradients, and what the backend computes in. Each time
    the next step gives the threads' numbers."""
    inputs, targets = make_batch()
    runs = []
    for processes in (True, False):
        parallel = new_parallel(processes)
        results = train(parallel, 1, inputs, targets)
        for module in parallel.model.modules():
            module.params.update({name: value * 0.5 for name, value in module.params.items()})
        results += train(parallel, 1, inputs, targets, first_step=2)
        with minitrans.using("numpy", dtype="float64"):
            parallel.model.astype("float64")
            results += train(parallel, 1, inputs, targets, first_step=3)
        runs.append(results)
    assert runs[0][2][1][0].dtype == np.float64
    assert_same(*runs)


def test_the_workers_end_with_the_object_that_made_them():
    inputs, targets = make_batch()
    parallel = new_parallel(True, workers=3)
    train(parallel, 1, inputs, targets)
    pids = [worker.pid for worker in parallel._processes.workers]
    assert len(pids) == 2
    del parallel
    gc.collect()
    assert not any(alive(pid) for pid in pids)


def test_a_trainer_killed_outright_leaves_no_worker_behind(tmp_path):
    """Its workers notice that their parent is gone within a second or two."""
    script = textwrap.dedent("""
        import os, signal, minitrans
        from tests.library.test_worker_processes import make_batch, new_parallel, train
        with minitrans.using("numpy", dtype="float32"):
            parallel = new_parallel(True)
            inputs, targets = make_batch()
            train(parallel, 1, inputs, targets)
            print(parallel._processes.workers[0].pid, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": root})
    pid = int(done.stdout.split()[0])
    deadline = time.monotonic() + 10 * worker_processes.PARENT_CHECK_S
    while time.monotonic() < deadline:
        if not alive(pid):
            return
        time.sleep(0.1)
    os.kill(pid, 9)
    pytest.fail(f"worker {pid} outlived its trainer")


def test_processes_where_they_cannot_run_are_refused(monkeypatch):
    monkeypatch.setattr(worker_processes.sys, "platform", "darwin")
    with pytest.raises(ValueError, match="processes: expected False or None here.*got True"):
        new_parallel(True)
    assert new_parallel(None)._processes is None  # threads, by default, off Linux
    assert new_parallel(True, workers=1).workers == 1  # one worker needs neither

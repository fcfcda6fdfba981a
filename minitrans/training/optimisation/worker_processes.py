"""Data-parallel workers in processes of their own, where threads would wait
for each other (``parallel.DataParallel`` on Linux).

Why processes: Python runs the Python code of one thread at a time (its
global interpreter lock, the GIL). NumPy lets go of the lock inside each
operation, so two worker threads do compute at once, but every operation
begins and ends in Python, and a thread whose operation ends while the
other holds the lock sleeps until it is handed over. A small model's shard
is a thousand short operations: on two cores the hand-overs cost about a
fifth of the step (``benchmarks/text_lm.py`` times both). A process has an
interpreter, and a lock, of its own: PyTorch's DistributedDataParallel
runs one process per device for the same reason.

A worker process is a copy of the trainer's process, made by fork() at the
first step: the replica it runs is the one the trainer made, seeds and all.
After that the two share only memory made to be shared:

* the parameters: when the DataParallel is made, the model's parameters
  move into shared memory (``SharedArrays.hold``: each layer's ``params``
  then holds a view of it), so the optimiser's step, in place, updates the
  workers' too. As on a device (``flat_state``), a reference to a weight
  taken before that stops following it: take it from the layer. A
  parameter replaced later (a checkpoint load) is copied in at the next
  step;
* each worker's gradients: the replica's gradient arrays are views of shared
  memory, which the worker writes and the trainer adds into the model's, as
  it adds a worker thread's;
* messages over a pipe: to the worker, the shard's inputs and targets, its
  share of the loss, and what a step may have changed in its replica (each
  module's training mode, each dropout layer's stream and p); back, the
  shard's loss and the dropout layers' streams after it, or the error it
  raised, which the trainer raises again.

Whatever else changes in the trainer after the fork (a parameter of a new
shape or dtype, a buffer replaced, the backend or the dtype in use) is not
seen by the worker: the trainer then stops it and forks a new one
(``WorkerProcess.matches``). Memory is as with threads: the parameters
once, and a gradient per worker. Each step gives the numbers that worker threads
give, bit for bit (tests/library/test_worker_processes.py).
"""

import os
import pickle
import signal
import sys
import time
import warnings
from multiprocessing.connection import Pipe

from minitrans.core import backend, kernels
from minitrans.core.threads import limit_blas_threads
from minitrans.layers.dropout import Dropout
from minitrans.model.replicas import share_parameters
from minitrans.training.optimisation.shared_arrays import SharedArrays

DROPOUT_STATE = ("p", "stream", "draws")  # what a step changes in a dropout layer
PARENT_CHECK_S = 1.0  # how often an idle worker looks whether its trainer is still there
STOP_WAIT_S = 60.0  # how long a worker told to stop may take to finish its shard


def processes_usable(backend_name=None):
    """Whether the workers can be processes: on Linux, which has fork() and
    whose libraries (glibc's malloc, OpenBLAS) prepare for it (macOS's system
    libraries are not safe to use after fork; Windows has none), and on the
    NumPy backend (a GPU's context does not survive a fork). ``backend_name``:
    the backend in use unless given."""
    backend_name = backend.backend_name() if backend_name is None else backend_name
    return sys.platform.startswith("linux") and backend_name == "numpy"


class WorkerLost(RuntimeError):
    """A worker process ended in the middle of a step."""


class WorkerPool:
    """The worker processes of ``parallel`` (a ``DataParallel``): replica i
    on process i (replica 0, the model, stays in the trainer's process).
    Forked at the first step, forked again when the trainer's copy has
    changed in a way a worker cannot see; stopped by ``close()``."""

    def __init__(self, parallel):
        self.workers = []
        self.parameters = None  # the SharedArrays of the model's parameters
        self._share_parameters(parallel)

    def _share_parameters(self, parallel):
        """Move the model's parameters into shared memory, where each layer's
        ``params`` then holds a view of it, and point the replicas at them."""
        self.parameters = SharedArrays([(module.params, key) for module, _ in
                                        parallel._twins[0] for key in module.params])
        self.parameters.hold()
        for twins in parallel._twins:
            share_parameters(twins)

    def run(self, parallel, shards):
        """The losses of ``shards``, [(index, inputs, targets, dloss)], the
        first computed in this process while the workers compute the others.
        Each worker's gradients are left in its replica's (shared) arrays.
        (``parallel`` is passed, not kept: the pool must not keep the
        DataParallel alive, whose collection closes it.)"""
        self._ready(parallel, len(shards) - 1)
        self.parameters.hold()  # a parameter replaced since the last step moves in too
        started = []
        try:
            for worker, (index, inputs, targets, dloss) in zip(self.workers, shards[1:]):
                worker.start(inputs, targets, dloss, parallel._zeroed[index - 1])
                parallel._zeroed[index - 1] = False  # the worker writes its gradients
                started.append(worker)
            first = parallel._shard(*shards[0])
        except WorkerLost:
            self.close(kill=True)
            raise
        finally:
            outcomes = [self._collect(worker) for worker in started]
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return [first] + outcomes

    def _collect(self, worker):
        """The worker's loss or its error. Anything that stops the wait (a
        Ctrl-C) stops every worker: their pipes would hold a stale answer."""
        try:
            return worker.result()
        except WorkerLost as error:  # the others are stopped too: new ones next step
            self.close(kill=True)
            return error
        except Exception as error:  # noqa: BLE001 - the shard's, raised by run
            return error
        except BaseException:
            self.close(kill=True)
            raise

    def _ready(self, parallel, count):
        """At least ``count`` workers whose copies match the trainer's."""
        if not (self.parameters.current() and all(worker.matches() for worker in self.workers)):
            self.close()
            self._share_parameters(parallel)
        while len(self.workers) < count:
            self.workers.append(WorkerProcess(parallel, len(self.workers) + 1, self.parameters))

    def close(self, kill=False):
        """Stop every worker (at once with ``kill``)."""
        for worker in self.workers:
            worker.close(kill)
        self.workers = []


class WorkerProcess:
    """Replica ``index`` of ``parallel`` computing its shards in a forked
    process: its parameters are the views of ``parameters`` (the model's, in
    shared memory), its gradients views of shared memory of its own.

    From the trainer's process: ``start(...)``, the trainer's own shard
    meanwhile, then ``result()``; ``close()`` at the end."""

    def __init__(self, parallel, index, parameters):
        self.index = index
        twins = parallel._twins[index - 1]
        self.modules = [replica for _, replica in twins]
        self.dropouts = [module for module in self.modules if isinstance(module, Dropout)]
        self.gradients = SharedArrays([(module.grads, key) for module in self.modules
                                       for key in module.grads])
        self.gradients.hold()
        position = 0
        for model_module, replica in twins:  # the shared views, even where the copy holds
            for key in model_module.params:  # a replaced array not yet moved in (`run`)
                replica.params[key] = parameters.view(position)
                position += 1
        self.buffers = [(replica.buffers, dict(replica.buffers)) for replica in self.modules]
        self.settings = backend_settings()
        self.connection, theirs = Pipe()
        # fork() in a process with threads (BLAS's, the optimiser's) is safe
        # here: the worker runs nothing but NumPy on one BLAS thread, and
        # glibc's malloc and OpenBLAS reset their locks and threads in the child
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12's warning of that
            self.pid = os.fork()
        if self.pid == 0:  # the worker
            self.connection.close()
            _serve(parallel, self, theirs)  # never returns
        theirs.close()

    def matches(self):
        """Whether the worker's copy of the replica is still the trainer's:
        the same backend settings, the same gradient and buffer arrays."""
        return (backend_settings() == self.settings
                and all(holder[key] is view for holder, key, view, _ in self.gradients.slots)
                and all(now.keys() == then.keys() and all(now[key] is then[key] for key in now)
                        for now, then in self.buffers))

    def start(self, inputs, targets, dloss, zeroed):
        """Send a shard: its inputs and targets, ``dloss`` (its share of the
        batch's loss) and whether its gradients are already zero; with it,
        the modes and dropout streams the trainer has set in its copy of the
        replica this step."""
        modes = [module.training for module in self.modules]
        try:
            self.connection.send((inputs, targets, dloss, zeroed, modes, _dropout_states(self)))
        except OSError:
            raise self.lost() from None

    def result(self):
        """The shard's loss, a Python float; raises the shard's error. The
        dropout layers of the trainer's copy take the streams they ended at."""
        try:
            outcome, value, dropouts = self.connection.recv()
        except (EOFError, OSError):
            raise self.lost() from None
        _set_dropout_states(self, dropouts)
        if outcome == "error":
            raise value
        return value

    def lost(self):  # the error of a worker that ended without an answer
        return WorkerLost(f"worker process {self.pid} (replica {self.index}) ended without an "
                          "answer: killed, or out of memory?")

    def close(self, kill=False):
        """Stop the worker: it ends at the message None, after the shard it
        is computing (at once with ``kill``). Not at the end of its pipe:
        a worker forked later holds a copy of the pipe's other end."""
        if self.pid is None:
            return
        try:
            if kill:
                os.kill(self.pid, signal.SIGKILL)
            else:
                self.connection.send(None)
        except OSError:  # it has ended already
            pass
        self.connection.close()
        deadline = time.monotonic() + STOP_WAIT_S
        while os.waitpid(self.pid, os.WNOHANG) == (0, 0):  # still running
            if time.monotonic() > deadline:  # stuck: not worth waiting for
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                break
            time.sleep(0.01)
        self.pid = None


def backend_settings():
    """What the worker computes with: the backend, the dtype, the kernel set."""
    return backend.backend_name(), backend.get_dtype(), kernels.active()


def _dropout_states(worker):  # what DROPOUT_STATE names, of each dropout layer
    return [tuple(getattr(layer, name) for name in DROPOUT_STATE) for layer in worker.dropouts]


def _set_dropout_states(worker, states):
    for layer, state in zip(worker.dropouts, states):
        for name, value in zip(DROPOUT_STATE, state):
            setattr(layer, name, value)


def _serve(parallel, worker, connection):
    """The worker's life: one shard per message, until the message None, or
    until the trainer's process is gone (looked for every PARENT_CHECK_S
    seconds: a trainer killed outright sends nothing)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the trainer's to handle
    trainer = os.getppid()
    try:
        with limit_blas_threads(parallel.blas_threads):
            while os.getppid() == trainer:
                if not connection.poll(PARENT_CHECK_S):
                    continue
                try:
                    message = connection.recv()
                except EOFError:  # the trainer's end is closed: it has ended
                    break
                if message is None:
                    break
                connection.send(_shard(parallel, worker, *message))
    finally:
        os._exit(0)  # never the trainer's exit handlers, nor its buffered output


def _shard(parallel, worker, inputs, targets, dloss, zeroed, modes, dropouts):
    """("loss", the shard's loss, dropout streams), or ("error", the error, ...)."""
    for module, training in zip(worker.modules, modes):
        module.training = training
    _set_dropout_states(worker, dropouts)
    parallel._zeroed[worker.index - 1] = zeroed
    try:
        outcome = ("loss", float(parallel._shard(worker.index, inputs, targets, dloss)))
    except Exception as error:  # noqa: BLE001 - raised again in the trainer
        outcome = ("error", _sendable(error))
    return outcome + (_dropout_states(worker),)


def _sendable(error):
    """The error itself where it survives pickling, else a RuntimeError that
    names it."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # noqa: BLE001
        return RuntimeError(f"in a worker process: {type(error).__name__}: {error}")

"""Data parallelism: one batch split across copies of the model, one per core.

The loss of a batch is a mean over its real (non-padding) target tokens. Cut
the batch into shards along the batch axis, shard s holding n_s of the
n = n_1 + ... + n_S tokens, and the mean is a weighted sum of the shards'
own means:

    loss = sum_s (n_s / n) * loss_s

A gradient is linear, so the gradient of the batch is the same weighted sum
of the shards' gradients. Each shard's forward and backward needs nothing
from the others, so each can run on a core of its own, on a copy of the
model (a *replica*) that shares the model's parameters but keeps its own
caches and gradients. At the end, the replicas' gradients are added into the
model's. This is how large models are trained on many GPUs (PyTorch's
DistributedDataParallel); here the workers are the CPU's cores.

Why it is worth it on a CPU: NumPy runs each large matrix product on every
core (OpenBLAS's threads), but everything else, softmax, layer norm,
dropout, the loss, on one core. Workers keep all cores busy for all of it.
Each worker gets its share of BLAS threads (one each on two cores), so that
the products of two workers do not fight over the cores.

On Linux the replicas other than the model run in processes of their own
(``worker_processes``: forked at the first step, sharing the parameters and
their gradients through shared memory). Elsewhere, and with
``processes=False``, they run on threads: NumPy lets go of Python's global
lock inside its array loops, so threads compute at once too, but they take
turns with the lock between operations, and a small model's step is
thousands of short operations (the worker processes' docstring says what
that costs).

Each replica's dropout draws its own masks (its layers get seeds of their
own), and everything a shard computes depends only on its rows and the
seeds, so a step gives the same numbers whichever worker finishes first,
on threads or processes. With ``workers=1`` it is the plain step: forward,
loss, backward, nothing added.
"""

import copy
import weakref
from concurrent.futures import ThreadPoolExecutor, wait

from minitrans.core import backend, checks
from minitrans.core.threads import limit_blas_threads, usable_cores
from minitrans.layers.module import zero_grads
from minitrans.model.replicas import default_workers, replicate, share_parameters, shard_bounds
from minitrans.training.optimisation.worker_processes import WorkerPool, processes_usable


# Each worker is a thread or a process with a replica of the model (its own
# gradients and caches): a hundred thousand of them would take minutes to
# make and all the memory. Sixteen cores' worth with room to spare, and the
# same on every machine, so that a configuration that runs here runs everywhere.
MAX_WORKERS = 64


class DataParallel:
    """Forward, loss and backward of a batch, split over ``workers`` workers.

    ``model`` is any model of this library (``model.forward(*inputs)`` gives
    logits; ``model.backward(dlogits)``), ``loss_fn`` a loss with
    ``forward(logits, targets)``, ``backward(dloss)`` and
    ``num_targets(targets)`` (``LabelSmoothedCrossEntropy``).

    Usage, in place of forward / loss / backward:
        parallel = DataParallel(model, loss_fn)
        model.zero_grad()
        loss = parallel.forward_backward((src, tgt_in), tgt_out)
        optimizer.step()

    ``blas_threads``: how many threads each worker's matrix products may
    use (default: the cores shared out, at least 1). With one worker BLAS
    keeps its own setting. ``processes``: whether the replicas other than
    the model run in processes of their own (default: where they can, on
    Linux with the NumPy backend; ``worker_processes.processes_usable``).
    With processes the model's parameters move into shared memory here: a
    reference to a weight taken before stops following it.

    ``replicas`` holds the model and its copies (``replicas[0]`` is the
    model itself): walk them all to set the training mode or a dropout
    layer's stream or p (worker processes are sent these with each shard;
    anything else of a replica's is not for a trainer to change).
    """

    def __init__(self, model, loss_fn, workers=None, blas_threads=None, processes=None):
        workers = default_workers() if workers is None else workers
        checks.check_positive_int("workers", workers)
        if workers > MAX_WORKERS:
            raise ValueError(f"workers: expected at most {MAX_WORKERS}, got {workers}")
        blas_threads = max(1, usable_cores() // workers) if blas_threads is None else blas_threads
        checks.check_positive_int("blas_threads", blas_threads)
        if workers > 1 and backend.on_device():
            raise ValueError(
                f"workers: expected 1 on the {backend.backend_name()} backend (the threads would "
                f"take turns queueing work on one CUDA stream), got {workers}"
            )
        self.model, self.loss_fn, self.workers = model, loss_fn, workers
        self.replicas = [model] + [replicate(model, index) for index in range(1, workers)]
        # each replica's modules beside the model's, in the same order: the tree
        # is fixed once the replicas are made, so it is walked here, not every step
        self._twins = [list(zip(model.modules(), replica.modules()))
                       for replica in self.replicas[1:]]
        self._modules = [module for replica in self.replicas for module in replica.modules()]
        # whether replica i + 1's gradients are all zero: the sum after each
        # step zeroes them, so that its shard need not (see _add_into)
        self._zeroed = [False] * (workers - 1)
        self.loss_fns = [loss_fn] + [copy.deepcopy(loss_fn) for _ in range(1, workers)]
        self.processes = processes_usable() if processes is None else bool(processes)
        if self.processes and workers > 1 and not processes_usable():
            raise ValueError("processes: expected False or None here (worker processes need "
                             "fork() on Linux and the NumPy backend), got True")
        self._pool = self._processes = None
        if workers > 1 and self.processes:
            self._processes = WorkerPool(self)  # the parameters move to shared memory
            weakref.finalize(self, self._processes.close)  # stops the workers with this object
        elif workers > 1:
            self._pool = ThreadPoolExecutor(workers - 1, thread_name_prefix="minitrans-worker")
        self.blas_threads = blas_threads

    def modules(self):
        """Every module of every replica (the trees as they were when the
        replicas were made)."""
        return list(self._modules)

    def forward_backward(self, inputs, targets):
        """The loss of the batch (a 0-d array); ADDS its gradient into the
        model's ``grads``, as ``model.backward`` does.

        inputs:  a tuple of arrays, each (B, ...), passed to ``model.forward``
        targets: (B, ...) token ids, passed to ``loss_fn.forward``
        """
        if self.workers == 1:
            return self._shard(0, inputs, targets, dloss=1.0)
        batch = targets.shape[0]
        shards = [(s, [a[start:stop] for a in inputs], targets[start:stop])
                  for s, (start, stop) in enumerate(shard_bounds(batch, self.workers))]
        counts = [self.loss_fn.num_targets(shard_targets) for _, _, shard_targets in shards]
        total = sum(counts)
        # each shard's share of the batch's tokens weighs its loss and, as
        # the dloss of its backward, its gradient (all zero: no real token)
        shares = [count / total if total else 0.0 for count in counts]
        for twins in self._twins:
            share_parameters(twins)
        calls = [(s, x, t, shares[s]) for s, x, t in shards]
        with limit_blas_threads(self.blas_threads):
            if self._processes is not None:
                losses = self._processes.run(self, calls)
            else:
                losses = self._on_workers(self._shard, calls)
        self._add_replica_gradients(used=len(shards))
        return backend.get_xp().asarray(
            sum(float(loss) * share for loss, share in zip(losses, shares)),
            dtype=backend.get_dtype(),
        )

    def _add_replica_gradients(self, used):
        """model.grads += the grads of replicas 1 .. used - 1, on all the
        workers: each thread sums the gradients of some of the parameters
        (dealt out largest first), so no array is written by two threads,
        and neither thread waits while the other adds them all (the runs
        that kept this: benchmarks/results/vs_pytorch/, the third round of
        speed changes). Each replica gradient is set to zero right
        after it is added, ready for the next step, on both threads: the
        replicas' own workers then start their shards at once, instead of
        zeroing first while the model's worker, whose gradients the caller
        zeroed, is already computing. With worker processes the sums run in
        this process alone, from their shared gradients."""
        if used < 2:
            return
        jobs = []  # (the model's gradient, the replicas' gradients of the same parameter)
        for position, (module, _) in enumerate(self._twins[0]):
            for name, total in module.grads.items():
                replicas = [twins[position][1] for twins in self._twins[:used - 1]]
                jobs.append((total, [replica.grads[name] for replica in replicas]))
        jobs.sort(key=lambda job: -job[0].size)
        self._on_workers(_add_into, [(jobs[i::self.workers],) for i in range(self.workers)])
        self._zeroed[:used - 1] = [True] * (used - 1)

    def _on_workers(self, function, calls):
        """[function(*args) for args in calls], the first in this thread and
        the others in the pool's, all at once. Every call finishes before
        this returns, even if one failed; then the first error is raised.
        With worker processes, which have no threads here, one by one."""
        if self._pool is None:
            return [function(*args) for args in calls]
        futures = [self._pool.submit(function, *args) for args in calls[1:]]
        try:
            first = function(*calls[0])
        finally:
            wait(futures)
        return [first] + [future.result() for future in futures]  # re-raises a worker's error

    def _shard(self, index, inputs, targets, dloss):
        """One replica's forward, loss and backward; replicas other than the
        model start from zero gradients."""
        model, loss_fn = self.replicas[index], self.loss_fns[index]
        if index > 0:
            if not self._zeroed[index - 1]:  # the first step, or after an error
                zero_grads(module for _, module in self._twins[index - 1])  # no tree walk
            self._zeroed[index - 1] = False  # written below
        loss = loss_fn.forward(model.forward(*inputs), targets)
        model.backward(loss_fn.backward(dloss))
        return loss


def _add_into(jobs):
    """total += part for every part, each part then set to zero (while it is
    fresh in this core's cache)."""
    for total, parts in jobs:
        for part in parts:
            total += part
            part.fill(0)

"""Copies of a model that share its parameters: one per worker.

A batch's rows can be split into shards and each shard run on a worker of
its own, training (``minitrans.training.optimisation.parallel.DataParallel``,
threads or processes) or decoding (``minitrans.decoding.shards``, threads).
Two workers cannot run the same layer at once: a layer keeps what its
backward needs in ``self.cache``, and the decoding caches grow per call.
So each worker runs a *replica*: a copy of the module tree that holds the
same parameter arrays (no copy of the weights, and an update of the model
is an update of every replica; a worker process reads them from shared
memory) but caches, gradients and dropout seeds of its own.
"""

import copy

from minitrans.core import backend
from minitrans.layers.dropout import Dropout


def default_workers():
    """2 on NumPy, 1 on CuPy (a GPU is one device: threads would only take
    turns queueing its work on one CUDA stream) and on the strict backend,
    which takes CuPy's paths.

    Not one per core: the shards, and so the dropout masks and the sums,
    depend on the number of workers, and a run should give the same numbers
    on every machine. Two is what the benchmarks measured (2 cores); on a
    bigger machine each worker gets more BLAS threads."""
    return 1 if backend.on_device() else 2


def shard_bounds(size, parts):
    """(start, stop) of at most ``parts`` non-empty, near-equal slices of range(size)."""
    parts = min(parts, size)
    bounds = [size * i // parts for i in range(parts + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def replicate(model, index, gradients=True):
    """A copy of ``model`` that shares its parameters and buffers (the same
    arrays, not copies), with gradients and caches of its own, and dropout
    seeds derived from the model's and ``index``. ``gradients=False``: a
    replica that only runs forward (decoding), without gradient arrays."""
    modules = model.modules()
    caches = [module.cache for module in modules]
    shared = {}  # deepcopy's memo: what it must not copy, by id
    for module in modules:
        for array in (*module.params.values(), *module.buffers.values()):
            shared[id(array)] = array
        if not gradients:
            shared[id(module.grads)] = {}
        # The last forward's caches are not copied. They are emptied for the
        # copy rather than named in the memo: a cache may be a small int (an
        # AddNorm keeps its sub-layer's index), and a memo entry for that int
        # would replace every 0 or 1 of the copy, pad_id included.
        module.cache = None
    try:
        replica = copy.deepcopy(model, memo=shared)
    finally:
        for module, cache in zip(modules, caches):
            module.cache = cache
    for module in replica.modules():
        if isinstance(module, Dropout):
            module.seed = int(backend.host_rng((module.seed, index)).integers(2**31))
            module.reset_rng()
    return replica


def share_parameters(twins, gradients=True):
    """Point each replica module at its model module's current arrays and
    mode (a checkpoint load or a move to another device may have replaced
    them), and give it fresh gradients where the model's changed type, shape
    or dtype (none with ``gradients=False``). ``twins``: (model module,
    replica module) pairs, from ``zip(model.modules(), replica.modules())``."""
    xp = backend.get_xp()
    for source, target in twins:
        target.params.update(source.params)
        target.buffers.update(source.buffers)
        target.training = source.training
        if not gradients:
            continue
        for name, grad in source.grads.items():
            mine = target.grads.get(name)
            if (
                mine is None
                or type(mine) is not type(grad)
                or mine.shape != grad.shape
                or mine.dtype != grad.dtype
            ):
                target.grads[name] = xp.zeros_like(grad)

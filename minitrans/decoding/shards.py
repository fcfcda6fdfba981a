"""Decoding on every core: the rows of a batch split over threads.

Each row of a batch decodes on its own: its tokens depend on its source (or
prompt) and on nothing in the other rows. So the rows can be cut into
shards, each decoded by a replica of the model (``minitrans.model.replicas``)
on a thread of its own with one BLAS thread, as ``DataParallel`` trains. On
NumPy the matrix products would use every core anyway, but the element-wise
work (softmax, layer norm, ReLU), which NumPy runs on one core, now runs on
all of them. ``python benchmarks/vs_pytorch.py --configs small`` times it.

A shard stops when all of its rows have finished, so shards end at
different lengths; the shorter ones are padded with what the whole batch
would have held there (<pad> after <eos>), and the result is the batch's.
One caveat: a matrix product of fewer rows may add its terms in another
order, so a beam's score can differ in its last bit, and a near tie
between two tokens could in principle fall the other way.
"""

import weakref
from concurrent.futures import ThreadPoolExecutor

from minitrans.core import backend
from minitrans.core.threads import limit_blas_threads
from minitrans.model.replicas import default_workers, replicate, share_parameters, shard_bounds

# The fewest rows a shard gets, by way of decoding. Below them the second
# thread costs more than it brings: its Python waits for the first's (one
# interpreter lock), and a step of greedy decoding with the cache is little
# work, one position a row. Recomputing the prefix makes a step long, and a
# beam search's step ranks beam_size x V candidates a row, so a few rows a
# shard pay there. Measured on the small config, 2 cores:
# benchmarks/results/decoding_shards/.
MIN_ROWS_PER_SHARD = {"cache": 64, "recompute": 8, "beam": 4}

_replicas = weakref.WeakKeyDictionary()  # model -> [replica, ...], made once


def shard_count(rows, way, workers=None):
    """How many shards ``rows`` rows decode in, the ``way`` of
    MIN_ROWS_PER_SHARD ("cache", "recompute" or "beam"): ``workers``
    (default: 2 on NumPy, 1 on a GPU), fewer where a shard would get under
    its minimum of rows, at least 1."""
    workers = default_workers() if workers is None else workers
    return max(1, min(workers, rows // MIN_ROWS_PER_SHARD[way]))


def decode_in_shards(decode, model, rows, fill, shards):
    """``decode(model, rows)`` for ``shards`` slices of ``rows`` (axis 0), at once.

    decode returns an array or a tuple of arrays, each with the rows on axis
    0. Their parts are joined along axis 0; integer arrays (token ids) first
    have their last axis padded to the longest shard's with ``fill``.
    """
    bounds = shard_bounds(rows.shape[0], shards)
    models = [model] + _copies(model, len(bounds) - 1)
    calls = [(models[s], rows[start:stop]) for s, (start, stop) in enumerate(bounds)]
    with ThreadPoolExecutor(len(calls) - 1) as pool, limit_blas_threads(1):
        futures = [pool.submit(decode, *call) for call in calls[1:]]
        first = decode(*calls[0])  # this thread decodes a shard too
        parts = [first] + [future.result() for future in futures]  # re-raises a shard's error
    if not isinstance(first, tuple):
        return _joined(parts, fill)
    return tuple(_joined(list(pieces), fill) for pieces in zip(*parts))


def _copies(model, count):
    """``count`` replicas of ``model``, kept from call to call, pointed at the
    model's current parameters (an update or a checkpoint load may have
    replaced them) and mode. A replica whose layers no longer match the
    model's (a layer replaced or added since) is made again."""
    modules = model.modules()
    kinds = list(map(type, modules))
    trees = [(replica, replica.modules()) for replica in _replicas.get(model, [])]
    trees = [(replica, tree) for replica, tree in trees if list(map(type, tree)) == kinds]
    while len(trees) < count:
        replica = replicate(model, len(trees) + 1, gradients=False)
        trees.append((replica, replica.modules()))
    _replicas[model] = [replica for replica, _ in trees]
    for _, tree in trees[:count]:
        share_parameters(zip(modules, tree), gradients=False)
    return [replica for replica, _ in trees[:count]]


def _joined(parts, fill):
    """The parts (rows on axis 0) as one array; integer ones padded first."""
    xp = backend.get_xp()
    if parts[0].dtype.kind in "iu":
        length = max(part.shape[-1] for part in parts)
        parts = [_padded(part, length, fill) for part in parts]
    return xp.concatenate(parts, axis=0)


def _padded(tokens, length, fill):
    """``tokens`` with its last axis filled out to ``length`` with ``fill``."""
    missing = length - tokens.shape[-1]
    if missing == 0:
        return tokens
    xp = backend.get_xp()
    padding = xp.full((*tokens.shape[:-1], missing), fill, dtype=tokens.dtype)
    return xp.concatenate([tokens, padding], axis=-1)

"""From ids to batches: padding, teacher forcing, the order of examples.

    ids --make_seq2seq_batch / make_lm_batch--> Batch (on the device)

Padding runs on the host (NumPy); only finished batches move to the current
backend, one copy per batch.
"""

import dataclasses

import numpy as np

from minitrans.core import backend, checks
from minitrans.data.vocab import BOS_ID, EOS_ID, PAD_ID, DataError


def pad(sequences, pad_id=PAD_ID):
    """Lists of ids of different lengths -> one (B, T_max) int64 host array.

    Short sequences are filled with ``pad_id`` on the right; the masks then
    keep attention and the loss away from those positions.
    """
    if len(sequences) == 0:
        raise DataError("sequences: expected at least one sequence, got none")
    longest = max(len(sequence) for sequence in sequences)
    padded = np.full((len(sequences), longest), pad_id, dtype=np.int64)
    for row, sequence in enumerate(sequences):
        padded[row, : len(sequence)] = sequence
    return padded


@dataclasses.dataclass
class Batch:
    """One training batch, on the device.

    src:        (B, S) source ids, or None for a decoder-only model
    tgt_in:     (B, T) what the decoder reads
    tgt_out:    (B, T) what it must predict at each position
    num_tokens: non-pad entries of tgt_out, a Python int (to average the loss
                per token, or to count tokens per second)
    """

    src: object
    tgt_in: object
    tgt_out: object
    num_tokens: int


def _to_batch(src, tgt_in, tgt_out):
    num_tokens = int((tgt_out != PAD_ID).sum())  # counted on the host: no device sync
    if src is None:
        return Batch(None, *to_device_together(tgt_in, tgt_out), num_tokens)
    return Batch(*to_device_together(src, tgt_in, tgt_out), num_tokens)


def to_device_together(*arrays):
    """The host arrays on the device, in one copy: on a device each copy
    from the host is a transfer of its own, so they travel side by side in
    one array, and each comes back as a view of its piece. (On NumPy,
    ``to_device`` of each, as before.)"""
    if not backend.on_device():
        return tuple(backend.to_device(array) for array in arrays)
    together = backend.to_device(np.concatenate([array.ravel() for array in arrays]))
    ends = np.cumsum([array.size for array in arrays])
    return tuple(together[end - array.size:end].reshape(array.shape)
                 for array, end in zip(arrays, ends))


def make_seq2seq_batch(pairs):
    """Encoder-decoder batch from (src_ids, tgt_ids) pairs of id lists.

        src     = src_ids                       (padded)
        tgt_in  = <bos> + tgt_ids               (padded)
        tgt_out =         tgt_ids + <eos>       (padded)

    Teacher forcing: the decoder reads the true target shifted one place to
    the right, so at position t it has seen target tokens 0..t-1 (and <bos>,
    which says "start") and is trained to predict target token t, found at
    tgt_out[t]. All positions are trained in one forward pass; the causal
    mask stops position t from peeking at tgt_in[t + 1:]. The final <eos>
    teaches the model when to stop.
    """
    if len(pairs) == 0:
        raise DataError("pairs: expected at least one (source, target) pair, got none")
    src = pad([list(s) for s, _ in pairs])
    tgt_in = pad([[BOS_ID] + list(t) for _, t in pairs])
    tgt_out = pad([list(t) + [EOS_ID] for _, t in pairs])
    return _to_batch(src, tgt_in, tgt_out)


def make_lm_batch(sequences):
    """Decoder-only batch: predict every next token of <bos> + seq + <eos>.

    tgt_in is the whole sequence but its last token and tgt_out the whole
    sequence but its first, so tgt_out[t] is the token after tgt_in[t].
    """
    if len(sequences) == 0:
        raise DataError("sequences: expected at least one sequence, got none")
    full = [[BOS_ID] + list(sequence) + [EOS_ID] for sequence in sequences]
    return _to_batch(None, pad([f[:-1] for f in full]), pad([f[1:] for f in full]))


def iterate_batches(examples, batch_size, rng):
    """Yield lists of ``batch_size`` examples forever, epoch after epoch.

    Each epoch visits the examples in a fresh order, ``rng.permutation``, and
    drops its last partial batch, so every batch has the same size (a
    dataset no larger than ``batch_size`` gives one batch of all of it).

    The batches depend only on the state of ``rng`` (a numpy Generator) when
    the iteration starts. To resume an interrupted run with the same batches,
    save ``rng.bit_generator.state`` before iterating; on resume restore it
    and skip the batches already trained on (``itertools.islice``). Saving
    the state mid-run is not enough: the current epoch's order has already
    been drawn from it.
    """
    checks.check_positive_int("batch_size", batch_size)
    if len(examples) == 0:
        raise DataError("examples: expected at least one example, got none")
    count = len(examples)
    while True:
        order = rng.permutation(count).tolist()
        if count <= batch_size:
            yield [examples[i] for i in order]
            continue
        for start in range(0, count - batch_size + 1, batch_size):
            yield [examples[i] for i in order[start : start + batch_size]]

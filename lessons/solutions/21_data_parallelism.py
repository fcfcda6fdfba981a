"""Solution to the exercise of lesson 21 (21_data_parallelism): the gradient
of a batch from the gradients of its shards, in plain NumPy."""

import numpy as np


def combine_shard_gradients(grads, counts):
    """grads: S arrays of one shape, the gradient of each shard's MEAN loss;
    counts: the S shards' numbers of real (non-padding) target tokens.

    The batch's loss is the mean over all n = sum(counts) real tokens, so
    shard s weighs n_s / n, not 1 / S. A shard without a real token weighs
    0; a batch without one has a zero gradient. Returns one array.
    """
    total = sum(counts)
    combined = np.zeros_like(grads[0])
    if total == 0:
        return combined
    for grad, count in zip(grads, counts):
        combined += (count / total) * grad
    return combined

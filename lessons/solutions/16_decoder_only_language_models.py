"""Solutions to the exercises of lesson 16 (16_decoder_only_language_models):
the inputs and targets of next-token prediction, and top-k filtering, in
plain NumPy."""

import numpy as np


def next_token_targets(sequences, bos_id, eos_id, pad_id):
    """sequences: B lists of token ids (no <bos>, no <eos>, any lengths).

    Each row becomes <bos> + ids + <eos>; the inputs are all of it but the
    last token, the targets all of it but the first, so targets[t] is the
    token after inputs[t]. Cut first, then pad (as data.make_lm_batch does):
    a short row's inputs end in <pad>, not in its <eos>. Returns
    (inputs, targets), int arrays (B, T + 1), T the longest sequence.
    """
    rows = [[bos_id, *ids, eos_id] for ids in sequences]
    width = max(len(row) for row in rows) - 1
    inputs = np.full((len(rows), width), pad_id, dtype=np.int64)
    targets = np.full((len(rows), width), pad_id, dtype=np.int64)
    for b, row in enumerate(rows):
        inputs[b, : len(row) - 1] = row[:-1]
        targets[b, : len(row) - 1] = row[1:]
    return inputs, targets


def top_k_filter(probs, k):
    """probs (B, V): keep each row's k largest probabilities, zero the rest,
    renormalise; exactly k kept (all when k >= V), ties to the lower index,
    as a stable sort ranks them. The same as softmax(top_k_filter(logits, k))
    with minitrans's filter, which works on the logits."""
    order = np.argsort(-probs, axis=-1, kind="stable")  # most probable first
    rank = np.argsort(order, axis=-1, kind="stable")  # rank[b, v]: place of token v
    kept = np.where(rank < k, probs, 0.0)
    return kept / kept.sum(axis=-1, keepdims=True)

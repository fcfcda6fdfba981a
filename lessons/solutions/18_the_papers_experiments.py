"""Solution of lesson 18's exercise: perplexity."""

import numpy as np


def perplexity(logits, targets, pad_id):
    """exp(mean cross-entropy per real target token).

    logits (B, T, V), targets (B, T) ints with pad_id at padding -> a float."""
    z = logits.astype(np.float64)
    z = z - z.max(axis=-1, keepdims=True)  # exp(1000) would overflow
    log_probs = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))  # (B, T, V)
    picked = np.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]  # (B, T)
    real = targets != pad_id
    return float(np.exp(-picked[real].sum() / real.sum()))

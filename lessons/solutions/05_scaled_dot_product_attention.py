"""Solution to the exercise of lesson 5 (05_scaled_dot_product_attention):
scaled dot-product attention with a mask, in plain NumPy."""

import numpy as np


def attention(Q, K, V, mask=None):
    """softmax(Q K^T / sqrt(d_k) + M) V, where M is 0 where ``mask`` is True
    and -inf where it is False.

    Q: (B, T_q, d_k), K: (B, T_k, d_k), V: (B, T_k, d_v); mask: boolean,
    True = may attend, broadcastable to (B, T_q, T_k). Returns (B, T_q, d_v).
    A query whose every key is masked gets a zero output (not NaN).
    """
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)        # (B, T_q, T_k)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)      # fully masked rows
    e = np.exp(scores - row_max)                                # exp(-inf) = 0
    total = e.sum(axis=-1, keepdims=True)
    weights = e / np.where(total > 0, total, 1.0)
    return weights @ V                                          # (B, T_q, d_v)

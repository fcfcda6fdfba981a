"""Solution to the exercise of lesson 8 (cross-attention): one head of
cross-attention, checked by
``minitrans_course.exercises_masks_heads.check_cross_attention``."""

import numpy as np


def cross_attention(x, memory, W_Q, W_K, W_V, src_mask):
    """softmax(Q K^T / sqrt(d_k) + M) V with Q = x W_Q, K = memory W_K,
    V = memory W_V.

    x: (B, T_t, d) the decoder's states; memory: (B, T_s, d) the encoder's
    output; W_Q, W_K, W_V: (d, d_k); src_mask: (B, 1, T_s), True at the real
    source tokens. Returns (B, T_t, d_k).
    """
    Q = x @ W_Q                                               # (B, T_t, d_k): the target asks
    K, V = memory @ W_K, memory @ W_V                         # (B, T_s, d_k): the source answers
    scores = Q @ K.swapaxes(-1, -2) / np.sqrt(Q.shape[-1])    # (B, T_t, T_s)
    scores = np.where(src_mask, scores, -np.inf)              # no query reads a padding token
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)            # every source has a real token
    return weights @ V                                        # (B, T_t, d_k)

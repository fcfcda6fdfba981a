"""Solution to the exercise of lesson 15 (15_fast_decoding_kv_cache): one
decoding step of attention with a key/value cache, in plain NumPy."""

import numpy as np


def kv_cache_step(K_cache, V_cache, q, k, v):
    """Append the new position's key and value, then let its query attend.

    K_cache (B, t, d_k), V_cache (B, t, d_v): the t positions before (t may be
    0); q, k (B, 1, d_k), v (B, 1, d_v): the new position. No mask is needed:
    the cache holds only positions up to the new one. Returns
    (out (B, 1, d_v), K (B, t + 1, d_k), V (B, t + 1, d_v)).
    """
    K = np.concatenate([K_cache, k], axis=1)  # (B, t + 1, d_k)
    V = np.concatenate([V_cache, v], axis=1)  # (B, t + 1, d_v)
    scores = q @ K.swapaxes(-1, -2) / np.sqrt(q.shape[-1])  # (B, 1, t + 1)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ V, K, V

"""Solutions to the exercises of lesson 22 (22_todays_decoder): RMSNorm forward
and backward, rotary positions at an offset, the SwiGLU feed-forward, and the
backward of grouped-query attention, in plain NumPy (arrays in, arrays out)."""

import math

import numpy as np


def rms_norm(x, gamma, eps, dy):
    """(y, dx, dgamma) of y = gamma * x / sqrt(mean(x^2) + eps) over the last
    axis. x, dy: (..., D); gamma: (D,)."""
    inv_rms = 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    x_hat = x * inv_rms
    y = gamma * x_hat
    g = dy * gamma  # the gradient arriving at x_hat
    dx = (g - x_hat * (g * x_hat).mean(axis=-1, keepdims=True)) * inv_rms
    dgamma = (dy * x_hat).reshape(-1, x.shape[-1]).sum(axis=0)  # over every position
    return y, dx, dgamma


def rotate(x, offset, base):
    """x (B, h, T, d_k) rotated by position: the pair (x_i, x_{i + d_k/2}) at
    position m = offset + t turned by the angle m * base^(-2i / d_k)."""
    d_k, T = x.shape[-1], x.shape[-2]
    theta = base ** (-np.arange(0, d_k, 2) / d_k)  # (d_k/2,)
    angle = (offset + np.arange(T))[:, None] * theta  # (T, d_k/2)
    cos, sin = np.cos(angle).astype(x.dtype), np.sin(angle).astype(x.dtype)
    x1, x2 = x[..., :d_k // 2], x[..., d_k // 2:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def _sigmoid(a):
    """1 / (1 + e^-a), from e^-|a| so that nothing overflows."""
    e = np.exp(-np.abs(a))
    return np.where(a >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def swiglu(x, W_gate, W_up, W_down):
    """(SiLU(x W_gate) * (x W_up)) W_down, SiLU(a) = a sigma(a); x (..., d_model)."""
    a, u = x @ W_gate, x @ W_up
    return (a * _sigmoid(a) * u) @ W_down


def grouped_attention_backward(Q, K, V, dout):
    """(dQ, dK, dV) of causal attention with Q, dout (B, h, T, d_k) and K, V
    (B, kv_heads, T, d_k): query head i reads key/value head i // g."""
    B, h, T, d_k = Q.shape
    kv_heads = K.shape[1]
    g = h // kv_heads
    K_h, V_h = np.repeat(K, g, axis=1), np.repeat(V, g, axis=1)  # (B, h, T, d_k)
    scale = 1.0 / math.sqrt(d_k)
    scores = Q @ K_h.swapaxes(-1, -2) * scale
    scores = np.where(np.tril(np.ones((T, T), dtype=bool)), scores, -np.inf)
    P = np.exp(scores - scores.max(axis=-1, keepdims=True))
    P /= P.sum(axis=-1, keepdims=True)
    dV_h = P.swapaxes(-1, -2) @ dout
    dP = dout @ V_h.swapaxes(-1, -2)
    dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True))
    dQ = dS @ K_h * scale
    dK_h = dS.swapaxes(-1, -2) @ Q * scale
    # the backward of np.repeat: each group's g copies added up
    dK = dK_h.reshape(B, kv_heads, g, T, d_k).sum(axis=2)
    dV = dV_h.reshape(B, kv_heads, g, T, d_k).sum(axis=2)
    return dQ, dK, dV

"""Solutions to the exercises of lesson 11, backpropagation by hand and
gradient checking: the backwards of softmax, layer norm and scaled dot-product
attention, in plain NumPy (float64 arrays in, arrays out)."""

import math

import numpy as np


def softmax_backward(y, dy):
    """dz for y = softmax(z) over the last axis: the Jacobian diag(y) - y y^T
    applied to dy, without building it. y, dy: (B, V) -> dz: (B, V)."""
    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))


def layernorm_backward(x, gamma, beta, eps, dy):
    """(dx, dgamma, dbeta) of y = gamma * (x - mu) / sqrt(var + eps) + beta,
    statistics over the last axis. x, dy: (..., D); gamma, beta: (D,).
    beta does not enter the gradients; it is an argument to match the forward."""
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    inv_std = 1.0 / np.sqrt(var + eps)
    x_hat = (x - mu) * inv_std
    positions = tuple(range(x.ndim - 1))            # every axis but the features
    dgamma = (dy * x_hat).sum(axis=positions)
    dbeta = dy.sum(axis=positions)
    g = dy * gamma                                    # gradient at x_hat
    dx = inv_std * (g
                    - g.mean(axis=-1, keepdims=True)                      # through the mean
                    - x_hat * (g * x_hat).mean(axis=-1, keepdims=True))   # through the variance
    return dx, dgamma, dbeta


def attention_backward(Q, K, V, P, dout):
    """(dQ, dK, dV) of out = P V with P = softmax(Q K^T / sqrt(d_k)).
    Q (B, T_q, d_k), K (B, T_k, d_k), V (B, T_k, d_v), P (B, T_q, T_k),
    dout (B, T_q, d_v)."""
    scale = 1.0 / math.sqrt(Q.shape[-1])
    dV = P.swapaxes(-1, -2) @ dout                    # (B, T_k, d_v)
    dP = dout @ V.swapaxes(-1, -2)                    # (B, T_q, T_k)
    dS = softmax_backward(P, dP)                      # (B, T_q, T_k)
    dQ = (dS @ K) * scale                             # (B, T_q, d_k)
    dK = (dS.swapaxes(-1, -2) @ Q) * scale            # (B, T_k, d_k)
    return dQ, dK, dV

"""Slow, independent references for lesson 22's exercises (``exercises_modern``):
RMSNorm, rotary positions, the SwiGLU feed-forward and the backward of
grouped-query attention.

As in ``exercise_references``, each works the answer out ANOTHER way than
minitrans's layers and the lesson's solutions: position by position with
Python floats and ``math.fsum``, RMSNorm's gradient through its full
Jacobian, the rotation as a multiplication of complex numbers, each query
head's gradient added into its key/value head one at a time. Nothing from
minitrans is called. The loops are slow; the checkers use small arrays.
"""

import cmath
import math

import numpy as np


def _sigmoid(z):
    """1 / (1 + e^-z) without overflow for large |z|."""
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def rms_norm(x, gamma, eps, dy):
    """(y, dx, dgamma) of y = gamma * x / sqrt(mean(x^2) + eps) over the last axis.

    Per position, with r = sqrt(sum_j x_j^2 / D + eps), the Jacobian
    d y_i / d x_j = gamma_i (delta_ij / r - x_i x_j / (D r^3)) is built in
    full and dx = J^T dy; dgamma sums dy_i x_i / r over every position."""
    x, dy = np.asarray(x, dtype=np.float64), np.asarray(dy, dtype=np.float64)
    gamma = np.asarray(gamma, dtype=np.float64)
    D = x.shape[-1]
    rows, drows = x.reshape(-1, D), dy.reshape(-1, D)
    y, dx = np.empty_like(rows), np.empty_like(rows)
    dgamma = [[] for _ in range(D)]
    for n, (row, drow) in enumerate(zip(rows, drows)):
        r = math.sqrt(math.fsum(v * v for v in row) / D + eps)
        jacobian = np.array([[gamma[i] * ((i == j) / r - row[i] * row[j] / (D * r**3))
                              for j in range(D)] for i in range(D)])
        y[n] = [gamma[i] * row[i] / r for i in range(D)]
        dx[n] = [math.fsum(jacobian[i, j] * drow[i] for i in range(D)) for j in range(D)]
        for i in range(D):
            dgamma[i].append(drow[i] * row[i] / r)
    dgamma = np.array([math.fsum(terms) for terms in dgamma])
    return y.reshape(x.shape), dx.reshape(x.shape), dgamma


def rotate(x, offset, base):
    """Rotary positions applied to x (B, h, T, d_k) whose first position is
    ``offset``: coordinates i and i + d_k/2 are read as the complex number
    z = x_i + j x_{i + d_k/2} and multiplied by e^{j m theta_i}, with
    m = offset + t and theta_i = base^(-2i / d_k)."""
    x = np.asarray(x, dtype=np.float64)
    B, H, T, d_k = x.shape
    half = d_k // 2
    out = np.empty_like(x)
    for b in range(B):
        for head in range(H):
            for t in range(T):
                for i in range(half):
                    angle = (offset + t) * base ** (-2.0 * i / d_k)
                    z = complex(x[b, head, t, i], x[b, head, t, i + half])
                    z *= cmath.exp(1j * angle)
                    out[b, head, t, i], out[b, head, t, i + half] = z.real, z.imag
    return out


def swiglu(x, W_gate, W_up, W_down):
    """(SiLU(x W_gate) * (x W_up)) W_down for x (..., d_model), position by
    position with math.fsum; SiLU(a) = a sigma(a)."""
    x = np.asarray(x, dtype=np.float64)
    W_gate, W_up, W_down = (np.asarray(W, dtype=np.float64) for W in (W_gate, W_up, W_down))
    d_model, d_ff = W_gate.shape
    rows = x.reshape(-1, d_model)
    out = np.empty((len(rows), W_down.shape[1]))
    for n, row in enumerate(rows):
        hidden = []
        for j in range(d_ff):
            a = math.fsum(row[k] * W_gate[k, j] for k in range(d_model))
            u = math.fsum(row[k] * W_up[k, j] for k in range(d_model))
            hidden.append(a * _sigmoid(a) * u)
        out[n] = [math.fsum(hidden[j] * W_down[j, c] for j in range(d_ff))
                  for c in range(W_down.shape[1])]
    return out.reshape(x.shape[:-1] + (W_down.shape[1],))


def _causal_weights(q, k):
    """P (T, T) of one head, query by query over the keys up to its own
    position: softmax of q . k / sqrt(d_k), with math.exp."""
    T, d_k = q.shape
    P = np.zeros((T, T))
    for t in range(T):
        scores = [math.fsum(q[t] * k[s]) / math.sqrt(d_k) for s in range(t + 1)]
        top = max(scores)
        e = [math.exp(v - top) for v in scores]
        P[t, :t + 1] = [v / math.fsum(e) for v in e]
    return P


def grouped_attention_backward(Q, K, V, dout):
    """(dQ, dK, dV) of causal grouped-query attention: query head i
    (of h, in Q (B, h, T, d_k)) attends with key/value head i // g of K, V
    (B, kv_heads, T, d_k), g = h / kv_heads. Each query head's gradients
    are worked out alone (the softmax's Jacobian diag(p) - p p^T row by row)
    and added into its key/value head's, one head at a time."""
    Q, K, V, dout = (np.asarray(a, dtype=np.float64) for a in (Q, K, V, dout))
    B, h, T, d_k = Q.shape
    group = h // K.shape[1]
    dQ, dK, dV = np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)
    for b in range(B):
        for head in range(h):
            kv = head // group
            q, k, v, d = Q[b, head], K[b, kv], V[b, kv], dout[b, head]
            P = _causal_weights(q, k)
            dV[b, kv] += P.T @ d
            dP = d @ v.T
            dS = np.array([(np.diag(p) - np.outer(p, p)) @ dp for p, dp in zip(P, dP)])
            dQ[b, head] = dS @ k / math.sqrt(d_k)
            dK[b, kv] += dS.T @ q / math.sqrt(d_k)
    return dQ, dK, dV

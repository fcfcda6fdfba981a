"""Slow, independent references for the lessons' exercise checkers.

Each function computes what an exercise asks for ANOTHER way than minitrans
(and than the lessons' solutions) do: row by row or query by query, with
``math.exp``, ``math.fsum`` and explicit Jacobians in float64, never calling a
minitrans layer or operation. A learner who calls minitrans's own function
therefore still meets an answer that was worked out separately, and a bug
shared by minitrans and a solution cannot hide. The loops are slow; the
checkers only use small arrays.
"""

import math

import numpy as np


def _rows(a):
    """a (..., n) as float64 rows (N, n) and the shape to restore."""
    a = np.asarray(a, dtype=np.float64)
    return a.reshape(-1, a.shape[-1]), a.shape


def log_sum_exp(row):
    """log sum_j exp(row_j) of one row of Python floats, shifted by the row's
    maximum so that logits of 1000 do not overflow: the log of softmax's
    denominator, with math.fsum."""
    top = max(row)
    return top + math.log(math.fsum(math.exp(v - top) for v in row))


def softmax(z):
    """Softmax over the last axis, one row at a time: exp(z_j - max) / sum."""
    rows, shape = _rows(z)
    out = np.empty_like(rows)
    for r, row in enumerate(rows):
        top = max(row)
        e = [math.exp(v - top) for v in row]
        total = math.fsum(e)
        out[r] = [v / total for v in e]
    return out.reshape(shape)


def softmax_backward(y, dy):
    """dz = J^T dy per row, with the Jacobian J = diag(y) - y y^T built in full
    (it is symmetric)."""
    y_rows, shape = _rows(y)
    dy_rows, _ = _rows(dy)
    out = np.empty_like(y_rows)
    for r, (p, d) in enumerate(zip(y_rows, dy_rows)):
        out[r] = (np.diag(p) - np.outer(p, p)) @ d
    return out.reshape(shape)


def attention_weights(Q, K, mask):
    """P (B, T_q, T_k), query by query: each allowed key's score
    q . k / sqrt(d_k), softmaxed over the allowed keys only; masked keys get 0,
    and a query with no allowed key gets a row of zeros (minitrans's convention:
    it attends to nothing)."""
    Q, K = np.asarray(Q, dtype=np.float64), np.asarray(K, dtype=np.float64)
    B, T_q, d_k = Q.shape
    T_k = K.shape[1]
    allowed = np.broadcast_to(np.asarray(mask, dtype=bool), (B, T_q, T_k))
    P = np.zeros((B, T_q, T_k))
    for b in range(B):
        for q in range(T_q):
            keys = [j for j in range(T_k) if allowed[b, q, j]]
            if not keys:
                continue
            scores = [math.fsum(Q[b, q] * K[b, j]) / math.sqrt(d_k) for j in keys]
            for j, w in zip(keys, softmax(np.array(scores))):
                P[b, q, j] = w
    return P


def attention(Q, K, V, mask):
    """Output (B, T_q, d_v): each query's weighted sum of the value vectors."""
    P = attention_weights(Q, K, mask)
    V = np.asarray(V, dtype=np.float64)
    out = np.zeros(P.shape[:2] + V.shape[-1:])
    for b in range(P.shape[0]):
        for q in range(P.shape[1]):
            for j in range(P.shape[2]):
                out[b, q] += P[b, q, j] * V[b, j]
    return out


def attention_backward(Q, K, V, P, dout):
    """(dQ, dK, dV) of out = P V, P = softmax(Q K^T / sqrt(d_k)), query by
    query through the softmax's full Jacobian diag(p) - p p^T."""
    Q, K, V, P, dout = (np.asarray(a, dtype=np.float64) for a in (Q, K, V, P, dout))
    scale = 1.0 / math.sqrt(Q.shape[-1])
    dQ, dK, dV = np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)
    for b in range(Q.shape[0]):
        for q in range(Q.shape[1]):
            p, g = P[b, q], dout[b, q]
            dV[b] += np.outer(p, g)  # out[q] = sum_j p_j V[j]
            dp = V[b] @ g  # d out[q] / d p_j = V[j]
            ds = (np.diag(p) - np.outer(p, p)) @ dp
            dQ[b, q] = scale * (ds @ K[b])
            dK[b] += scale * np.outer(ds, Q[b, q])
    return dQ, dK, dV


def _row_statistics(row):
    """Mean and biased variance (divide by n) of one row, with math.fsum."""
    n = len(row)
    mu = math.fsum(row) / n
    return mu, math.fsum((v - mu) ** 2 for v in row) / n


def layernorm(x, gamma, beta, eps):
    """gamma * (x - mu) / sqrt(var + eps) + beta, one row at a time."""
    rows, shape = _rows(x)
    gamma, beta = np.asarray(gamma, dtype=np.float64), np.asarray(beta, dtype=np.float64)
    out = np.empty_like(rows)
    for r, row in enumerate(rows):
        mu, var = _row_statistics(row)
        out[r] = [g * (v - mu) / math.sqrt(var + eps) + c for v, g, c in zip(row, gamma, beta)]
    return out.reshape(shape)


def layernorm_backward(x, gamma, beta, eps, dy):
    """(dx, dgamma, dbeta) of the layer norm, one row at a time through the
    full Jacobian of x_hat = (x - mu) / s, s = sqrt(var + eps):
    d x_hat_i / d x_j = (delta_ij - 1/n) / s - (x_i - mu)(x_j - mu) / (n s^3)."""
    rows, shape = _rows(x)
    dy_rows, _ = _rows(dy)
    gamma = np.asarray(gamma, dtype=np.float64)
    n = rows.shape[1]
    dx = np.empty_like(rows)
    dgamma, dbeta = np.zeros(n), np.zeros(n)
    for r, (row, d) in enumerate(zip(rows, dy_rows)):
        mu, var = _row_statistics(row)
        s = math.sqrt(var + eps)
        c = row - mu
        jacobian = (np.eye(n) - 1.0 / n) / s - np.outer(c, c) / (n * s**3)
        dx[r] = jacobian.T @ (d * gamma)
        dgamma += d * c / s
        dbeta += d
    return dx.reshape(shape), dgamma, dbeta


def positional_encoding(max_len, d_model):
    """The sinusoidal table, entry by entry: feature j of pair i (2i = j - j % 2)
    is sin(pos / 10000^(2i / d_model)) when j is even, cos(...) when odd."""
    table = np.empty((max_len, d_model))
    for pos in range(max_len):
        for j in range(d_model):
            angle = pos / 10000.0 ** ((j - j % 2) / d_model)
            table[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return table


def top_p(probs, p):
    """Nucleus of each row: walk the tokens from most to least probable,
    keeping each while the mass already kept is < p; renormalise the kept."""
    rows, shape = _rows(probs)
    out = np.zeros_like(rows)
    for r, row in enumerate(rows):
        kept, mass = [], 0.0
        for j in sorted(range(len(row)), key=lambda j: -row[j]):
            if mass >= p:
                break
            kept.append(j)
            mass = math.fsum(row[k] for k in kept)
        for j in kept:
            out[r, j] = row[j] / mass
    return out.reshape(shape)

"""Scaled dot-product attention (paper §3.2.1)."""

import math

from minitrans.core import checks
from minitrans.layers.module import Module
from minitrans.ops.softmax import attention_softmax, attention_softmax_backward


class ScaledDotProductAttention(Module):
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + M) V.

    Every query is compared with every key by a dot product; the scores,
    divided by sqrt(d_k) so that their variance does not grow with d_k, become
    weights by a softmax over the keys, and the output is the weighted sum of
    the values. The mask M is 0 where a query may attend and -inf where it may
    not (a later position in the decoder, a padding key): those weights are
    exactly 0. A query whose every key is masked gets a zero output and zero
    gradients.

    Backward, with S the scaled scores and P = softmax(S):
        dV = P^T dout
        dP = dout V^T
        dS = P * (dP - rowsum(dP * P))
        dQ = dS K / sqrt(d_k),   dK = dS^T Q / sqrt(d_k)

    ``groups``: Q may stack the queries of several heads that share one K
    and V (grouped-query attention, ``layers.grouped``): (..., groups *
    T_q, d_k), head after head. Nothing changes but the mask, which then
    broadcasts to (..., groups, T_q, T_k), so that each head's rows meet
    their own mask; ``attention_weights`` gives each head's weights apart,
    (B, kv_heads * groups, T_q, T_k) for (B, kv_heads, groups * T_q, d_k)
    queries.

    Inputs:
        Q: (..., T_q, d_k)
        K: (..., T_k, d_k)
        V: (..., T_k, d_v)
        mask: optional boolean array, True = may attend, broadcastable to
              (..., T_q, T_k)
    Returns:
        out: (..., T_q, d_v)
    ``backward(dout)`` returns (dQ, dK, dV). The weights P of the last forward
    are kept in ``attention_weights`` for plotting.
    """

    def forward(self, Q, K, V, mask=None, groups=1):
        self._check_inputs(Q, K, V, groups)
        scale = 1.0 / math.sqrt(Q.shape[-1])  # a Python float keeps float32
        scores = Q @ K.swapaxes(-1, -2)  # (..., T_q, T_k), scaled by the softmax
        if groups > 1:  # each head's rows apart, for its mask: (..., groups, T_q / groups, T_k)
            scores = scores.reshape(*scores.shape[:-2], groups, -1, scores.shape[-1])
        if mask is not None:
            checks.check_mask("mask", mask, scores.shape)
        # masked_softmax(scale * scores, mask); the fast version may write over the scores
        P = attention_softmax(scores, mask, scale)
        P = P.reshape(*Q.shape[:-1], K.shape[-2])  # rows stacked
        self.cache = (Q, K, V, P, scale, groups)
        return P @ V

    def backward(self, dout):
        Q, K, V, P, scale, _ = self.saved()
        checks.check_same_shape("dout", dout, (*P.shape[:-1], V.shape[-1]))
        dV = P.swapaxes(-1, -2) @ dout  # P^T dout
        dP = dout @ V.swapaxes(-1, -2)
        # masked entries have P = 0, so dS = 0; scaled once, rather than dQ and dK
        dS = attention_softmax_backward(P, dP, scale)
        dQ = dS @ K
        dK = dS.swapaxes(-1, -2) @ Q  # dS^T Q
        return dQ, dK, dV

    @property
    def attention_weights(self):
        """P = softmax(Q K^T / sqrt(d_k) + M) of the last forward."""
        if self.cache is None:
            raise RuntimeError("attention_weights: run forward() first")
        P, groups = self.cache[3], self.cache[5]
        if groups == 1:
            return P
        return P.reshape(*P.shape[:-3], P.shape[-3] * groups, P.shape[-2] // groups, P.shape[-1])

    @staticmethod
    def _check_inputs(Q, K, V, groups):
        checks.check_array("Q", Q, min_ndim=2, floating=True)
        checks.check_positive_int("groups", groups)
        if Q.shape[-2] % groups:
            raise ValueError(f"groups: expected a divisor of the {Q.shape[-2]} rows of Q, "
                             f"got groups={groups}")
        checks.check_array("K", K, ndim=Q.ndim, dtype=Q.dtype)
        checks.check_array("V", V, ndim=Q.ndim, dtype=Q.dtype)
        if K.shape[-1] != Q.shape[-1]:
            raise ValueError(
                f"K: expected last dimension d_k={Q.shape[-1]} (as Q), got shape {tuple(K.shape)}"
            )
        if V.shape[-2] != K.shape[-2]:
            raise ValueError(
                f"V: expected {K.shape[-2]} positions (as K), got shape {tuple(V.shape)}"
            )
        if Q.shape[:-2] != K.shape[:-2] or Q.shape[:-2] != V.shape[:-2]:
            raise ValueError(
                f"Q, K, V: expected the same leading (batch, head) axes, got shapes "
                f"{tuple(Q.shape)}, {tuple(K.shape)}, {tuple(V.shape)}"
            )
        for name, value in (("Q", Q), ("K", K), ("V", V)):
            checks.check_nonempty(name, value)
            checks.check_finite(name, value)

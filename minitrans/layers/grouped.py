"""Grouped-query attention (Ainslie et al., 2023) computed two ways, a
kernel pair (``minitrans.core.kernels``) with the same numbers up to
rounding: each key/value head repeated for the g query heads of its group,
or the group's g query heads stacked against their one key/value head.

Both take the MultiHeadAttention ``layer`` (its ``attention`` computes the
heads and keeps what its backward needs, its ``kv_heads`` says how many
key/value heads there are), the queries Q (B, h, T_q, d_k), the key/value
heads K, V (B, kv_heads, T_k, d_k) and the mask (None, or broadcastable to
(B, h, T_q, T_k)). Each returns the heads (B, h, T_q, d_k) and its
backward: the function that takes (layer, dheads) to dQ (B, h, T_q, d_k)
and dK, dV (B, kv_heads, T_k, d_k), each key/value head's gradient summed
over the g = h / kv_heads query heads that read it.
"""

from minitrans.core import kernels


def grouped_attention_reference(layer, Q, K, V, mask):
    """Hugging Face's ``repeat_kv``: K and V repeated g times, (B, h, T_k,
    d_k), then the attention of h heads, as in the paper. Its backward adds
    up the g copies' gradients (``layer.sum_groups``)."""
    heads = layer.attention.forward(Q, layer.repeat_kv(K), layer.repeat_kv(V), mask=mask)
    return heads, repeated_heads_backward


def repeated_heads_backward(layer, dheads):
    """dQ, and dK, dV of the repeated heads summed over each group."""
    dQ, dK, dV = layer.attention.backward(dheads)
    return dQ, layer.sum_groups(dK), layer.sum_groups(dV)


def grouped_attention_fast(layer, Q, K, V, mask):
    """The reference's numbers without copying K and V: the queries of a
    group's g heads stacked as g T_q rows, (B, kv_heads, g T_q, d_k), meet
    their key/value head in one product. The backward needs no sum of its
    own: dK = dS^T Q and dV = P^T dout run over all g T_q rows, which adds
    up the group's gradients inside the products. Timed against the
    reference by ``python benchmarks/kernels.py``."""
    batch, heads, length_q, d_k = Q.shape
    group = heads // layer.kv_heads
    stacked = Q.reshape(batch, layer.kv_heads, group * length_q, d_k)  # query head i: group i // g
    out = layer.attention.forward(stacked, K, V, mask=_by_group(mask, layer.kv_heads, group),
                                  groups=group)
    return out.reshape(Q.shape), stacked_heads_backward


def stacked_heads_backward(layer, dheads):
    """dQ unstacked to (B, h, T_q, d_k); dK and dV as attention gives them."""
    batch, _, _, d_k = dheads.shape
    dQ, dK, dV = layer.attention.backward(dheads.reshape(batch, layer.kv_heads, -1, d_k))
    return dQ.reshape(dheads.shape), dK, dV


def _by_group(mask, kv_heads, group):
    """A mask of the (B, h, T_q, T_k) heads for the stacked ones, seen as
    (B, kv_heads, g, T_q, T_k): a view, never a copy."""
    if mask is None or mask.ndim < 4 or group == 1:
        return mask  # no head axis: the same for every head
    if mask.shape[-3] == 1:  # one mask for every head
        return mask[..., None, :, :]
    return mask.reshape(*mask.shape[:-3], kv_heads, group, *mask.shape[-2:])


grouped_attention = kernels.pair(grouped_attention_reference, grouped_attention_fast)

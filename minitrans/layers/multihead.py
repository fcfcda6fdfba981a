"""Multi-head attention (paper §3.2.2)."""

from minitrans.core import backend, checks
from minitrans.layers.attention import ScaledDotProductAttention
from minitrans.layers.grouped import grouped_attention
from minitrans.layers.linear import Linear
from minitrans.layers.module import Module
from minitrans.layers.rotary import RotaryEmbedding


class MultiHeadAttention(Module):
    """MultiHead(x, memory) = Concat(head_1, ..., head_h) W_O,
    head_i = Attention(x W_Q^i, memory W_K^i, memory W_V^i)   (paper §3.2.2).

    Self-attention: ``forward(x, mask=...)``, memory is x itself.
    Cross-attention: ``forward(x, memory, mask=...)``, queries from the
    decoder's x, keys and values from the encoder output ``memory``.

    Forward, as Figure 2 draws it: four ``Linear`` layers and h heads.
        Q = x W_Q + b_Q,   K = memory W_K,   V = memory W_V + b_V
        split:  (B, T, d_model) -> (B, h, T, d_k), d_k = d_model / h: head i
                takes columns i*d_k .. (i+1)*d_k, so W_Q^i is that block of W_Q
        heads = Attention(Q, K, V, mask)                   (B, h, T_q, d_k)
        merge:  (B, h, T_q, d_k) -> (B, T_q, d_model), the heads side by side
        out = merge(heads) W_O + b_O
    Backward, in reverse:
        dconcat = W_O's backward of dout, split into heads
        dQ, dK, dV = Attention's backward, each merged back to (B, T, d_model)
        dx = dQ W_Q^T                                (and dW_Q, db_Q)
        dmemory = dK W_K^T + dV W_V^T                (and dW_K, dW_V, db_V)
    Self-attention reads x three times, so ``backward`` returns the sum of the
    three uses, dx + dmemory; cross-attention returns (dx, dmemory).

    Four separate projections, not one fused x [W_Q | W_K | W_V]: they are
    what Figure 2 draws and what a student can check against the equations.
    The key projection has no bias: a key bias b adds q . b to every score of
    a query's row, the same constant for every key, and softmax is blind to
    constants added to a whole row; its gradient would always be exactly
    zero, a parameter that never learns.

    Parameters (Xavier-uniform weights, zero biases), the children
    W_Q, W_K, W_V, W_O, each a Linear(d_model, d_model): ``W_Q.W`` is W_Q,
    ``W_Q.b`` is b_Q; ``W_K`` has no ``b``.

    Variants beyond the paper, each the paper's attention by default:
    * ``d_k``: the width of a head apart from d_model (Table 3, rows A and
      B): W_Q, W_K, W_V are then Linear(d_model, h * d_k), W_O Linear(h *
      d_k, d_model).
    * ``bias=False``: no b_Q, b_V and b_O either, as Llama.
    * ``kv_heads``: grouped-query attention, groups of h / kv_heads query
      heads sharing one key/value head (1: multi-query attention), which
      shrinks the key/value cache; lesson 22, section 4, and
      ``layers.grouped``.
    * ``rope=True``: rotary positions, the queries and keys of self-attention
      rotated by their positions offset .. offset + T - 1; lesson 22,
      section 2, and ``layers.rotary``.

    Inputs:
        x:      (B, T_q, d_model)
        memory: (B, T_k, d_model), optional
        mask:   optional boolean, True = may attend, broadcastable to
                (B, T_q, T_k); a rank-4 mask may also broadcast over heads,
                (B, h, T_q, T_k)
        offset: the position of x's first row, for rotary positions
    Returns:
        out: (B, T_q, d_model)
    """

    def __init__(self, d_model, h, rng=None, d_k=None, *, kv_heads=None, bias=True, rope=False,
                 rope_base=10000.0, max_len=5000):
        super().__init__()
        checks.check_positive_int("d_model", d_model)
        checks.check_positive_int("h", h)
        checks.check_int("d_k", d_k, low=1, allow_none=True)
        if d_k is None and d_model % h != 0:
            raise ValueError(
                f"h: d_model={d_model} must be divisible by the number of heads, got h={h}"
            )
        check_kv_heads(kv_heads, h)
        checks.check_bool("bias", bias)
        checks.check_bool("rope", rope)
        self.d_model, self.h = d_model, h
        self.d_k = d_model // h if d_k is None else d_k
        self.kv_heads = h if kv_heads is None else kv_heads
        width = h * self.d_k  # the heads side by side: d_model unless d_k is given
        kv_width = self.kv_heads * self.d_k
        rng = backend.host_rng(rng)
        self.W_Q = Linear(d_model, width, bias=bias, rng=rng)
        self.W_K = Linear(d_model, kv_width, bias=False, rng=rng)  # softmax ignores a key bias
        self.W_V = Linear(d_model, kv_width, bias=bias, rng=rng)
        self.W_O = Linear(width, d_model, bias=bias, rng=rng)
        self.rotary = RotaryEmbedding(self.d_k, max_len, rope_base) if rope else None
        self.attention = ScaledDotProductAttention()

    def split_heads(self, x, heads=None):
        """(B, T, heads * d_k) -> (B, heads, T, d_k), a view; heads: h by default."""
        heads = self.h if heads is None else heads
        return x.reshape(x.shape[0], x.shape[1], heads, self.d_k).swapaxes(1, 2)

    def merge_heads(self, heads):
        """(B, heads, T, d_k) -> (B, T, heads * d_k), the heads side by side."""
        batch, count, length, _ = heads.shape
        return heads.swapaxes(1, 2).reshape(batch, length, count * self.d_k)

    def forward(self, x, memory=None, mask=None, offset=0, add_bias=True):
        """``add_bias=False``: out without b_O, for an ``AddNorm`` that adds it
        inside its own kernel (``output_bias``); the backward is the same."""
        self._check_input("x", x, x)
        checks.check_int("offset", offset, low=0)
        is_self_attention = memory is None
        if is_self_attention:
            memory = x
        elif self.rotary is not None:
            raise ValueError("memory: rotary positions are for self-attention, expected None, "
                             f"got an array of shape {tuple(memory.shape)}")
        else:
            self._check_input("memory", memory, x)
        with checks.inputs_checked():  # the parts below need not check x and memory again
            Q = self._queries(x, offset)  # (B, h, T_q, d_k)
            K, V = self.keys_values(memory, offset)  # (B, kv_heads, T_k, d_k)
            mask = self._heads_mask(mask, Q, K)
            if self.kv_heads == self.h:  # multi-head attention, as in the paper
                heads, grouped_backward = self.attention.forward(Q, K, V, mask=mask), None
            else:  # K, V repeated for each group (or its queries stacked): layers.grouped
                heads, grouped_backward = grouped_attention(self, Q, K, V, mask)
            out = self.W_O.forward(self.merge_heads(heads), add_bias)  # (B, T_q, d_model)
        self.cache = is_self_attention, offset, grouped_backward
        return out

    def output_bias(self):
        """b_O, which ``forward(..., add_bias=False)`` leaves to the caller
        (None without biases)."""
        return self.W_O.params.get("b")

    # AddNorm passes backward the residual's gradient as ``add_to``, to add dx
    # into, on a device only: there the first product of dx adds into it
    # (Linear.backward's add_to), a launch saved; the sum of three or four
    # terms then runs in another order than dx + add_to, so NumPy keeps that
    residual_add_to = "device"

    def backward(self, dout, add_to=None, memory_add_to=None):
        """dx (self-attention) or (dx, dmemory); given ``add_to`` (an array
        of x's shape), dx is added into it and ``add_to`` returned in its place.
        Cross-attention given ``memory_add_to`` (memory's gradient so far, from
        other layers that read it) adds dmemory into it, inside W_K's product,
        and returns it as dmemory: there dmemory_so_far + dK W_K^T + dV W_V^T,
        in that order."""
        is_self_attention, offset, grouped_backward = self.saved()
        dheads = self.split_heads(self.W_O.backward(dout))  # (B, h, T_q, d_k)
        if grouped_backward is None:
            dQ, dK, dV = self.attention.backward(dheads)
        else:  # dK, dV (B, kv_heads, T_k, d_k): each the sum over its group
            dQ, dK, dV = grouped_backward(self, dheads)
        if self.rotary is not None:  # undo the rotations: R^T, the rotation by -angle
            with checks.inputs_checked():  # gradients made here: no pass to check them
                dQ = self.rotary.rotate(dQ, offset, inverse=True)
                dK = self.rotary.rotate(dK, offset, inverse=True)
        # (B, T_k, d_model); for self-attention the sum of dx starts in add_to, if
        # given, for cross-attention the sum of dmemory in memory_add_to
        dmemory = self.W_K.backward(self.merge_heads(dK),
                                    add_to=add_to if is_self_attention else memory_add_to)
        self.W_V.backward(self.merge_heads(dV), add_to=dmemory)  # dmemory += dV W_V^T
        if is_self_attention:  # x was the queries, the keys and the values:
            # dx = dQ W_Q^T + dmemory, added into dmemory (a sum of two, in either order)
            return self.W_Q.backward(self.merge_heads(dQ), add_to=dmemory)
        return self.W_Q.backward(self.merge_heads(dQ), add_to=add_to), dmemory  # (B, T_q, d_model)

    def repeat_kv(self, heads):
        """(B, kv_heads, T, d_k) -> (B, h, T, d_k): each key/value head
        repeated for the g = h / kv_heads query heads of its group (the
        same array when g is 1)."""
        group = self.h // self.kv_heads
        return heads if group == 1 else backend.get_xp().repeat(heads, group, axis=1)

    def sum_groups(self, dheads):
        """The backward of ``repeat_kv``: (B, h, T, d_k) -> (B, kv_heads, T,
        d_k), the gradients of each group's g copies added up."""
        group = self.h // self.kv_heads
        if group == 1:
            return dheads
        batch, _, length, d_k = dheads.shape
        return dheads.reshape(batch, self.kv_heads, group, length, d_k).sum(axis=2)

    # ------------------------------------------------ decoding, no backward

    def keys_values(self, memory, offset=0):
        """K and V heads of ``memory``, each (B, kv_heads, T_k, d_k), the keys
        rotated to positions offset .. offset + T_k - 1 with rotary positions.

        For decoding: cross-attention computes them once per source sentence,
        self-attention computes them for each new position and appends them to
        a ``KVCache``, instead of recomputing the whole prefix every step.
        """
        K = self.split_heads(self.W_K.forward(memory), self.kv_heads)
        if self.rotary is not None:
            K = self.rotary.rotate(K, offset)
        return K, self.split_heads(self.W_V.forward(memory), self.kv_heads)

    def attend(self, x, K, V, mask=None, offset=0, add_bias=True):
        """Attention of the queries of ``x`` (B, T_q, d_model), at positions
        offset .. offset + T_q - 1, over given K, V (B, kv_heads, T_k, d_k).

        The inference half of ``forward`` (its result is not for ``backward``,
        ``add_bias`` is forward's); the weights are still available in
        ``attention.attention_weights``.
        """
        Q = self._queries(x, offset)
        mask = self._heads_mask(mask, Q, K)
        if self.kv_heads == self.h:
            heads = self.attention.forward(Q, K, V, mask=mask)
        else:  # each key/value head of the cache read in place, not copied g times
            heads, _ = grouped_attention.fast(self, Q, K, V, mask)
        return self.W_O.forward(self.merge_heads(heads), add_bias)

    def _queries(self, x, offset):
        """Q = x W_Q + b_Q as heads (B, h, T_q, d_k), rotated with rotary positions."""
        Q = self.split_heads(self.W_Q.forward(x))
        return Q if self.rotary is None else self.rotary.rotate(Q, offset)

    # ------------------------------------------------------------- checks

    def _check_input(self, name, value, x):
        dtype = self.W_Q.params["W"].dtype
        checks.check_array(name, value, ndim=3, last_dim=self.d_model, dtype=dtype)
        if value.shape[0] != x.shape[0]:
            raise ValueError(
                f"{name}: expected batch size {x.shape[0]} (as x), got shape {tuple(value.shape)}"
            )
        checks.check_nonempty(name, value)
        checks.check_finite(name, value)

    def _heads_mask(self, mask, Q, K):
        """Give a (B, T_q, T_k)-style mask a head axis: (B, 1, T_q, T_k)."""
        if mask is None:
            return None
        batch, length_q, length_k = Q.shape[0], Q.shape[2], K.shape[2]
        if getattr(mask, "ndim", 0) == 4:
            checks.check_mask("mask", mask, (batch, self.h, length_q, length_k))
            return mask
        checks.check_mask("mask", mask, (batch, length_q, length_k))
        return mask[..., None, :, :] if mask.ndim == 3 else mask


def check_kv_heads(kv_heads, h):
    """None, or a positive divisor of h: every group of query heads the same size."""
    checks.check_int("kv_heads", kv_heads, low=1, allow_none=True)
    if kv_heads is not None and h % kv_heads:
        raise ValueError(f"kv_heads: expected a divisor of the number of heads h={h}, "
                         f"got kv_heads={kv_heads}")

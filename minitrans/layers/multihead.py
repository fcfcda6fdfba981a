"""Multi-head attention (paper §3.2.2)."""

from minitrans.core import backend, checks
from minitrans.layers.attention import ScaledDotProductAttention
from minitrans.layers.linear import Linear
from minitrans.layers.module import Module


class MultiHeadAttention(Module):
    """MultiHead(x, memory) = Concat(head_1, ..., head_h) W_O,
    head_i = Attention(x W_Q^i, memory W_K^i, memory W_V^i).

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
    The fused product gained little of a training step, the products being
    large already, too little to hide the paper's structure: the step times
    before and after the split, ``python benchmarks/vs_pytorch.py
    --no-decoding`` on both commits, are in benchmarks/README.md ("Before and
    after the layers were rebuilt").

    The key projection has no bias: a key bias b adds q . b to every score of
    a query's row, the same constant for every key, and softmax is blind to
    constants added to a whole row. Its gradient would always be exactly
    zero: a parameter that never learns.

    Parameters (Xavier-uniform weights, zero biases), the children
    W_Q, W_K, W_V, W_O, each a Linear(d_model, d_model): ``W_Q.W`` is W_Q,
    ``W_Q.b`` is b_Q; ``W_K`` has no ``b``.

    ``d_k`` sets the width of a head apart from d_model (Table 3, rows A and
    B vary it): W_Q, W_K, W_V are then Linear(d_model, h * d_k) and W_O is
    Linear(h * d_k, d_model). By default d_k = d_model / h, as in the paper.

    Inputs:
        x:      (B, T_q, d_model)
        memory: (B, T_k, d_model), optional
        mask:   optional boolean, True = may attend, broadcastable to
                (B, T_q, T_k); a rank-4 mask may also broadcast over heads,
                (B, h, T_q, T_k)
    Returns:
        out: (B, T_q, d_model)
    """

    def __init__(self, d_model, h, rng=None, d_k=None):
        super().__init__()
        checks.check_positive_int("d_model", d_model)
        checks.check_positive_int("h", h)
        checks.check_int("d_k", d_k, low=1, allow_none=True)
        if d_k is None and d_model % h != 0:
            raise ValueError(
                f"h: d_model={d_model} must be divisible by the number of heads, got h={h}"
            )
        self.d_model, self.h = d_model, h
        self.d_k = d_model // h if d_k is None else d_k
        width = h * self.d_k  # the heads side by side: d_model unless d_k is given
        rng = backend.host_rng(rng)
        self.W_Q = Linear(d_model, width, rng=rng)
        self.W_K = Linear(d_model, width, bias=False, rng=rng)  # softmax ignores a key bias
        self.W_V = Linear(d_model, width, rng=rng)
        self.W_O = Linear(width, d_model, rng=rng)
        self.attention = ScaledDotProductAttention()

    def split_heads(self, x):
        """(B, T, d_model) -> (B, h, T, d_k), a view."""
        return x.reshape(x.shape[0], x.shape[1], self.h, self.d_k).swapaxes(1, 2)

    def merge_heads(self, heads):
        """(B, h, T, d_k) -> (B, T, h * d_k), the heads side by side."""
        batch, _, length, _ = heads.shape
        return heads.swapaxes(1, 2).reshape(batch, length, self.h * self.d_k)

    def forward(self, x, memory=None, mask=None):
        self._check_input("x", x, x)
        is_self_attention = memory is None
        if is_self_attention:
            memory = x
        else:
            self._check_input("memory", memory, x)
        with checks.inputs_checked():  # the parts below need not check x and memory again
            Q = self.split_heads(self.W_Q.forward(x))  # (B, h, T_q, d_k)
            K = self.split_heads(self.W_K.forward(memory))  # (B, h, T_k, d_k)
            V = self.split_heads(self.W_V.forward(memory))  # (B, h, T_k, d_k)
            heads = self.attention.forward(Q, K, V, mask=self._heads_mask(mask, Q, K))
            out = self.W_O.forward(self.merge_heads(heads))  # (B, T_q, d_model)
        self.cache = is_self_attention
        return out

    def backward(self, dout):
        is_self_attention = self.saved()
        dheads = self.split_heads(self.W_O.backward(dout))  # (B, h, T_q, d_k)
        dQ, dK, dV = self.attention.backward(dheads)
        dx = self.W_Q.backward(self.merge_heads(dQ))  # (B, T_q, d_model)
        dmemory = self.W_K.backward(self.merge_heads(dK))  # (B, T_k, d_model)
        dmemory += self.W_V.backward(self.merge_heads(dV))
        if is_self_attention:
            dx += dmemory  # x was the queries, the keys and the values
            return dx
        return dx, dmemory

    # ------------------------------------------------ decoding, no backward

    def keys_values(self, memory):
        """K and V heads of ``memory``, each (B, h, T_k, d_k).

        For decoding: cross-attention computes them once per source sentence,
        self-attention computes them for each new position and appends them to
        a ``KVCache``, instead of recomputing the whole prefix every step.
        """
        K = self.split_heads(self.W_K.forward(memory))
        return K, self.split_heads(self.W_V.forward(memory))

    def attend(self, x, K, V, mask=None):
        """Attention of the queries of ``x`` (B, T_q, d_model) over given K, V.

        The inference half of ``forward`` (its result is not for ``backward``);
        the weights are still available in ``attention.attention_weights``.
        """
        Q = self.split_heads(self.W_Q.forward(x))
        heads = self.attention.forward(Q, K, V, mask=self._heads_mask(mask, Q, K))
        return self.W_O.forward(self.merge_heads(heads))

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

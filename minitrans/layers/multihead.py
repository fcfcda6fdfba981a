"""Multi-head attention (paper §3.2.2)."""

from minitrans.core import backend, checks
from minitrans.layers import init
from minitrans.layers.attention import ScaledDotProductAttention
from minitrans.layers.module import Module
from minitrans.ops.sums import sum_leading


class MultiHeadAttention(Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O,
    head_i = Attention(Q W_Q^i, K W_K^i, V W_V^i).

    The h heads are computed together: one (d_model, d_model) projection,
    then a reshape of its output into h blocks of d_k = d_model / h features
    and a swap of axes, (B, T, d_model) -> (B, h, T, d_k). Attention then runs
    on all heads at once; the outputs are swapped back and concatenated.

    Self-attention: ``forward(x, mask=...)``, queries, keys and values all come
    from x; ``backward`` returns dx (the sum of its three uses).
    Cross-attention: ``forward(x, memory, mask=...)``, queries from x (the
    decoder), keys and values from memory (the encoder output); ``backward``
    returns (dx, dmemory).

    The projections that read the same input are computed together: in
    self-attention x W_Q, x W_K and x W_V are one product x [W_Q | W_K | W_V]
    with the three (d_model, d_model) weights side by side, (d_model,
    3 d_model); in cross-attention the keys and values of memory are one
    product with [W_K | W_V]. It is the same arithmetic as three separate
    products (the columns of the result are the three results side by side),
    but BLAS gets one large product instead of three smaller ones, and the
    backward one product for dx instead of three products and two sums:
        dx = [dQ | dK | dV] [W_Q | W_K | W_V]^T = dQ W_Q^T + dK W_K^T + dV W_V^T
    The weights stay three parameters; ``_project(x, "Q")`` is the plain
    one-matrix version, and a test checks that both agree.

    The query, value and output projections have a bias, as in PyTorch's
    ``nn.MultiheadAttention``. The key projection has none: a key bias b adds
    q . b to every score of a query's row, the same constant for every key,
    and softmax is blind to constants added to a whole row. Its gradient is
    always exactly zero, so it would be a parameter that never learns.

    Parameters (Xavier-uniform weights, zero biases):
        W_Q, W_K, W_V, W_O: (d_model, d_model)
        b_Q, b_V, b_O: (d_model,)

    Inputs:
        x:      (B, T_q, d_model)
        memory: (B, T_k, d_model), optional
        mask:   optional boolean, True = may attend, broadcastable to
                (B, T_q, T_k); a rank-4 mask may also broadcast over heads,
                (B, h, T_q, T_k)
    Returns:
        out: (B, T_q, d_model)
    """

    def __init__(self, d_model, h, rng=None):
        super().__init__()
        checks.check_positive_int("d_model", d_model)
        checks.check_positive_int("h", h)
        if d_model % h != 0:
            raise ValueError(
                f"h: d_model={d_model} must be divisible by the number of heads, got h={h}"
            )
        self.d_model, self.h, self.d_k = d_model, h, d_model // h
        rng = backend.host_rng(rng)
        for name in ("Q", "K", "V", "O"):
            self.add_param(f"W_{name}", init.xavier_uniform(rng, d_model, d_model))
            if name != "K":
                self.add_param(f"b_{name}", init.zeros((d_model,)))
        self.attention = ScaledDotProductAttention()

    # (B, T, d_model) <-> (B, h, T, d_k)
    def _split_heads(self, x_2d, batch):
        return x_2d.reshape(batch, -1, self.h, self.d_k).swapaxes(1, 2)

    def _merge_heads(self, heads):
        batch, _, length, _ = heads.shape
        return heads.swapaxes(1, 2).reshape(batch * length, self.d_model)

    def _project(self, x_2d, name):
        """x W + b for one of Q, K, V, O: the plain version."""
        y = x_2d @ self.params[f"W_{name}"]
        bias = self.params.get(f"b_{name}")
        if bias is not None:
            y += bias
        return y

    def _weights_side_by_side(self, names):
        """[W_Q | W_K | W_V] for names "QKV": (d_model, len(names) * d_model)."""
        return backend.get_xp().concatenate([self.params[f"W_{n}"] for n in names], axis=1)

    def _project_together(self, x_2d, names, weights=None):
        """x W + b for several of Q, K, V in one product; the results, each
        (N, d_model), are column blocks (views) of the one output.
        ``weights``: ``_weights_side_by_side(names)``, if already made."""
        d = self.d_model
        weights = self._weights_side_by_side(names) if weights is None else weights
        y = x_2d @ weights  # (N, len(names) * d)
        blocks = [y[:, i * d:(i + 1) * d] for i in range(len(names))]
        for name, block in zip(names, blocks):
            if f"b_{name}" in self.params:
                block += self.params[f"b_{name}"]  # in place, through the view
        return blocks

    def forward(self, x, memory=None, mask=None):
        dtype = self.params["W_Q"].dtype
        checks.check_array("x", x, ndim=3, last_dim=self.d_model, dtype=dtype)
        checks.check_nonempty("x", x)
        checks.check_finite("x", x)
        is_self_attention = memory is None
        if is_self_attention:
            memory = x
        else:
            checks.check_array("memory", memory, ndim=3, last_dim=self.d_model, dtype=dtype)
            if memory.shape[0] != x.shape[0]:
                raise ValueError(
                    f"memory: expected batch size {x.shape[0]} (as x), "
                    f"got shape {tuple(memory.shape)}"
                )
            checks.check_nonempty("memory", memory)
            checks.check_finite("memory", memory)
        batch, length_q, length_k = x.shape[0], x.shape[1], memory.shape[1]
        x_2d = x.reshape(-1, self.d_model)  # (B*T_q, d_model)
        memory_2d = memory.reshape(-1, self.d_model)  # (B*T_k, d_model)

        together = "QKV" if is_self_attention else "KV"  # the projections of one input
        weights = self._weights_side_by_side(together)  # kept for backward
        if is_self_attention:
            projected = self._project_together(x_2d, together, weights)
        else:
            projected = [
                self._project(x_2d, "Q"),
                *self._project_together(memory_2d, together, weights),
            ]
        Q, K, V = (self._split_heads(p, batch) for p in projected)  # (B, h, T, d_k) each
        mask = self._heads_mask(mask, (batch, length_q, length_k))
        # x and memory were checked above and the weights are finite, so the
        # attention layer need not check Q, K, V and the mask again
        heads = self.attention.forward(Q, K, V, mask=mask, check=False)  # (B, h, T_q, d_k)
        concat = self._merge_heads(heads)  # (B*T_q, d_model)
        out = self._project(concat, "O")
        self.cache = (x_2d, memory_2d, concat, batch, is_self_attention, weights)
        return out.reshape(batch, length_q, self.d_model)

    def backward(self, dout):
        x_2d, memory_2d, concat, batch, is_self_attention, weights = self.saved()
        checks.check_same_shape("dout", dout, (batch, x_2d.shape[0] // batch, self.d_model))
        dout_2d = dout.reshape(-1, self.d_model)
        dheads = self._split_heads(self._project_backward(concat, dout_2d, "O"), batch)

        # the heads' gradients of the projections made together are written
        # side by side into one array, ready for their one backward product
        if is_self_attention:
            dqkv = self._side_by_side_heads(batch, x_2d.shape[0] // batch, 3, x_2d.dtype)
            self.attention.backward(dheads, out=self._head_slots(dqkv))
            dx = self._project_together_backward(x_2d, dqkv, "QKV", weights)
            return dx.reshape(batch, -1, self.d_model)
        dkv = self._side_by_side_heads(batch, memory_2d.shape[0] // batch, 2, x_2d.dtype)
        dQ, _, _ = self.attention.backward(dheads, out=(None, *self._head_slots(dkv)))
        dx = self._project_backward(x_2d, self._merge_heads(dQ), "Q")
        dmemory = self._project_together_backward(memory_2d, dkv, "KV", weights)
        return dx.reshape(batch, -1, self.d_model), dmemory.reshape(batch, -1, self.d_model)

    def _side_by_side_heads(self, batch, length, k, dtype):
        """An empty (B, T, k, h, d_k) array: row n of its (B*T, k * d_model)
        reshape holds k projections' gradients at position n, side by side."""
        return backend.get_xp().empty((batch, length, k, self.h, self.d_k), dtype=dtype)

    @staticmethod
    def _head_slots(side_by_side):
        """The k (B, h, T, d_k) views of a (B, T, k, h, d_k) array, one per
        projection, for attention's backward to write into."""
        return [side_by_side[:, :, i].swapaxes(1, 2) for i in range(side_by_side.shape[2])]

    def _project_backward(self, x_2d, dy_2d, name):
        """Backward of y = x W + b: accumulate dW, db and return dx."""
        self.grads[f"W_{name}"] += x_2d.T @ dy_2d
        if f"b_{name}" in self.grads:
            self.grads[f"b_{name}"] += sum_leading(
                dy_2d
            )  # dy_2d.sum(axis=0), see minitrans.ops.sums
        return dy_2d @ self.params[f"W_{name}"].T

    def _project_together_backward(self, x_2d, side_by_side, names, weights):
        """Backward of ``_project_together``, from the heads' gradients side
        by side, (B, T, k, h, d_k) = (N, k * d_model): one product gives
        every dW and one gives dx."""
        d, k = self.d_model, len(names)
        dy = side_by_side.reshape(-1, k * d)
        dW = x_2d.T @ dy  # (d_model, k * d_model): the dW of each block side by side
        for i, name in enumerate(names):
            self.grads[f"W_{name}"] += dW[:, i * d:(i + 1) * d]
            if f"b_{name}" in self.grads:
                self.grads[f"b_{name}"] += sum_leading(dy[:, i * d:(i + 1) * d])
        return dy @ weights.T

    # ------------------------------------------------ decoding, no backward

    def keys_values(self, memory):
        """K and V heads of ``memory``, each (B, h, T_k, d_k).

        For decoding: cross-attention computes them once per source sentence,
        self-attention computes them for each new position and appends them to
        a ``KVCache``, instead of recomputing the whole prefix every step.
        """
        batch = memory.shape[0]
        K, V = self._project_together(memory.reshape(-1, self.d_model), "KV")
        return self._split_heads(K, batch), self._split_heads(V, batch)

    def attend(self, x, K, V, mask=None):
        """Attention of the queries of ``x`` (B, T_q, d_model) over given K, V.

        The inference half of ``forward``: nothing is kept for ``backward``,
        but the weights are still available in ``attention.attention_weights``.
        """
        batch, length_q = x.shape[0], x.shape[1]
        Q = self._split_heads(self._project(x.reshape(-1, self.d_model), "Q"), batch)
        mask = self._heads_mask(mask, (batch, length_q, K.shape[2]))
        heads = self.attention.forward(Q, K, V, mask=mask)
        return self._project(self._merge_heads(heads), "O").reshape(batch, length_q, self.d_model)

    def _heads_mask(self, mask, scores_shape):
        """Give a (B, T_q, T_k)-style mask a head axis: (B, 1, T_q, T_k)."""
        if mask is None:
            return None
        batch, length_q, length_k = scores_shape
        if getattr(mask, "ndim", 0) == 4:
            checks.check_mask("mask", mask, (batch, self.h, length_q, length_k))
            return mask
        checks.check_mask("mask", mask, scores_shape)
        return mask[..., None, :, :] if mask.ndim == 3 else mask

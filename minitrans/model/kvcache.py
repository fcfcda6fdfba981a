"""The key/value cache of incremental decoding."""

from minitrans.core import backend


class KVCache:
    """Keys and values of every position decoded so far, for one attention layer.

    Generating token t needs attention over positions 0..t. Without a cache
    the decoder recomputes the keys and values of the whole prefix at every
    step: O(t) work per layer per step for projections that have not changed.
    With it, each step projects only the new position and appends it here.

    The buffers are allocated once at their full length, so appending is a
    copy into place, not a reallocation; reordering the rows (beam search)
    copies the filled part into a second pair of buffers, made at the first
    reorder, which then trade places with the first.

    Shapes: K, V buffers (B, h, max_len, d_k); ``keys``/``values`` the filled
    part, (B, h, length, d_k). ``h`` counts the attention's key/value heads:
    its h, or its kv_heads with grouped-query attention, whose cache is
    h / kv_heads times smaller. With rotary positions the keys are
    stored rotated, each by its own absolute position.
    """

    def __init__(self, batch, h, d_k, max_len, dtype):
        xp = backend.get_xp()
        self.K = xp.zeros((batch, h, max_len, d_k), dtype=dtype)
        self.V = xp.zeros((batch, h, max_len, d_k), dtype=dtype)
        self.spare = None  # (K, V) buffers that reorder writes into
        self.length = 0

    def append(self, K_new, V_new):
        start, stop = self.length, self.length + K_new.shape[2]
        if stop > self.K.shape[2]:
            raise ValueError(f"KVCache: cannot hold {stop} positions, max_len is {self.K.shape[2]}")
        self.K[:, :, start:stop] = K_new
        self.V[:, :, start:stop] = V_new
        self.length = stop

    @property
    def keys(self):
        return self.K[:, :, : self.length]

    @property
    def values(self):
        return self.V[:, :, : self.length]

    def reorder(self, index):
        """Keep the rows ``index`` (B_new,) of the batch: beam search reorders
        its hypotheses after every step. With as many rows as before, only
        the filled positions move, into the spare buffers: no allocation."""
        if index.shape[0] != self.K.shape[0]:  # a new batch size: new buffers, once
            self.K, self.V, self.spare = self.K[index], self.V[index], None
            return
        xp = backend.get_xp()
        if self.spare is None:
            self.spare = xp.empty_like(self.K), xp.empty_like(self.V)
        K_out, V_out = self.spare
        filled = slice(0, self.length)
        xp.take(self.K[:, :, filled], index, axis=0, out=K_out[:, :, filled])
        xp.take(self.V[:, :, filled], index, axis=0, out=V_out[:, :, filled])
        self.spare = self.K, self.V
        self.K, self.V = K_out, V_out


class DecodingState:
    """Everything incremental decoding carries from one step to the next.

    caches:      one KVCache per decoder layer (self-attention)
    memory_kvs:  per decoder layer, the cross-attention (K, V) of the encoder
                 output, computed once; None for a decoder-only model
    memory_mask: (B, 1, T_src) padding mask of the source, or None
    position:    how many target positions have been decoded
    """

    def __init__(self, caches, memory_kvs=None, memory_mask=None):
        self.caches = caches
        self.memory_kvs = memory_kvs
        self.memory_mask = memory_mask
        self.position = 0

    def reorder(self, index, memory=True):
        """Keep (and repeat) batch rows ``index``, for beam search.

        memory=False leaves the encoder's keys, values and mask as they are:
        right when each kept row comes from the same source row as the row
        it replaces, as a beam's parent always does. That saves gathering
        the whole encoder output again at every step."""
        for cache in self.caches:
            cache.reorder(index)
        if not memory:
            return
        if self.memory_kvs is not None:
            self.memory_kvs = [(K[index], V[index]) for K, V in self.memory_kvs]
        if self.memory_mask is not None:
            self.memory_mask = self.memory_mask[index]

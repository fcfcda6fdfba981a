"""Positional encodings (paper §3.5): the sinusoidal table, and the learned
table the paper compared it with (Table 3, row E) and GPT-2 uses. The third
choice of POSITIONS, "rope", adds nothing to the embeddings: it rotates the
queries and keys inside attention (``layers.rotary``)."""

import math

from minitrans.core import backend, checks, fusion
from minitrans.layers import init
from minitrans.layers.module import Module

POSITIONS = ("sinusoidal", "learned", "rope")


def sinusoidal_table(max_len, d_model):
    """The (max_len, d_model) table of the paper's positional encodings.

        PE(pos, 2i)     = sin(pos / 10000^(2i / d_model))
        PE(pos, 2i + 1) = cos(pos / 10000^(2i / d_model))

    Both members of a pair use the same exponent 2i / d_model, so each pair is
    one rotation frequency. Feature j uses 2i = j - (j mod 2); an odd d_model
    simply ends with an unpaired sine. Computed in float64, then cast.
    """
    xp = backend.get_xp()
    position = xp.arange(max_len, dtype="float64")[:, None]  # (max_len, 1)
    feature = xp.arange(d_model)
    two_i = (feature - feature % 2).astype("float64")  # 0, 0, 2, 2, 4, 4, ...
    angle = position / 10000.0 ** (two_i / d_model)  # (max_len, d_model)
    table = xp.where(feature % 2 == 0, xp.sin(angle), xp.cos(angle))
    return table.astype(backend.get_dtype())


class PositionalEncoding(Module):
    """Adds PE[position] to each vector of a sequence; no trainable weights.

    Forward:   y[b, t] = x[b, t] + PE[offset + t]
    Backward:  dx = dy   (adding a constant passes the gradient through)

    ``offset`` shifts the positions, for decoding one token at a time.
    ``x_scale``: see ``scale_and_add``.

    Inputs:
        x: (B, T, d_model), T + offset <= max_len
    Returns:
        y: (B, T, d_model)
    """

    def __init__(self, d_model, max_len=5000):
        super().__init__()
        checks.check_positive_int("d_model", d_model)
        checks.check_positive_int("max_len", max_len)
        self.d_model, self.max_len = d_model, max_len
        self.buffers["PE"] = sinusoidal_table(max_len, d_model)

    def forward(self, x, offset=0, x_scale=None):
        _check_positions(x, offset, self.d_model, self.max_len, self.buffers["PE"].dtype)
        self.cache = x.shape
        return add_positions(x, self.buffers["PE"][offset:offset + x.shape[-2]], x_scale)

    def backward(self, dy):
        x_shape = self.saved()
        checks.check_same_shape("dy", dy, x_shape)
        return dy


class PositionalEmbedding(Module):
    """Adds a learned vector P[position] to each vector of a sequence.

    The paper tried learned positional embeddings (after ConvS2S) and found
    "nearly identical results" (Table 3, row E); it kept the sinusoids, which
    may extend to lengths unseen in training. GPT-2 learns them.

    Forward:   y[b, t] = x[b, t] + P[offset + t]
    Backward:  dx = dy,   dP[offset + t] += sum over b of dy[b, t]

    P starts as N(0, 1/2): the mean square of the sinusoidal table's entries
    (sin^2 and cos^2 average 1/2), so both start at the same scale.

    ``x_scale``: see ``scale_and_add``.

    Parameters:
        P: (max_len, d_model)
    Inputs:
        x: (B, T, d_model), T + offset <= max_len
    Returns:
        y: (B, T, d_model)
    """

    def __init__(self, d_model, max_len=512, rng=None):
        super().__init__()
        checks.check_positive_int("d_model", d_model)
        checks.check_positive_int("max_len", max_len)
        self.d_model, self.max_len = d_model, max_len
        rng = backend.host_rng(rng)
        self.add_param("P", init.normal(rng, (max_len, d_model), math.sqrt(0.5)))

    def forward(self, x, offset=0, x_scale=None):
        _check_positions(x, offset, self.d_model, self.max_len, self.params["P"].dtype)
        self.cache = x.shape, offset
        return add_positions(x, self.params["P"][offset:offset + x.shape[-2]], x_scale)

    def backward(self, dy):
        x_shape, offset = self.saved()
        checks.check_same_shape("dy", dy, x_shape)
        rows = dy.reshape(-1, x_shape[-2], self.d_model).sum(axis=0)  # (T, d_model)
        self.grads["P"][offset:offset + x_shape[-2]] += rows
        return dy


def add_positions(x, positions, x_scale=None):
    """x + positions, or with ``x_scale`` the fused ``scale_and_add``."""
    return x + positions if x_scale is None else scale_and_add(x, x_scale, positions)


@fusion.fused("scale_and_add_positions")
def scale_and_add(x, x_scale, positions):
    """x * x_scale + positions: one kernel on a device, where the embedding's
    scale, sqrt(d_model), and the positions' add would be two. ``x_scale``
    says that ``x`` stands for ``x * x_scale`` (rows of the embedding table
    not yet scaled): the backward is unchanged, dy being the gradient of the
    scaled x, which the embedding's backward scales itself."""
    return x * x_scale + positions


def _check_positions(x, offset, d_model, max_len, dtype):
    """x (..., T, d_model) of the table's dtype fits positions offset .. offset+T-1."""
    checks.check_array("x", x, min_ndim=2, last_dim=d_model, dtype=dtype)
    checks.check_finite("x", x)
    checks.check_int("offset", offset, low=0)
    length = x.shape[-2]
    if offset + length > max_len:
        raise ValueError(
            f"x: sequence of length {length} (from position {offset}) is longer "
            f"than the positional encoding's max_len={max_len}"
        )

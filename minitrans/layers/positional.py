"""Sinusoidal positional encoding (paper §3.5)."""

from minitrans.core import backend, checks
from minitrans.layers.module import Module


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

    def forward(self, x, offset=0):
        checks.check_array(
            "x", x, min_ndim=2, last_dim=self.d_model, dtype=self.buffers["PE"].dtype
        )
        checks.check_finite("x", x)
        length = x.shape[-2]
        checks.check_int("offset", offset, low=0)
        if offset + length > self.max_len:
            raise ValueError(
                f"x: sequence of length {length} (from position {offset}) is longer "
                f"than the positional encoding's max_len={self.max_len}"
            )
        self.cache = x.shape
        return x + self.buffers["PE"][offset:offset + length]

    def backward(self, dy):
        x_shape = self.saved()
        checks.check_same_shape("dy", dy, x_shape)
        return dy

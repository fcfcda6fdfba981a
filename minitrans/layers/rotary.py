"""Rotary position embedding (Su et al., 2021, RoFormer): positions as
rotations of each head's queries and keys, the positions of Llama."""

from minitrans.core import backend, checks, fusion, kernels
from minitrans.layers.module import Module


def rotary_tables(max_len, d_k, base=10000.0):
    """cos and sin of the angles m theta_i, each (max_len, d_k / 2):

        theta_i = base^(-2i / d_k),   i = 0 .. d_k/2 - 1,   m = 0 .. max_len - 1

    the frequencies of the paper's sinusoidal table (§3.5) over a head's
    width. Computed in float64, then cast, as ``sinusoidal_table`` is.
    """
    xp = backend.get_xp()
    position = xp.arange(max_len, dtype="float64")[:, None]  # (max_len, 1)
    theta = base ** (-xp.arange(0, d_k, 2, dtype="float64") / d_k)  # (d_k / 2,)
    angle = position * theta  # (max_len, d_k / 2)
    dtype = backend.get_dtype()
    return xp.cos(angle).astype(dtype), xp.sin(angle).astype(dtype)


class RotaryEmbedding(Module):
    """Rotates the vector x_m of position m by angles proportional to m.

    Each pair of coordinates (i, i + d_k/2) of a head's vector is turned by
    the angle m theta_i (``rotary_tables``), with m the absolute position:

        y_i         = x_i cos(m theta_i) - x_{i + d_k/2} sin(m theta_i)
        y_{i+d_k/2} = x_{i + d_k/2} cos(m theta_i) + x_i sin(m theta_i)

    that is y = R_m x, R_m a rotation. Applied to queries and keys (not to
    values), a score becomes q_m . k_n -> (R_m q)^T (R_n k) = q^T R_{n-m} k,
    since R_m^T R_n = R_{n-m}: it depends on the positions only through
    their distance n - m. Nothing is added to the embeddings, and no weight
    is learned.

    Su et al. rotate the neighbouring pairs (2i, 2i + 1). This is the same
    rotation applied to a permutation of the coordinates, pairing i with
    i + d_k/2 (Hugging Face's Llama, ``rotate_half``): y = P^T R_m P x for a
    fixed permutation P. Queries and keys come from learned projections, and
    a projection W_Q P^T learns whatever W_Q would, so every fixed pairing
    is equivalent; this one lets pretrained Llama weights load without
    permuting the columns of W_Q and W_K.

    Backward: a rotation's inverse is its transpose, the rotation by -angle,

        dx = R_m^T dy = R_{-m} dy

    ``offset`` is the position m of x's first row: decoding with a key/value
    cache rotates each new position by its absolute position, so that the
    keys in the cache and the new ones agree.

    Buffers:
        cos, sin: (max_len, d_k / 2), the tables of ``rotary_tables``

    Inputs:
        x: (..., T, d_k), positions along the second last axis (B, h, T, d_k
           in attention), offset + T <= max_len
    Returns:
        y: (..., T, d_k)
    """

    def __init__(self, d_k, max_len=5000, base=10000.0):
        super().__init__()
        checks.check_positive_int("d_k", d_k)
        if d_k % 2:
            raise ValueError(
                f"d_k: rotary positions turn pairs of a head's coordinates, so expected an "
                f"even head width, got d_k={d_k}"
            )
        checks.check_positive_int("max_len", max_len)
        checks.check_number("base", base, low=1, low_open=True)
        self.d_k, self.max_len, self.base = d_k, max_len, float(base)
        self.buffers["cos"], self.buffers["sin"] = rotary_tables(max_len, d_k, self.base)

    def forward(self, x, offset=0):
        y = self.rotate(x, offset)
        self.cache = x.shape, offset  # a rotation keeps no activations: only where it was
        return y

    def backward(self, dy):
        x_shape, offset = self.saved()
        checks.check_same_shape("dy", dy, x_shape)
        return self.rotate(dy, offset, inverse=True)

    def rotate(self, x, offset=0, inverse=False):
        """R_m x for the positions m = offset .. offset + T - 1, or R_m^T x
        (``inverse``, the backward); keeps nothing, for the attention that
        rotates queries and keys and undoes both in its own backward."""
        cos, sin = self.buffers["cos"], self.buffers["sin"]
        checks.check_array("x", x, min_ndim=2, last_dim=self.d_k, dtype=cos.dtype)
        checks.check_finite("x", x)
        checks.check_int("offset", offset, low=0)
        length = x.shape[-2]
        if offset + length > self.max_len:
            raise ValueError(
                f"x: sequence of length {length} (from position {offset}) is longer than the "
                f"rotary table's max_len={self.max_len}"
            )
        cos, sin = cos[offset:offset + length], sin[offset:offset + length]  # (T, d_k / 2)
        return rotate_pairs(x, cos, -sin if inverse else sin)


def rotate_pairs_reference(x, cos, sin):
    """Turn each pair (x_i, x_{i + d/2}) of x (..., T, d) by the angle whose
    cosine and sine are cos, sin (T, d/2): [x1 cos - x2 sin, x2 cos + x1 sin].

    Each half is written straight into its place in y (``out=``), not
    formed apart and copied in: two passes over y fewer."""
    xp = backend.get_xp()
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    y = xp.empty_like(x)
    y1, y2 = y[..., :half], y[..., half:]  # views: writes reach y
    xp.multiply(x1, cos, out=y1)
    y1 -= x2 * sin
    xp.multiply(x2, cos, out=y2)
    y2 += x1 * sin
    return y


def rotate_pairs_fast(x, cos, sin):
    """The reference's numbers, bit for bit, as whole-width passes:

        y = x * [cos, cos] + rotate_half(x) * [sin, sin],   rotate_half(x) = [-x2, x1]

    The reference's passes each run over half of every head's d numbers
    (16 of the llama config's 32), and NumPy's loops pay for every short
    row. Here every pass runs along whole rows, and rotate_half(x) is one
    matrix product x R, R the (d, d) matrix that moves each half into the
    other's place, one of them negated: a product with a single +-1 in each
    column, so exact. Timed against the reference by ``python
    benchmarks/kernels.py``."""
    xp = backend.get_xp()
    d, half = x.shape[-1], x.shape[-1] // 2
    R = xp.zeros((d, d), dtype=x.dtype)
    R[xp.arange(half) + half, xp.arange(half)] = -1.0  # column i < d/2 takes -x_{i + d/2}
    R[xp.arange(half), xp.arange(half) + half] = 1.0  # column i + d/2 takes x_i
    rotated = x @ R  # rotate_half(x), a fresh array in rows
    rotated *= xp.concatenate([sin, sin], axis=-1)
    y = xp.empty(x.shape, dtype=x.dtype)  # in rows, whatever x's layout
    xp.multiply(x, xp.concatenate([cos, cos], axis=-1), out=y)
    y += rotated
    return y


@fusion.fused("rotate_pairs")
def turned_halves(x1, x2, cos, sin):
    """The two halves of y: [x1 cos - x2 sin, x2 cos + x1 sin]."""
    return x1 * cos - x2 * sin, x2 * cos + x1 * sin


def rotate_pairs_device(x, cos, sin):
    """The reference's equation as one fused kernel over the halves (views
    of x) and one copy that puts them side by side: no (d, d) matrix."""
    half = x.shape[-1] // 2
    y1, y2 = turned_halves(x[..., :half], x[..., half:], cos, sin)
    return backend.get_xp().concatenate([y1, y2], axis=-1)


rotate_pairs = kernels.pair(rotate_pairs_reference, rotate_pairs_fast, device=rotate_pairs_device)

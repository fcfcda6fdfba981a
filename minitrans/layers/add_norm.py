"""Add & Norm: the residual connection and layer norm around each sub-layer
(paper §3.1, §5.4)."""

from minitrans.core import backend, checks
from minitrans.layers.dropout import Dropout
from minitrans.layers.layernorm import LayerNorm
from minitrans.layers.module import Module
from minitrans.layers.rmsnorm import RMSNorm

# A model's choices of normalisation (ModelConfig.norm): the paper's
# LayerNorm, or RMSNorm (Llama's).
NORMS = ("layer", "rms")


def build_norm(norm, d_model, eps=1e-5):
    """A LayerNorm (``norm="layer"``) or an RMSNorm (``"rms"``) of d_model."""
    checks.check_choice("norm", norm, NORMS)
    return RMSNorm(d_model, eps=eps) if norm == "rms" else LayerNorm(d_model, eps=eps)


class AddNorm(Module):
    """The residual connection and layer norm around a sub-layer F.

    Post-norm, as in the paper:  y = LayerNorm(x + Dropout(F(x)))
    Pre-norm (``pre_norm=True``): y = x + Dropout(F(LayerNorm(x)))

    The residual path adds the identity to the Jacobian: dL/dx = dL/dy (I +
    dF/dx), so a gradient always reaches x even when F's is small. Pre-norm
    keeps that identity path free of the norm, which makes deep stacks easier
    to train (Xiong et al., 2020); post-norm is the paper's.

    The sub-layer F (attention or feed-forward) is not part of this block:
    it sits beside it in the encoder or decoder layer, and is passed in.
    ``forward(x, sublayer, *others, **options)`` calls ``sublayer.forward(x,
    *others, **options)``: for cross-attention ``others`` is the encoder
    output and ``options`` the mask. ``backward(dy)`` calls that sub-layer's
    backward and returns dx, or (dx, d_others...) when other arrays were
    passed.

    On a device the residual's sums cost no launch of their own. Forward,
    post-norm: in training dropout's kernel adds x (``forward_added``);
    otherwise the norm forms x + F(x) inside its kernels (``forward_of_sum``).
    Backward: a sub-layer whose last backward is a ``Linear``'s (it says so
    in ``residual_add_to``) adds its dx into the residual's gradient inside
    that product (``Linear.backward``'s ``add_to``).

    ``norm="rms"`` puts an RMSNorm where the paper has LayerNorm (Llama's
    choice); the child keeps the name ``layer_norm``, as RMSNorm is a layer
    normalisation too (Zhang and Sennrich's title), only without centring.

    Parameters: those of its children ``layer_norm`` (gamma and beta, or g
    for RMSNorm) and ``dropout`` (none).

    Inputs:
        x: (B, T, d_model), sublayer: a Module, others: as the sub-layer needs
    Returns:
        y: (B, T, d_model)
    """

    def __init__(self, d_model, dropout=0.1, pre_norm=False, eps=1e-5, rng=None, norm="layer"):
        super().__init__()
        self.layer_norm = build_norm(norm, d_model, eps)
        self.dropout = Dropout(dropout, rng=backend.host_rng(rng))
        self.pre_norm = bool(pre_norm)
        self._sublayer = None  # the sub-layer of the last forward

    def forward(self, x, sublayer, *others, **options):
        checks.check_array("x", x, min_ndim=1)
        if not isinstance(sublayer, Module):
            raise TypeError(f"sublayer: expected a minitrans Module, got {type(sublayer).__name__}")
        # underscore: a reference, not a child (its parameters are the
        # encoder or decoder layer's, counted there once)
        self._sublayer = sublayer
        self.cache = len(others)
        if self.pre_norm:
            return self._residual(sublayer.forward(self.layer_norm.forward(x), *others, **options),
                                  x)
        out = sublayer.forward(x, *others, **options)
        if self.dropout.dropping:  # the sum made with dropout's mask: one kernel on a device
            return self.layer_norm.forward(self.dropout.forward_added(out, x))
        # LayerNorm(F(x) + x): on a device the sum is made inside the norm's kernels
        return self.layer_norm.forward_of_sum(self.dropout.forward(out), x)

    def _residual(self, out, x):
        """x + Dropout(out): in training one call that a device runs as one kernel."""
        if self.dropout.dropping:
            return self.dropout.forward_added(out, x)
        return _add_into(self.dropout.forward(out), x)

    def infer(self, x, sublayer_fn):
        """The same connection around ``sublayer_fn`` (a function of the
        sub-layer's input), without dropout and without keeping anything for
        backward: used by incremental decoding."""
        if self.pre_norm:
            return x + sublayer_fn(self.layer_norm.forward(x))
        return self.layer_norm.forward_of_sum(sublayer_fn(x), x)

    def backward(self, dy):
        num_others = self.saved()
        sublayer = self._sublayer
        # the residual's two paths add up
        if self.pre_norm:
            dsub = sublayer.backward(self.dropout.backward(dy))
            dsub_x, dothers = _split_first(dsub, num_others)
            return _with_others(_add_into(self.layer_norm.backward(dsub_x), dy), dothers)
        dsum = self.layer_norm.backward(dy)  # gradient of x + Dropout(F(x)), a fresh array
        dout = self.dropout.backward(dsum)
        if adds_into_residual(sublayer):
            # dx = dF/dx + dsum, added into dsum by F's last product (on a device
            # inside it: Linear.backward's add_to). Without dropout dout is dsum
            # itself, which F has read by then.
            dx, dothers = _split_first(sublayer.backward(dout, add_to=dsum), num_others)
            return _with_others(dx, dothers)
        dsub_x, dothers = _split_first(sublayer.backward(dout), num_others)
        return _with_others(_add_into(dsub_x, dsum), dothers)


def adds_into_residual(sublayer):
    """Whether ``sublayer.backward(dout, add_to=g)`` is to add its dx into the
    residual's gradient g, as the sub-layer declares in ``residual_add_to``:
    "exact" where that gives the bits of dx + g (a sum of two, in either
    order), "device" where it sums in another order, so on a device only
    (a launch saved; on NumPy the numbers stay those of dx + g). Absent: no
    ``add_to``."""
    how = getattr(sublayer, "residual_add_to", None)
    return how == "exact" or (how == "device" and backend.on_device())


def _with_others(dx, dothers):
    """dx, or (dx, d_others...) where the sub-layer took other arrays."""
    return (dx, *dothers) if dothers else dx


def _add_into(result, other):
    """result + other, written into ``result``: a layer's fresh output, which
    nothing else holds, so the sum needs no new array. (Unless ``result`` is
    ``other`` itself or a view of it, as an identity sub-layer would return.)"""
    if backend.get_xp().may_share_memory(result, other):
        return result + other
    result += other
    return result


def _split_first(gradients, num_others):
    """(dx, [d_others]) from what the sub-layer's backward returned."""
    if num_others == 0:
        return gradients, []
    return gradients[0], list(gradients[1:])

"""Add & Norm: the residual connection and layer norm around each sub-layer
(paper §3.1, §5.4)."""

import functools

from minitrans.core import backend, checks, fusion
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
    A sub-layer whose last step is a ``Linear``'s bias (it says so with
    ``output_bias()``) leaves that bias out on a device (``forward(...,
    add_bias=False)``), and the same kernels add it: F(x) = out + b.
    Backward: a sub-layer whose last backward is a ``Linear``'s (it says so
    in ``residual_add_to``) adds its dx into the residual's gradient inside
    that product (``Linear.backward``'s ``add_to``). ``backward(dy,
    **options)`` passes ``options`` to the sub-layer's backward (the
    cross-attention's ``memory_add_to``).

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
        # b: F's last bias where F leaves it to this block (on a device), else None
        bias = bias_left_to_add_norm(sublayer)
        if bias is not None:
            options = {**options, "add_bias": False}
        if self.pre_norm:
            out = sublayer.forward(self.layer_norm.forward(x), *others, **options)
            return self._residual(out, x, bias)
        out = sublayer.forward(x, *others, **options)
        if self.dropout.dropping:  # the sum made with dropout's mask: one kernel on a device
            return self.layer_norm.forward(self.dropout.forward_added(out, x, bias))
        # LayerNorm(F(x) + x): on a device the sum is made inside the norm's kernels
        return self.layer_norm.forward_of_sum(self.dropout.forward(out), x, bias)

    def _residual(self, out, x, bias=None):
        """x + Dropout(out + bias): in training one call that a device runs as one kernel."""
        if self.dropout.dropping:
            return self.dropout.forward_added(out, x, bias)
        out = self.dropout.forward(out)  # out itself: nothing dropped
        return _add_into(out, x) if bias is None else bias_and_residual(out, bias, x)

    def infer(self, x, sublayer_fn, sublayer=None):
        """The same connection around ``sublayer_fn`` (a function of the
        sub-layer's input), without dropout and without keeping anything for
        backward: used by incremental decoding. Given the ``sublayer`` it
        runs, where that leaves its output bias to this block,
        ``sublayer_fn(z, add_bias=False)``, and the bias is added here."""
        bias = None if sublayer is None else bias_left_to_add_norm(sublayer)
        if bias is not None:
            sublayer_fn = functools.partial(sublayer_fn, add_bias=False)
        if self.pre_norm:
            out = sublayer_fn(self.layer_norm.forward(x))
            return x + out if bias is None else bias_and_residual(out, bias, x)
        return self.layer_norm.forward_of_sum(sublayer_fn(x), x, bias)

    def backward(self, dy, **options):
        num_others = self.saved()
        sublayer = self._sublayer
        # the residual's two paths add up
        if self.pre_norm:
            dsub = sublayer.backward(self.dropout.backward(dy), **options)
            dsub_x, dothers = _split_first(dsub, num_others)
            return _with_others(_add_into(self.layer_norm.backward(dsub_x), dy), dothers)
        dsum = self.layer_norm.backward(dy)  # gradient of x + Dropout(F(x)), a fresh array
        dout = self.dropout.backward(dsum)
        if adds_into_residual(sublayer):
            # dx = dF/dx + dsum, added into dsum by F's last product (on a device
            # inside it: Linear.backward's add_to). Without dropout dout is dsum
            # itself, which F has read by then.
            dsub = sublayer.backward(dout, add_to=dsum, **options)
            dx, dothers = _split_first(dsub, num_others)
            return _with_others(dx, dothers)
        dsub_x, dothers = _split_first(sublayer.backward(dout, **options), num_others)
        return _with_others(_add_into(dsub_x, dsum), dothers)


def bias_left_to_add_norm(sublayer):
    """The last bias b of a sub-layer that leaves it to its AddNorm, or None.

    A sub-layer whose output ends in a ``Linear``'s ``+ b`` says so with
    ``output_bias()`` (b, or None without biases) and takes ``forward(...,
    add_bias=False)``. On a device the bias then costs no launch of its own:
    dropout's kernel, or the norm's, adds it with the residual. On NumPy the
    sub-layer adds it itself, with the kernels it always ran.
    """
    output_bias = getattr(sublayer, "output_bias", None)
    if output_bias is None or not backend.on_device():
        return None
    return output_bias()


@fusion.fused("bias_and_residual")
def bias_and_residual(out, bias, residual):
    """(out + bias) + residual: a pre-norm block's sum without dropout, its
    sub-layer's bias and the residual in one kernel, in NumPy's order."""
    return out + bias + residual


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

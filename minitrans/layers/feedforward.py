"""The position-wise feed-forward network (paper §3.3)."""

from minitrans.core import backend, checks, fusion, kernels
from minitrans.layers.linear import Linear
from minitrans.layers.module import Module
from minitrans.layers.swiglu import SwiGLUFeedForward
from minitrans.ops import activations

# A model's choices of feed-forward network (ModelConfig.activation): the
# paper's with an element-wise activation, or SwiGLU, a layer of its own.
FEED_FORWARDS = (*activations.ACTIVATIONS, "swiglu")


class FeedForward(Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, applied to each position alone.

    Linear -> ReLU -> Linear, d_model -> d_ff -> d_model (the paper uses
    d_ff = 2048 = 4 * 512). The two ``Linear`` children are named after the
    paper's weights: ``W_1.W`` is W_1 and ``W_1.b`` is b_1, ``W_2.W`` and
    ``W_2.b`` are W_2 and b_2.

    ``activation="gelu"`` puts GELU(a) = a Phi(a) (``ops.activations.gelu``)
    where the paper has max(0, .), as BERT and GPT-2 do; its backward
    multiplies by GELU'(a) = Phi(a) + a phi(a) instead of [a > 0], so the
    pre-activation a and the gate Phi(a) are kept.

    The bias b_1 and the activation, and their backward, are kernel pairs
    (``bias_relu``, ``relu_backward``, ``bias_gelu`` below): on a device one
    fused kernel each between the two matrix products.

    Backward, with a = x W_1 + b_1 and r = max(0, a):
        dr = W_2's backward of dy     (dW_2 += r^T dy, db_2 += sum of dy)
        da = dr * [a > 0]
        dx = W_1's backward of da     (dW_1 += x^T da, db_1 += sum of da)

    Parameters (Xavier-uniform weights, zero biases):
        W_1.W: (d_model, d_ff),  W_1.b: (d_ff,)
        W_2.W: (d_ff, d_model),  W_2.b: (d_model,)
    (no ``b`` with ``bias=False``)

    Inputs:
        x: (..., d_model)
    Returns:
        y: (..., d_model)
    """

    # AddNorm passes backward the residual's gradient as ``add_to``, to add dx
    # into: a sum of two, the same bits either way, and on a device made
    # inside W_1's product (Linear.backward's add_to) instead of by a launch
    residual_add_to = "exact"

    def __init__(self, d_model, d_ff, rng=None, activation="relu", bias=True):
        super().__init__()
        checks.check_positive_int("d_model", d_model)
        checks.check_positive_int("d_ff", d_ff)
        checks.check_choice("activation", activation, activations.ACTIVATIONS)
        checks.check_bool("bias", bias)
        self.d_model, self.d_ff, self.activation = d_model, d_ff, activation
        rng = backend.host_rng(rng)
        self.W_1 = Linear(d_model, d_ff, bias=bias, rng=rng)
        self.W_2 = Linear(d_ff, d_model, bias=bias, rng=rng)

    def forward(self, x, add_bias=True):
        """``add_bias=False``: y without b_2, for an ``AddNorm`` that adds it
        inside its own kernel (``output_bias``); the backward is the same."""
        checks.check_array("x", x, min_ndim=1, last_dim=self.d_model)
        checks.check_finite("x", x)
        with checks.inputs_checked():  # W_1 and W_2 need not check x and hidden again
            b_1 = self.W_1.params.get("b")
            product = self.W_1.forward(x, add_bias=False)  # x W_1, (..., d_ff), a fresh array
            if self.activation == "gelu":
                # a = x W_1 + b_1, its gate Phi(a) and GELU(a) = a Phi(a)
                hidden, gate, out = bias_gelu(product, b_1)
                self.cache = hidden, gate  # GELU'(a) needs a and Phi(a)
                return self.W_2.forward(out, add_bias)
            hidden = bias_relu(product, b_1)  # r = max(0, a), a = x W_1 + b_1
            self.cache = hidden  # r > 0 exactly where a > 0
            return self.W_2.forward(hidden, add_bias)

    def output_bias(self):
        """b_2, which ``forward(x, add_bias=False)`` leaves to the caller (None
        without biases)."""
        return self.W_2.params.get("b")

    def backward(self, dy, add_to=None):
        """dx; given ``add_to`` (an array of x's shape), dx added into it
        and ``add_to`` returned, as ``Linear.backward`` does."""
        saved = self.saved()
        dhidden = self.W_2.backward(dy)
        if self.activation == "gelu":
            a, gate = saved
            da = activations.gelu_backward(a, gate, dhidden)
        else:
            da = relu_backward(dhidden, saved)  # saved: r = max(0, a)
        return self.W_1.backward(da, add_to=add_to)


# The bias and the activation between the two matrix products, and their
# backward: on a device one fused kernel each.


def bias_relu_reference(product, b):
    """r = max(0, x W + b), given the product x W; b None: no bias."""
    xp = backend.get_xp()
    return xp.maximum(product if b is None else product + b, 0.0)


def bias_relu_fast(product, b):
    """The reference, written into the product: one (..., d_ff) array, not two."""
    if b is not None:
        product += b
    return backend.get_xp().maximum(product, 0.0, out=product)


@fusion.fused("bias_relu")
def bias_relu_kernel(product, b):
    """max(0, x W + b), one kernel."""
    return backend.get_xp().maximum(product + b, 0.0)


def bias_relu_device(product, b):
    """The reference as one fused kernel (a Python 0 for a missing bias)."""
    return bias_relu_kernel(product, 0.0 if b is None else b)


def relu_backward_reference(dr, r):
    """da = dr * [a > 0]: ReLU passes the gradient where its output r = max(0, a)
    is positive, exactly where a > 0."""
    return dr * (r > 0)


def relu_backward_fast(dr, r):
    """The reference, written into dr."""
    dr *= r > 0
    return dr


relu_backward_device = fusion.fused("relu_backward")(relu_backward_reference)  # one kernel


bias_relu = kernels.pair(bias_relu_reference, bias_relu_fast, device=bias_relu_device)
relu_backward = kernels.pair(relu_backward_reference, relu_backward_fast,
                             device=relu_backward_device)


def build_feed_forward(d_model, d_ff, activation="relu", bias=True, rng=None):
    """The feed-forward network a model's ``activation`` names: a FeedForward
    with that activation, or for "swiglu" a SwiGLUFeedForward."""
    checks.check_choice("activation", activation, FEED_FORWARDS)
    if activation == "swiglu":
        return SwiGLUFeedForward(d_model, d_ff, rng=rng, bias=bias)
    return FeedForward(d_model, d_ff, rng=rng, activation=activation, bias=bias)


def bias_gelu_reference(product, b):
    """(a, Phi(a), GELU(a) = a Phi(a)), a = x W + b, given the product x W;
    b None: no bias."""
    a = product if b is None else product + b
    gate = activations.gelu_gate(a)
    return a, gate, a * gate


def bias_gelu_fast(product, b):
    """The reference, with a written into the product and the gate built
    in place (``activations.gelu_gate_fast``)."""
    if b is not None:
        product += b
    gate = activations.gelu_gate_fast(product)
    return product, gate, product * gate


@fusion.fused("bias_gelu")
def bias_gelu_kernel(product, b):
    """a = x W + b, Phi(a) and GELU(a), one kernel: the equations, element-wise."""
    a = product + b
    gate = activations.gelu_gate(a)
    return a, gate, a * gate


def bias_gelu_device(product, b):
    """The reference as one fused kernel (a Python 0 for a missing bias)."""
    return bias_gelu_kernel(product, 0.0 if b is None else b)


bias_gelu = kernels.pair(bias_gelu_reference, bias_gelu_fast, device=bias_gelu_device)
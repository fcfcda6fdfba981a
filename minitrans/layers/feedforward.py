"""The position-wise feed-forward network (paper §3.3)."""

from minitrans.core import backend, checks
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

    ``activation="gelu"`` puts GELU (``ops.activations.gelu``) where the
    paper has max(0, .), as BERT and GPT-2 do; its backward multiplies by
    GELU'(a) instead of [a > 0], so the pre-activation a is kept.

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

    def forward(self, x):
        checks.check_array("x", x, min_ndim=1, last_dim=self.d_model)
        checks.check_finite("x", x)
        with checks.inputs_checked():  # W_1 and W_2 need not check x and hidden again
            hidden = self.W_1.forward(x)  # a = x W_1 + b_1, (..., d_ff), a fresh array
            if self.activation == "gelu":
                self.cache = hidden  # GELU'(a) needs a itself
                return self.W_2.forward(activations.gelu(hidden))
            relu_in_place(hidden)  # one (..., d_ff) array, not two
            self.cache = hidden  # r = max(0, a): r > 0 exactly where a > 0
            return self.W_2.forward(hidden)

    def backward(self, dy):
        hidden = self.saved()
        dhidden = self.W_2.backward(dy)
        if self.activation == "gelu":
            return self.W_1.backward(activations.gelu_backward(hidden, dhidden))
        dhidden *= hidden > 0  # ReLU passes the gradient where its output is positive
        return self.W_1.backward(dhidden)


def relu_in_place(a):
    """a = max(0, a), written into a."""
    return backend.get_xp().maximum(a, 0.0, out=a)


def build_feed_forward(d_model, d_ff, activation="relu", bias=True, rng=None):
    """The feed-forward network a model's ``activation`` names: a FeedForward
    with that activation, or for "swiglu" a SwiGLUFeedForward."""
    checks.check_choice("activation", activation, FEED_FORWARDS)
    if activation == "swiglu":
        return SwiGLUFeedForward(d_model, d_ff, rng=rng, bias=bias)
    return FeedForward(d_model, d_ff, rng=rng, activation=activation, bias=bias)

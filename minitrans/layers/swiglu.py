"""The SwiGLU feed-forward network (Shazeer, 2020), Llama's in place of the
paper's (§3.3)."""

from minitrans.core import backend, checks, fusion, kernels
from minitrans.layers.linear import Linear
from minitrans.layers.module import Module
from minitrans.ops import activations


class SwiGLUFeedForward(Module):
    """FFN(x) = (SiLU(x W_gate) * (x W_up)) W_down, applied to each position alone.

    A gated linear unit (Dauphin et al., 2017) with SiLU as its gate: two
    projections to d_ff, one passed through SiLU(a) = a sigma(a)
    (``ops.activations.silu``), multiplied element by element, and a third
    back to d_model. Shazeer found it better than ReLU or GELU for the same
    number of weights (three matrices with d_ff at 2/3 of the two-matrix
    network's); Llama uses it, without biases (``bias=False``).

    Forward, with a = x W_gate, u = x W_up:
        m = SiLU(a) * u                                  (..., d_ff)
        y = m W_down
    Backward:
        dm = W_down's backward of dy    (dW_down += m^T dy)
        du = dm * SiLU(a)
        da = dm * u * SiLU'(a),   SiLU'(a) = sigma(a) (1 + a (1 - sigma(a)))
                                           = sigma(a) + SiLU(a) (1 - sigma(a))
        dx = W_gate's backward of da + W_up's backward of du
    x feeds both W_gate and W_up, so its gradient is the sum of the two.
    The forward keeps SiLU(a), u and sigma(a), which is all the backward
    reads: the second form of SiLU'(a) needs no a.

    Parameters (Xavier-uniform weights, zero biases), the children W_gate,
    W_up and W_down, each a ``Linear``:
        W_gate.W: (d_model, d_ff),  W_gate.b: (d_ff,)
        W_up.W:   (d_model, d_ff),  W_up.b:   (d_ff,)
        W_down.W: (d_ff, d_model),  W_down.b: (d_model,)
    (no ``b`` with ``bias=False``)

    Inputs:
        x: (..., d_model)
    Returns:
        y: (..., d_model)
    """

    def __init__(self, d_model, d_ff, rng=None, bias=True):
        super().__init__()
        checks.check_positive_int("d_model", d_model)
        checks.check_positive_int("d_ff", d_ff)
        checks.check_bool("bias", bias)
        self.d_model, self.d_ff = d_model, d_ff
        rng = backend.host_rng(rng)
        self.W_gate = Linear(d_model, d_ff, bias=bias, rng=rng)
        self.W_up = Linear(d_model, d_ff, bias=bias, rng=rng)
        self.W_down = Linear(d_ff, d_model, bias=bias, rng=rng)

    def forward(self, x, add_bias=True):
        """``add_bias=False``: y without b_down, for an ``AddNorm`` that adds
        it inside its own kernel (``output_bias``); the backward is the same."""
        checks.check_array("x", x, min_ndim=1, last_dim=self.d_model)
        checks.check_finite("x", x)
        with checks.inputs_checked():  # the three Linear layers need not check again
            a = self.W_gate.forward(x)  # (..., d_ff)
            u = self.W_up.forward(x)  # (..., d_ff)
            m, silu, s = swiglu_gate(a, u)
            self.cache = silu, u, s
            return self.W_down.forward(m, add_bias)

    def output_bias(self):
        """b_down, which ``forward(x, add_bias=False)`` leaves to the caller
        (None without biases, as Llama's)."""
        return self.W_down.params.get("b")

    def backward(self, dy):
        silu, u, s = self.saved()
        dm = self.W_down.backward(dy)  # (..., d_ff)
        da, du = swiglu_gate_backward(dm, silu, u, s)
        dx = self.W_gate.backward(da)
        dx += self.W_up.backward(du)  # x fed both projections
        return dx


# The gate between the matrix products, forward and backward: element-wise
# from end to end, one fused kernel each on a device. On the CPU the
# reference is the fast version too.


def swiglu_gate_reference(a, u):
    """(m, SiLU(a), s): s = sigma(a), SiLU(a) = a s, m = SiLU(a) * u."""
    s = activations.sigmoid(a)
    silu = a * s
    return silu * u, silu, s


@fusion.fused("swiglu_gate")
def swiglu_gate_device(a, u):
    """The reference in one kernel, with sigma(a) = exp(min(a, 0)) / (1 + exp(-|a|)),
    the sigmoid's reference form, where no exponential exceeds 1."""
    xp = backend.get_xp()
    s = xp.exp(xp.minimum(a, 0.0)) / (1.0 + xp.exp(-xp.abs(a)))
    silu = a * s
    return silu * u, silu, s


def swiglu_gate_backward_reference(dm, silu, u, s):
    """(da, du): da = dm * u * SiLU'(a), du = dm * SiLU(a), with
    SiLU'(a) = s + SiLU(a) (1 - s) (``activations.silu_derivative``)."""
    da = dm * u
    da *= activations.silu_derivative(s, silu)
    return da, dm * silu


@fusion.fused("swiglu_gate_backward")
def swiglu_gate_backward_device(dm, silu, u, s):
    """The reference in one kernel."""
    return dm * u * (s + silu * (1.0 - s)), dm * silu


swiglu_gate = kernels.pair(swiglu_gate_reference, swiglu_gate_reference, name="swiglu_gate",
                           device=swiglu_gate_device)
swiglu_gate_backward = kernels.pair(swiglu_gate_backward_reference,
                                    swiglu_gate_backward_reference,
                                    name="swiglu_gate_backward",
                                    device=swiglu_gate_backward_device)

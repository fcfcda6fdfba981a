"""GELU, the feed-forward network's non-linearity in BERT and GPT-2 where the
paper has ReLU (§3.3), and its derivative for the backward pass; SiLU, the
gate of SwiGLU (Llama's feed-forward network), and its derivative. (ReLU,
max(0, a), is written where it is used: ``layers.feedforward``.)

``ACTIVATIONS`` are the element-wise choices of ``FeedForward``; SwiGLU,
a gated network of three matrices, is a layer of its own
(``layers.swiglu``), chosen by ``activation="swiglu"`` in a model.
"""

import math

from minitrans.core import backend, fusion, kernels

ACTIVATIONS = ("relu", "gelu")

# GELU's tanh approximation (Hendrycks and Gimpel 2016), as GPT-2 computes it.
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_CUBIC = 0.044715


def gelu_gate(a):
    """Phi(a), the standard normal CDF, in GELU's tanh approximation:

        Phi(a) ~ 0.5 (1 + tanh(u)),   u = sqrt(2/pi) (a + 0.044715 a^3)

    GELU multiplies its input by it (``gelu``): a gate between 0 and 1
    that opens smoothly as a grows. The feed-forward layer keeps it for
    the backward, which needs it again (``gelu_backward``).
    """
    xp = backend.get_xp()
    # a * a * a: a**3 goes through NumPy's slow general pow (benchmarks/results/kernels/)
    u = _SQRT_2_OVER_PI * (a + _CUBIC * (a * a * a))
    return 0.5 * (1.0 + xp.tanh(u))


def gelu(a):
    """GELU(a) = a Phi(a) (Hendrycks and Gimpel 2016), Phi the standard
    normal CDF in its tanh approximation (``gelu_gate``), as GPT-2 computes
    it. Like ReLU it passes large positive inputs and silences large
    negative ones, but smoothly: small negative inputs give small negative
    outputs.
    """
    return a * gelu_gate(a)


def gelu_backward_reference(a, gate, dy):
    """dy * GELU'(a), by the product rule on a Phi(a), given the gate
    Phi(a) (``gelu_gate(a)``, which the forward computed):

        GELU'(a) = Phi(a) + a phi(a),   phi(a) = dPhi/da
                 = Phi(a) + a * 0.5 (1 - tanh(u)^2) du/da
                 = Phi(a) + a * 2 Phi(a) (1 - Phi(a)) du/da
        du/da    = sqrt(2/pi) (1 + 3 * 0.044715 a^2)

    (with tanh(u) = 2 Phi(a) - 1, 1 - tanh(u)^2 = 4 Phi(a) (1 - Phi(a))).
    """
    du_da = _SQRT_2_OVER_PI * (1.0 + 3.0 * _CUBIC * a**2)
    density = 2.0 * gate * (1.0 - gate) * du_da  # phi(a)
    return dy * (gate + a * density)


def gelu_gate_fast(a):
    """``gelu_gate``'s numbers, up to rounding, in one array where the
    reference makes eight: u = sqrt(2/pi) a (1 + 0.044715 a^2), then the
    gate built in place. Each NumPy operation is a pass over memory, and
    the feed-forward's activations are its largest arrays. Timed against
    the reference by ``python benchmarks/kernels.py`` (as ``bias_gelu``)."""
    xp = backend.get_xp()
    gate = a * a
    gate *= _SQRT_2_OVER_PI * _CUBIC
    gate += _SQRT_2_OVER_PI
    gate *= a  # u = a (sqrt(2/pi) + sqrt(2/pi) 0.044715 a^2)
    xp.tanh(gate, out=gate)
    gate *= 0.5
    gate += 0.5  # 0.5 (1 + tanh(u))
    return gate


def gelu_backward_fast(a, gate, dy):
    """The reference's numbers, up to rounding, in two arrays where the
    reference makes eleven, and no tanh: the forward's gate holds it.
    Timed against the reference by ``python benchmarks/kernels.py``."""
    two_a_du_da = a * a  # 2 a du/da = a (2 sqrt(2/pi) + 2 sqrt(2/pi) 3 * 0.044715 a^2)
    two_a_du_da *= 2.0 * _SQRT_2_OVER_PI * 3.0 * _CUBIC
    two_a_du_da += 2.0 * _SQRT_2_OVER_PI
    two_a_du_da *= a
    grad = 1.0 - gate
    grad *= gate
    grad *= two_a_du_da  # a phi(a) = a * 2 Phi (1 - Phi) du/da
    grad += gate  # GELU'(a)
    grad *= dy
    return grad


# The equation is element-wise from end to end: on a device it is fused as it
# reads, into one kernel.
gelu_backward = kernels.pair(gelu_backward_reference, gelu_backward_fast,
                             name="gelu_backward",
                             device=fusion.fused("gelu_backward")(gelu_backward_reference))


def sigmoid_reference(a):
    """sigma(a) = 1 / (1 + exp(-a)) = exp(a) / (1 + exp(a)), computed as

        sigma(a) = exp(min(a, 0)) / (1 + exp(-|a|)),

    the first form for a >= 0 and the second for a < 0, so that no
    exponential exceeds 1: exp(-a) would overflow for a very negative a, and
    1 - sigma(-a) would lose the digits of a tiny sigma(a). One expression
    for both signs rather than ``xp.where`` between them, which NumPy
    computes slowly (``python benchmarks/kernels.py`` times both;
    benchmarks/results/kernels/)."""
    xp = backend.get_xp()
    denominator = xp.abs(a)  # 1 + exp(-|a|), built up in one array
    xp.negative(denominator, out=denominator)
    xp.exp(denominator, out=denominator)
    denominator += 1.0
    numerator = xp.exp(xp.minimum(a, 0.0))  # a Python 0.0 keeps float32
    numerator /= denominator
    return numerator


# The largest whole number whose exponential float32 and float64 hold, by
# their width in bytes (the logs of their largest numbers: 88.72, 709.78).
_EXP_CAP = {4: 88.0, 8: 709.0}


def sigmoid_fast(a):
    """The reference's numbers as the textbook's 1 / (1 + exp(-a)), with one
    exponential where the reference takes two, in one array. exp(-a) is
    capped at exp(88) in float32 (exp(709) in float64) so that it never
    overflows: a below -88 gets 1 / (1 + exp(88)), about 6e-39, where
    sigma(a) is smaller still; both are below float32's smallest normal
    number. For a >= -88 no digit is lost: 1 + exp(-a) has no cancellation.
    Timed against the reference by ``python benchmarks/kernels.py``.
    """
    xp = backend.get_xp()
    s = xp.negative(a)
    xp.minimum(s, _EXP_CAP[s.dtype.itemsize], out=s)
    xp.exp(s, out=s)
    s += 1.0
    return xp.reciprocal(s, out=s)


sigmoid = kernels.pair(sigmoid_reference, sigmoid_fast)


def silu(a):
    """SiLU(a) = a sigma(a) (Elfwing et al., 2018; Ramachandran et al.'s Swish
    with beta = 1), the gate of SwiGLU (``layers.swiglu``)."""
    return a * sigmoid(a)


def silu_backward(a, dy, s=None):
    """dy * SiLU'(a), by the product rule on a sigma(a), with sigma' = sigma (1 - sigma):

        SiLU'(a) = sigma(a) + a sigma(a) (1 - sigma(a)) = sigma(a) (1 + a (1 - sigma(a)))

    ``s``: sigma(a), where the forward kept it (computed here otherwise).
    """
    s = sigmoid(a) if s is None else s
    derivative = silu_derivative(s, a * s)
    derivative *= dy
    return derivative


def silu_derivative(s, silu):
    """SiLU'(a) from what SwiGLU's forward keeps, s = sigma(a) and SiLU(a) = a s:

        SiLU'(a) = s + a s (1 - s) = s + SiLU(a) (1 - s)

    three passes over a new array, none of them reading a itself."""
    derivative = 1.0 - s  # built up in one array
    derivative *= silu
    derivative += s
    return derivative

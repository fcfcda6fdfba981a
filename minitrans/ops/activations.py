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


def gelu(a):
    """GELU(a) = a Phi(a), Phi the standard normal CDF, in the tanh form

        GELU(a) ~ 0.5 a (1 + tanh(u)),   u = sqrt(2/pi) (a + 0.044715 a^3)

    Like ReLU it passes large positive inputs and silences large negative
    ones, but smoothly: small negative inputs give small negative outputs.
    """
    xp = backend.get_xp()
    # a * a * a: a**3 goes through NumPy's slow general pow (benchmarks/results/kernels/)
    u = _SQRT_2_OVER_PI * (a + _CUBIC * (a * a * a))
    return 0.5 * a * (1.0 + xp.tanh(u))


def gelu_backward_reference(a, dy):
    """dy * GELU'(a), by the product rule on 0.5 a (1 + tanh(u)):

        GELU'(a) = 0.5 (1 + tanh(u)) + 0.5 a (1 - tanh(u)^2) du/da,
        du/da    = sqrt(2/pi) (1 + 3 * 0.044715 a^2)
    """
    xp = backend.get_xp()
    t = xp.tanh(_SQRT_2_OVER_PI * (a + _CUBIC * (a * a * a)))
    du_da = _SQRT_2_OVER_PI * (1.0 + 3.0 * _CUBIC * a**2)
    return dy * (0.5 * (1.0 + t) + 0.5 * a * (1.0 - t * t) * du_da)


def gelu_fast(a):
    """``gelu``'s numbers, up to rounding, in two arrays where ``gelu`` makes
    eight: u = sqrt(2/pi) a (1 + 0.044715 a^2) and GELU built in place.
    Each NumPy operation is a pass over memory, and the feed-forward's
    activations are its largest arrays. Timed against ``gelu`` by
    ``python benchmarks/kernels.py`` (as ``bias_gelu``)."""
    xp = backend.get_xp()
    u = a * a
    u *= _CUBIC
    u += 1.0
    u *= a
    u *= _SQRT_2_OVER_PI
    xp.tanh(u, out=u)  # tanh(u)
    u += 1.0
    u *= a
    u *= 0.5  # 0.5 a (1 + tanh(u))
    return u


def gelu_backward_fast(a, dy):
    """The reference's numbers, up to rounding, in three arrays where the
    reference makes a dozen: tanh(u), then the two terms of GELU'(a) built
    in place. Timed against the reference by ``python benchmarks/kernels.py``."""
    xp = backend.get_xp()
    a_squared = a * a
    t = a_squared * _CUBIC
    t += 1.0
    t *= a
    t *= _SQRT_2_OVER_PI
    xp.tanh(t, out=t)  # t = tanh(u)
    half_a_du_da = a_squared  # 0.5 a du/da = 0.5 a sqrt(2/pi) (1 + 3 * 0.044715 a^2)
    half_a_du_da *= 3.0 * _CUBIC
    half_a_du_da += 1.0
    half_a_du_da *= a
    half_a_du_da *= 0.5 * _SQRT_2_OVER_PI
    second = t * t
    xp.subtract(1.0, second, out=second)
    second *= half_a_du_da  # 0.5 a (1 - t^2) du/da
    t += 1.0
    t *= 0.5
    t += second  # GELU'(a)
    t *= dy
    return t


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

"""GELU, the feed-forward network's non-linearity in BERT and GPT-2 where the
paper has ReLU (§3.3), and its derivative for the backward pass. (ReLU,
max(0, a), is written where it is used: ``layers.feedforward``.)"""

import math

from minitrans.core import backend

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
    # a * a * a: a**3 goes through NumPy's slow general pow (benchmarks/README.md)
    u = _SQRT_2_OVER_PI * (a + _CUBIC * (a * a * a))
    return 0.5 * a * (1.0 + xp.tanh(u))


def gelu_backward(a, dy):
    """dy * GELU'(a), by the product rule on 0.5 a (1 + tanh(u)):

        GELU'(a) = 0.5 (1 + tanh(u)) + 0.5 a (1 - tanh(u)^2) du/da,
        du/da    = sqrt(2/pi) (1 + 3 * 0.044715 a^2)
    """
    xp = backend.get_xp()
    t = xp.tanh(_SQRT_2_OVER_PI * (a + _CUBIC * (a * a * a)))
    du_da = _SQRT_2_OVER_PI * (1.0 + 3.0 * _CUBIC * a**2)
    return dy * (0.5 * (1.0 + t) + 0.5 * a * (1.0 - t * t) * du_da)

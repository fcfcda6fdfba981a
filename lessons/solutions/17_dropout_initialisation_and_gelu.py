"""Solutions to the exercises of lesson 17 (17_dropout_initialisation_and_gelu):
inverted dropout, the backward of the tanh-approximation GELU, and Xavier's
uniform initialisation, in plain NumPy."""

import numpy as np


def dropout(x, u, p, dy):
    """Inverted dropout, forward and backward, with the draws given.

    x, dy: any shape (the input and the upstream gradient); u: x's shape,
    uniform draws in [0, 1); p: the probability of dropping, 0 <= p < 1.
    An element is kept where u >= p, as in minitrans's Dropout. Returns
    (y, dx), both of x's shape: y = x m / (1 - p), dx = dy m / (1 - p).
    """
    keep = u >= p
    scale = 1.0 / (1.0 - p)
    return x * keep * scale, dy * keep * scale


def gelu_backward(x, dy):
    """dx for y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).

    x, dy: any shape. Product rule: dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx,
    t = tanh(u). np.tanh saturates to +-1 for large |u| without overflow.
    """
    c = np.sqrt(2.0 / np.pi)
    t = np.tanh(c * (x + 0.044715 * x**3))
    du = c * (1.0 + 3 * 0.044715 * x**2)
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t**2) * du)


def xavier_init(u):
    """Xavier (Glorot) uniform weights from uniform draws u in [0, 1) of shape
    (fan_in, fan_out): W = a (2u - 1) with a = sqrt(6 / (fan_in + fan_out)),
    so Var(W) = a^2 / 3 = 2 / (fan_in + fan_out)."""
    fan_in, fan_out = u.shape
    bound = np.sqrt(6.0 / (fan_in + fan_out))
    return bound * (2.0 * u - 1.0)

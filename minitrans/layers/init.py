"""Initial values of parameters, drawn on the host and moved to the device.

Drawing on the host with a seeded ``numpy.random.Generator`` (see
``backend.host_rng``) means that one seed gives the same weights on NumPy,
CuPy and the strict test backend.
"""

import math

from minitrans.core import backend


def xavier_uniform(rng, fan_in, fan_out):
    """W ~ U(-a, a) with a = sqrt(6 / (fan_in + fan_out)), shape (fan_in, fan_out).

    Glorot and Bengio (2010): keeps the variance of activations and of
    gradients roughly equal from layer to layer.
    """
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return backend.from_host(rng.uniform(-limit, limit, size=(fan_in, fan_out)))


def normal(rng, shape, std):
    """Samples of N(0, std^2) with the given shape."""
    return backend.from_host(rng.normal(0.0, std, size=shape))


def zeros(shape):
    return backend.get_xp().zeros(shape, dtype=backend.get_dtype())


def ones(shape):
    return backend.get_xp().ones(shape, dtype=backend.get_dtype())

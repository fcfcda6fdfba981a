"""Solution to the exercise of lesson 9 (residual connections and layer
normalisation): the layer norm forward, checked by
``minitrans_course.exercises.check_layernorm``."""

import numpy as np


def layernorm(x, gamma, beta, eps):
    """gamma * (x - mean) / sqrt(var + eps) + beta, statistics over the last axis.

    x: (..., d); gamma, beta: (d,). The variance divides by d (no Bessel
    correction), as in the paper's layer norm and in minitrans.LayerNorm.
    """
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return gamma * (x - mu) / np.sqrt(var + eps) + beta

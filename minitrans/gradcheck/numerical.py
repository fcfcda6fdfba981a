"""Numerical gradient checking: is a hand-written backward right? Central
differences, and the relative error the two gradients are compared by.

For a layer f and a fixed random upstream gradient G, the scalar

    L(inputs, params) = sum(f(inputs, params) * G)

has dL/dinput = backward(G) and dL/dparam = the accumulated grads. Each of
those is compared with central differences,

    dL/dw ~ (L(w + h) - L(w - h)) / (2h)    for every element w

(in its fourth-order form, see ``numeric_gradient``), in float64, by the
relative error max|analytic - numeric| / max(|analytic|, |numeric|). G is
random, never all ones: with G = 1 the gradient of a layer norm or softmax
output is zero whatever the backward computes, and a wrong backward would
pass. A correct float64 backward typically agrees to 1e-10 or better.
"""

import numpy as np

TOLERANCE = 1e-6
TINY = 1e-30  # so that two all-zero gradients compare as equal, not 0/0


def relative_error(analytic, numeric):
    """max|a - n| / max(max|a|, max|n|); 0 when both are all zeros."""
    analytic, numeric = np.asarray(analytic), np.asarray(numeric)
    if analytic.shape != numeric.shape:
        raise ValueError(f"gradient shapes differ: {analytic.shape} vs {numeric.shape}")
    if analytic.size == 0:
        return 0.0
    scale = max(np.abs(analytic).max(), np.abs(numeric).max(), TINY)
    return float(np.abs(analytic - numeric).max() / scale)


def numeric_gradient(loss, array, step=1e-4, indices=None):
    """Central differences of ``loss()`` with respect to each element of ``array``.

    ``array`` is perturbed in place (on its device) and restored. Each
    element's derivative comes from ``central_derivative``. ``indices``
    (index tuples) limits the work to those elements, a sample of a large
    array; the others stay 0 in the result.
    """
    grad = np.zeros(array.shape)
    for index in np.ndindex(*array.shape) if indices is None else indices:
        original = float(array[index])

        def loss_at(offset):
            array[index] = original + offset
            return loss()

        grad[index] = central_derivative(loss_at, step)
        array[index] = original
    return grad


def central_derivative(f, step, kink_tolerance=1e-6, attempts=4):
    """f'(0) from central differences with steps h and 2h.

        near = (f(h) - f(-h)) / 2h,   far = (f(2h) - f(-2h)) / 4h

    Their errors are (h^2 / 6) f^(3) and (4 h^2 / 6) f^(3), so (4 near - far) / 3
    cancels them: a fourth-order estimate, accurate with a step large enough
    that rounding errors stay small. The two also tell whether f is smooth
    over [-2h, 2h]: if a ReLU's kink lies in between, near and far disagree,
    and the step is divided by 10 until they agree.
    """
    for _ in range(attempts):
        near = (f(step) - f(-step)) / (2 * step)
        far = (f(2 * step) - f(-2 * step)) / (4 * step)
        if abs(near - far) <= kink_tolerance * max(abs(near), abs(far), 1e-3):
            break
        step /= 10
    return (4 * near - far) / 3

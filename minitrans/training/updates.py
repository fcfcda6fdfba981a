"""The optimisers' updates, as pure functions of one parameter's arrays.

Each updates ``param`` (and its optimiser state) in place, from ``grad``;
``minitrans.training.optim`` decides which parameters, in which blocks and
on which threads. ``adam_update`` is a kernel pair
(``minitrans.core.kernels``): the reference reads as the paper's equations,
the fast version computes the same numbers in one scratch array.
"""

from minitrans.core import backend, kernels


def sgd_update(param, grad, lr, velocity=None, momentum=0.0):
    """w <- w - lr * g, or with momentum mu: v <- mu v + g,  w <- w - lr * v."""
    if momentum:
        velocity *= momentum
        velocity += grad
        grad = velocity
    param -= lr * grad


def adam_update_reference(param, grad, m, v, t, lr, betas, eps, weight_decay=0.0):
    """One Adam step (Kingma and Ba, 2015) at step t = 1, 2, ..., with AdamW's
    decoupled weight decay (Loshchilov and Hutter, 2019):

        m <- beta1 m + (1 - beta1) g            running mean of g
        v <- beta2 v + (1 - beta2) g^2          running mean of g^2
        m_hat = m / (1 - beta1^t),  v_hat = v / (1 - beta2^t)   (m, v start at 0)
        w <- w - lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * w)
    """
    beta1, beta2 = betas
    m[...] = beta1 * m + (1 - beta1) * grad
    v[...] = beta2 * v + (1 - beta2) * grad**2
    m_hat = m / (1 - beta1**t)
    v_hat = v / (1 - beta2**t)
    param -= lr * (m_hat / (backend.get_xp().sqrt(v_hat) + eps) + weight_decay * param)


def adam_update_fast(param, grad, m, v, t, lr, betas, eps, weight_decay=0.0):
    """The reference's step with one scratch array instead of eight: every
    array operation writes in place, and the bias corrections are Python
    floats folded into the scalars (sqrt(v * s) = sqrt(v) * sqrt(s)). Timed
    against the reference by ``python benchmarks/kernels.py``."""
    xp = backend.get_xp()
    beta1, beta2 = betas
    m *= beta1
    m += (1.0 - beta1) * grad
    squared = grad * grad  # the scratch array
    squared *= 1.0 - beta2
    v *= beta2
    v += squared
    m_hat_scale = 1.0 / (1.0 - beta1**t)
    v_hat_scale = 1.0 / (1.0 - beta2**t)
    step = xp.sqrt(v, out=squared)  # lr * m_hat / (sqrt(v_hat) + eps), below
    step *= v_hat_scale**0.5
    step += eps
    xp.divide(m, step, out=step)
    step *= lr * m_hat_scale
    if weight_decay:
        param *= 1.0 - lr * weight_decay  # decoupled: w - lr * wd * w
    param -= step


adam_update = kernels.pair(adam_update_reference, adam_update_fast)

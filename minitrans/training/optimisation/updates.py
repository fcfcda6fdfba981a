"""The optimisers' updates, as pure functions of one parameter's arrays.

This module is where the update rules are written, once: SGD's in
``sgd_update``, Adam's in ``adam_update_reference``, whose code reads as the
equations of its docstring. Each function updates ``param`` (and its
optimiser state) in place, from ``grad``; the optimisers of
``minitrans.training.optimisation.optim`` keep that state and decide which parameters,
in which blocks and on which threads, and compute no update of their own.
``adam_update`` is a kernel pair (``minitrans.core.kernels``): the
reference, and a fast version that computes the same numbers in place, in
one scratch array that the optimiser reuses (``tests/library/test_kernels.py``
holds them equal).
"""

from minitrans.core import backend, kernels


def sgd_update(param, grad, lr, velocity=None, momentum=0.0):
    """w <- w - lr * g, or with momentum mu: v <- mu v + g,  w <- w - lr * v."""
    if momentum:
        velocity *= momentum
        velocity += grad
        grad = velocity
    param -= lr * grad


def adam_update_reference(param, grad, m, v, t, lr, betas, eps, weight_decay=0.0, scratch=None):
    """One Adam step (Kingma and Ba, 2015) at step t = 1, 2, ..., with AdamW's
    decoupled weight decay (Loshchilov and Hutter, 2019). For a parameter w
    with gradient g:

        m <- beta1 m + (1 - beta1) g            running mean of g
        v <- beta2 v + (1 - beta2) g^2          running mean of g^2
        m_hat = m / (1 - beta1^t),  v_hat = v / (1 - beta2^t)   (m, v start at 0)
        w <- w - lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * w)

    Dividing by sqrt(v_hat) gives every weight a step of about lr, whatever
    the scale of its gradient. The decay term is added to the step, not to
    the gradient, so Adam's scaling does not weaken it.

    ``scratch`` is ignored here: the fast version works in it.
    """
    beta1, beta2 = betas
    m[...] = beta1 * m + (1 - beta1) * grad
    v[...] = beta2 * v + (1 - beta2) * grad**2
    m_hat = m / (1 - beta1**t)
    v_hat = v / (1 - beta2**t)
    param -= lr * (m_hat / (backend.get_xp().sqrt(v_hat) + eps) + weight_decay * param)


def adam_update_fast(param, grad, m, v, t, lr, betas, eps, weight_decay=0.0, scratch=None):
    """The reference's step with no fresh array at all: every operation
    writes in place, into the moments or into ``scratch`` (an array of
    grad's shape whose contents it overwrites; None makes one), and the
    bias corrections are Python floats folded into the scalars. Fewer
    passes over memory, and none over memory that is new to the allocator:
    the optimiser hands each thread the same scratch at every step. Timed
    against the reference by ``python benchmarks/kernels.py --kernels
    adam_update`` (benchmarks/results/kernels/)."""
    if scratch is None:
        scratch = backend.get_xp().empty_like(grad)
    step = adam_step(grad, m, v, t, lr, betas, eps, out=scratch)
    apply_adam_step(param, step, lr, weight_decay)


def adam_step(grad, m, v, t, lr, betas, eps, out):
    """The first part of ``adam_update_fast``: m and v updated in place, and
    ``out`` (a scratch array of grad's shape; what it holds is overwritten)
    set to the step lr * m_hat / (sqrt(v_hat) + eps). Returns ``out``.

    Each moment moves towards its new value by its share of the distance,
    m += (1 - beta1) (g - m), which is beta1 m + (1 - beta1) g in three
    passes and no temporary array. And with s = sqrt(1 / (1 - beta2^t)),
    sqrt(v_hat) + eps = s (sqrt(v) + eps / s), so the step is
    (lr / ((1 - beta1^t) s)) m / (sqrt(v) + eps / s): one pass fewer."""
    xp = backend.get_xp()
    beta1, beta2 = betas
    scratch = out
    xp.subtract(grad, m, out=scratch)
    scratch *= 1.0 - beta1
    m += scratch  # m <- beta1 m + (1 - beta1) g
    xp.multiply(grad, grad, out=scratch)
    scratch -= v
    scratch *= 1.0 - beta2
    v += scratch  # v <- beta2 v + (1 - beta2) g^2
    m_hat_scale = 1.0 / (1.0 - beta1**t)
    root_v_hat_scale = (1.0 / (1.0 - beta2**t)) ** 0.5
    step = xp.sqrt(v, out=scratch)
    step += eps / root_v_hat_scale
    xp.divide(m, step, out=step)
    step *= lr * m_hat_scale / root_v_hat_scale
    return step


def apply_adam_step(param, step, lr, weight_decay):
    """The second part: param <- param - step, after AdamW's decay."""
    if weight_decay:
        param *= 1.0 - lr * weight_decay  # decoupled: w - lr * wd * w
    param -= step


adam_update = kernels.pair(adam_update_reference, adam_update_fast)

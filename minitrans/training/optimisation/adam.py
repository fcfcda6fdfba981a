"""Adam (Kingma and Ba, 2015), with AdamW's decoupled weight decay
(Loshchilov and Hutter, 2019): its equations and the optimiser that applies
them to a model.

The update of one parameter is written once, in ``adam_update_reference``,
whose code reads as the equations of its docstring. ``adam_update`` is a
kernel pair (``minitrans.core.kernels``): that reference, and
``adam_update_fast``, which computes the same numbers in place, in one
scratch array that the optimiser reuses (``tests/library/test_kernels.py``
holds them equal), and ``adam_update_device``, the same step as two fused
kernels for a GPU (``optimisation.adam_device``). ``Adam`` keeps m, v and
the step count, and runs the update over the parameters: in blocks and on
threads (``optimisation.optimizer``), or, for a small model, over all of
them at once (``optimisation.flat_state``; on a device, in one kernel).
"""

import threading

from minitrans.core import backend, checks, kernels
from minitrans.training.optimisation.adam_device import (
    adam_step_values, adam_update_device, adam_update_flat_device)
from minitrans.training.optimisation.flat_state import DECAYS, STEP_VALUES, FlatState, is_decayed
from minitrans.training.optimisation.optimizer import Optimizer, block


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


adam_update = kernels.pair(adam_update_reference, adam_update_fast, device=adam_update_device)


class Adam(Optimizer):
    """Adam with the paper's beta1 = 0.9, beta2 = 0.98, eps = 1e-9 (§5.3);
    with ``weight_decay`` > 0, AdamW's decoupled decay, of every parameter
    (``decay="all"``) or of the matrices only (``"matrices"``, GPT's: no
    bias or norm is decayed; ``flat_state.is_decayed``).

    The equations, and why they give every weight a step of about lr, are
    the docstring of ``adam_update_reference`` above, whose code reads as
    them; each step calls ``adam_update`` on every parameter. This class
    keeps m and v for each parameter (zeros at first) and the step count t.

    With the fast kernels, a model of at most FLAT_NUMBERS numbers is
    updated all at once instead (``optimisation.flat_state``): its
    gradients, m and v become views of three flat arrays, and each pass of
    the update runs once over them, the same numbers bit for bit. Beyond
    that size the per-parameter update, in blocks and on threads, is
    faster (both timed: benchmarks/results/adam_threads/). On a device the
    parameters become views of a fourth flat array too, and the whole
    update is one fused kernel (``adam_update_flat_device``), which also
    applies gradient clipping's scale (``scale_gradients``).
    """

    FLAT_NUMBERS = Optimizer.THREADED_NUMBERS

    def __init__(self, model, lr=1e-3, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.0, threads=None,
                 decay="all"):
        super().__init__(model, lr, threads)
        checks.check_choice("decay", decay, DECAYS)
        if not (isinstance(betas, (tuple, list)) and len(betas) == 2):
            raise ValueError(f"betas: expected two numbers in [0, 1), got {betas!r}")
        checks.check_probability("betas[0]", betas[0])
        checks.check_probability("betas[1]", betas[1])
        checks.check_number("eps", eps, low=0, low_open=True)
        checks.check_number("weight_decay", weight_decay, low=0)
        self.beta1, self.beta2 = (float(b) for b in betas)
        self.eps, self.weight_decay, self.decay = float(eps), float(weight_decay), decay
        self.m, self.v = {}, {}
        self._flat = None  # the FlatState of the last flat step
        self.gradient_scale = 1.0  # a scale the next flat device step applies (scale_gradients)
        self._scratch = {}  # thread id: that thread's scratch array (see _scratch_like)

    def zero_grad(self):
        self.gradient_scale = 1.0  # it was for the gradients being zeroed
        if self._current_flat() is not None:
            self._flat.grad.fill(0)  # every gradient is a view of it
        else:
            super().zero_grad()

    def scale_gradients(self, scale):
        """Gradient clipping's scale. On a device with the flat state it is
        only recorded, in ``gradient_scale``, and the next step's one kernel
        multiplies each gradient by it as it reads it: a pass over the
        gradients fewer. Until that step the gradients keep their values
        (``clipping.global_grad_norm`` counts the scale in). Elsewhere every
        gradient is scaled in place, as any optimiser's."""
        if backend.on_device() and self._current_flat() is not None:
            self.gradient_scale *= scale
        else:
            super().scale_gradients(scale)

    def update_all(self, lr):
        flat = self._flat_state() if kernels.active() == "fast" else None
        if flat is not None and backend.on_device():
            self._update_flat(flat, lr)  # the recorded scale goes in with the step values
            return
        if self.gradient_scale != 1.0:  # recorded, but this step does not read it: apply it
            super().scale_gradients(self.gradient_scale)
            self.gradient_scale = 1.0
        if flat is None:
            super().update_all(lr)
        else:
            self._update_flat(flat, lr)

    def update(self, name, param, grad, part, lr):
        weight_decay = self.weight_decay if is_decayed(name, param, self.decay) else 0.0
        param, grad, m, v = (block(a, part) for a in (param, grad, self.m[name], self.v[name]))
        adam_update(param, grad, m, v, self.step_count, lr, (self.beta1, self.beta2), self.eps,
                    weight_decay, scratch=self._scratch_like(grad))

    def _update_flat(self, flat, lr):
        """``adam_update_fast`` of every parameter at once: m, v and the step
        over the flat arrays, in blocks of BLOCK_BYTES on the CPU (they stay
        in the core's cache from one pass to the next); then each parameter
        takes its piece of the step. On a device, where the parameters are
        views of a flat array too, one fused kernel over the flat arrays,
        reading the step's numbers from device memory."""
        if backend.on_device():
            self.write_step_values(lr)
            self.flat_device_step()
            self.gradient_scale = 1.0  # applied
            return
        block_size = self.BLOCK_BYTES // flat.grad.itemsize
        for grad, m, v, step in flat.blocks(block_size):
            adam_step(grad, m, v, self.step_count, lr, (self.beta1, self.beta2), self.eps,
                      out=step)
        for (param, step), decayed in zip(flat.steps(), flat.decayed):
            apply_adam_step(param, step, lr, self.weight_decay if decayed else 0.0)

    def write_step_values(self, lr):
        """On a device: the numbers of this step (``adam_step_values``, with
        ``gradient_scale``) into the flat state's ``step_values``, the copy
        from the host that ``flat_device_step`` needs first (a CUDA graph of
        that step would run after it)."""
        self._flat.write_step_values(adam_step_values(
            self.step_count, lr, (self.beta1, self.beta2), self.weight_decay,
            self.gradient_scale))

    def flat_device_step(self):
        """The flat update on a device: one fused kernel over the flat
        parameters, gradients, m and v, each number decayed as the flat
        state's ``decay_mask`` says. Everything that changes from step to
        step is read from ``step_values``, none of it is a Python number,
        so a CUDA graph recorded at one step replays the next
        (tests/library/test_capture.py)."""
        flat = self._flat
        # slices, views of shape (1,): an integer index would copy on NumPy
        lr, m_hat_scale, v_hat_scale, decay, grad_scale = (
            flat.step_values[i:i + 1] for i in range(STEP_VALUES))
        adam_update_flat_device(flat.param, flat.grad, flat.m, flat.v, flat.decay_mask,
                                self.beta1, self.beta2, lr, m_hat_scale, v_hat_scale, self.eps,
                                decay, grad_scale)

    def flat_gradient(self):
        """The flat array every gradient is a view of, or None where the
        gradients are arrays of their own (``optimisation.clipping`` takes
        the norm over it in one pass). On a device it holds the gradients
        before ``gradient_scale``, which the next step applies."""
        flat = self._current_flat()
        return None if flat is None else flat.grad

    def _current_flat(self):
        """The FlatState, if the model's gradients, m and v (and on a device
        its parameters) are still its views."""
        if self._flat is not None and not self._flat.current(self.m, self.v):
            self._flat = None
        return self._flat

    def _flat_state(self):
        """The FlatState to update with (made again from the current values
        where an array was replaced), or None where the model is larger than
        FLAT_NUMBERS or its parameters cannot share flat arrays."""
        if self._current_flat() is None and FlatState.usable(self.slots, self.FLAT_NUMBERS):
            for name, param, _ in self.named_parameters():
                self.init_state(name, param)
            self._flat = FlatState(self.slots, self.m, self.v,
                                   holds_parameters=backend.on_device(), decay=self.decay)
        return self._flat

    def init_state(self, name, param):
        if name not in self.m:
            xp = backend.get_xp()
            self.m[name], self.v[name] = xp.zeros_like(param), xp.zeros_like(param)

    def _scratch_like(self, array):
        """An array of ``array``'s shape and dtype for the fast update to work
        in: a view of this thread's own scratch, made once and reused at
        every step and every block: fresh arrays per block would be memory
        new to the allocator each time, faulted in page by page (the times
        with both: benchmarks/results/adam_threads/)."""
        thread = threading.get_ident()
        buffer = self._scratch.get(thread)
        if (buffer is None or buffer.size < array.size or buffer.dtype != array.dtype
                or type(buffer) is not type(array)):
            buffer = self._scratch[thread] = backend.get_xp().empty(array.size, array.dtype)
        return buffer[:array.size].reshape(array.shape)

    def state_dict(self):
        """Arrays and the step count, keyed by qualified parameter name."""
        state = {"step": self.step_count}
        state.update({f"m/{name}": value for name, value in self.m.items()})
        state.update({f"v/{name}": value for name, value in self.v.items()})
        return state

    def load_state_dict(self, state):
        self.step_count = int(state["step"])
        # copies: the moments are updated in place and must not be shared
        self.m = {k[2:]: v.copy() for k, v in state.items() if k.startswith("m/")}
        self.v = {k[2:]: v.copy() for k, v in state.items() if k.startswith("v/")}

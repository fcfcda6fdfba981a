"""Optimisers: Adam (and AdamW) with the paper's settings, and plain SGD.
They update a model's parameters in place, by name. (Gradient clipping is
``minitrans.training.optimisation.clipping``'s, also importable from here.)

The update of one parameter, and its equations, are written once, as a pure
function in ``minitrans.training.optimisation.updates`` (``adam_update``, ``sgd_update``);
this module keeps the optimisers' state and schedules the updates: which
parameters, in which blocks, on which threads."""

import threading
from concurrent.futures import ThreadPoolExecutor, wait

from minitrans.core import backend, checks, kernels
from minitrans.core.threads import usable_cores
from minitrans.training.optimisation.clipping import clip_grad_norm, global_grad_norm  # noqa: F401
from minitrans.training.optimisation.flat_state import FlatState
from minitrans.training.optimisation.schedule import transformer_lr  # noqa: F401  (its old home)
from minitrans.training.optimisation.updates import adam_update, sgd_update


class Optimizer:
    """Updates the parameters of ``model.named_parameters()``: a tied weight
    appears once, with the sum of its gradients, so it is updated once.

    The model's tree of layers is walked once, here, as PyTorch's optimisers
    take their parameter list when they are made: a trainer's step would
    walk it several times (zero_grad, the gradient norm, the update), and
    each walk of a small model's many layers is a noticeable part of its
    step (the before-and-after runs: benchmarks/results/ab_steps/). Each step
    still looks every array up by name in its layer's dicts, so a
    checkpoint load or a move to the GPU, which replace the arrays, is
    followed; a layer added to the model afterwards needs a new optimiser.

    Each parameter's update is independent of the others, so on the CPU
    they run on ``threads`` threads at once (default: up to 4, one per core;
    one for a model of fewer than THREADED_NUMBERS numbers).
    NumPy lets go of Python's global lock inside its loops, and its element-
    wise loops use one core each, so two threads update two parameters
    truly in parallel. On the CPU a large parameter is also updated in
    blocks of BLOCK_BYTES: Adam's update is a dozen passes over the weight,
    its gradient, m, v and a scratch array, and on a block of 512 KB each
    all five stay in the core's cache from one pass to the next, where a
    whole 4 MB weight would go back to memory every pass (``python
    benchmarks/kernels.py`` times blocks against a whole array; its results
    are in benchmarks/results/kernels/). Every number is computed exactly as
    without blocks or threads, bit for bit.
    On CuPy the GPU runs the updates, whole, and one thread queues them (the
    strict backend takes that path too, so the tests run it).
    """

    BLOCK_BYTES = 2**19
    # Below this many numbers in all, one thread updates every parameter:
    # handing work to a second costs about what it saves on a small model,
    # and saves time on a large one (benchmarks/results/adam_threads/)
    THREADED_NUMBERS = 2**21

    def __init__(self, model, lr, threads=None):
        checks.check_number("lr", lr, low=0, low_open=True)
        self.model = model
        self.lr = lr
        self.step_count = 0
        # (qualified name, layer, name in the layer) of every parameter
        self._slots = [(prefix + key, module, key) for prefix, module in model.named_modules()
                       for key in module.params]
        if threads is None:
            threads = 1 if backend.on_device() else min(4, usable_cores())
        checks.check_positive_int("threads", threads)
        self.threads = threads
        self._pool = None

    def named_parameters(self):
        """(qualified name, parameter, gradient) of every parameter, as
        ``model.named_parameters()`` gives them, without walking the tree;
        ``clip_grad_norm(optimizer, ...)`` takes it in place of the model."""
        return [(name, module.params[key], module.grads[key])
                for name, module, key in self._slots]

    def zero_grad(self):
        """Set every gradient of the model to zero (``model.zero_grad()``,
        without walking the tree)."""
        for _, module, key in self._slots:
            module.grads[key].fill(0)

    def step(self, lr=None):
        """One update with learning rate ``lr`` (default: the one given at
        construction); returns the learning rate used."""
        lr = self.lr if lr is None else lr
        checks.check_number("lr", lr, low=0, low_open=True)  # finite: inf would make NaN weights
        self.step_count += 1
        self.update_all(float(lr))
        return lr

    def update_all(self, lr):
        """Update every parameter, piece by piece, on the threads."""
        pieces = []
        for name, param, grad in self.named_parameters():
            self.init_state(name, param)
            pieces += [(name, param, grad, part) for part in self._blocks(param, grad)]
        self._on_threads([lambda piece=piece: self.update(*piece, lr=lr) for piece in pieces],
                         [block(piece[1], piece[3]).size for piece in pieces])

    def init_state(self, name, param):
        """Create the optimiser's arrays for a parameter on its first step
        (before the threads start, so that each is made once)."""

    def update(self, name, param, grad, part, lr):
        """Update ``block(param, part)`` in place, from ``block(grad, part)``."""
        raise NotImplementedError

    def _blocks(self, param, grad):
        """The parts of a parameter to update one at a time: slices of its
        flattened array, or [None] for the whole of it."""
        step = self.BLOCK_BYTES // param.itemsize
        whole = backend.on_device() or param.size <= step
        if whole or not (param.flags.c_contiguous and grad.flags.c_contiguous):
            return [None]
        return [slice(start, start + step) for start in range(0, param.size, step)]

    def _on_threads(self, updates, sizes):
        """Run every update, dealt out to the threads as one list each: the
        largest first, each to the thread with the least work so far, so
        that they finish at about the same time. One task per thread, not
        one per piece: handing a piece to a pool thread costs about as much
        as updating a small parameter, which made a tiny model's Adam three
        times slower on two threads than on one."""
        if self.threads == 1 or len(updates) == 1 or sum(sizes) < self.THREADED_NUMBERS:
            _run_all(updates)
            return
        shares = [[] for _ in range(self.threads)]
        loads = [0] * self.threads
        for index in sorted(range(len(updates)), key=lambda i: -sizes[i]):
            least = loads.index(min(loads))
            shares[least].append(updates[index])
            loads[least] += sizes[index]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads - 1,
                                            thread_name_prefix="minitrans-optimizer")
        futures = [self._pool.submit(_run_all, share) for share in shares[1:] if share]
        try:
            _run_all(shares[0])  # this thread's share
        finally:
            wait(futures)
        for future in futures:
            future.result()  # re-raises an error from a thread


def _run_all(updates):
    for update in updates:
        update()


def block(array, part):
    """The flat slice ``part`` of ``array``, a view that writes through
    (``part`` None: the array itself)."""
    return array if part is None else array.reshape(-1)[part]


class SGD(Optimizer):
    """Stochastic gradient descent, with optional momentum; its update rule
    is ``minitrans.training.optimisation.updates.sgd_update``."""

    def __init__(self, model, lr=0.1, momentum=0.0, threads=None):
        super().__init__(model, lr, threads)
        checks.check_probability("momentum", momentum)  # mu >= 1 would let v grow without bound
        self.momentum = float(momentum)
        self.velocity = {}

    def init_state(self, name, param):
        if self.momentum and name not in self.velocity:
            self.velocity[name] = backend.get_xp().zeros_like(param)

    def update(self, name, param, grad, part, lr):
        velocity = block(self.velocity[name], part) if self.momentum else None
        sgd_update(block(param, part), block(grad, part), lr, velocity, self.momentum)

    def state_dict(self):
        return {"step": self.step_count, **{f"velocity/{k}": v for k, v in self.velocity.items()}}

    def load_state_dict(self, state):
        self.step_count = int(state["step"])
        self.velocity = {
            k.split("/", 1)[1]: v.copy() for k, v in state.items() if k.startswith("velocity/")
        }


class Adam(Optimizer):
    """Adam (Kingma and Ba, 2015) with the paper's beta1 = 0.9, beta2 = 0.98,
    eps = 1e-9 (§5.3); with ``weight_decay`` > 0, AdamW's decoupled decay
    (Loshchilov and Hutter, 2019).

    The equations, and why they give every weight a step of about lr, are
    the docstring of ``minitrans.training.optimisation.updates.adam_update_reference``,
    whose code reads as them; each step calls ``adam_update`` on every
    parameter. This class keeps m and v for each parameter (zeros at first)
    and the step count t.

    With the fast kernels, a model of at most FLAT_NUMBERS numbers is
    updated all at once instead (``minitrans.training.optimisation.flat_state``): its
    gradients, m and v become views of three flat arrays, and each pass of
    the update runs once over them, the same numbers bit for bit. Beyond
    that size the per-parameter update, in blocks and on threads, is
    faster (both timed: benchmarks/results/adam_threads/).
    """

    FLAT_NUMBERS = Optimizer.THREADED_NUMBERS

    def __init__(self, model, lr=1e-3, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.0, threads=None):
        super().__init__(model, lr, threads)
        if not (isinstance(betas, (tuple, list)) and len(betas) == 2):
            raise ValueError(f"betas: expected two numbers in [0, 1), got {betas!r}")
        checks.check_probability("betas[0]", betas[0])
        checks.check_probability("betas[1]", betas[1])
        checks.check_number("eps", eps, low=0, low_open=True)
        checks.check_number("weight_decay", weight_decay, low=0)
        self.beta1, self.beta2 = (float(b) for b in betas)
        self.eps, self.weight_decay = float(eps), float(weight_decay)
        self.m, self.v = {}, {}
        self._flat = None  # the FlatState of the last flat step
        self._scratch = {}  # thread id: that thread's scratch array (see _scratch_like)

    def zero_grad(self):
        if self._current_flat() is not None:
            self._flat.grad.fill(0)  # every gradient is a view of it
        else:
            super().zero_grad()

    def update_all(self, lr):
        flat = self._flat_state() if kernels.active() == "fast" else None
        if flat is None:
            super().update_all(lr)
            return
        block_size = None if backend.on_device() else self.BLOCK_BYTES // flat.grad.itemsize
        flat.adam_update(self.step_count, lr, (self.beta1, self.beta2), self.eps,
                         self.weight_decay, block_size)

    def _current_flat(self):
        """The FlatState, if the model's gradients, m and v are still its views."""
        if self._flat is not None and not self._flat.current(self.m, self.v):
            self._flat = None
        return self._flat

    def _flat_state(self):
        """The FlatState to update with (made again from the current values
        where an array was replaced), or None where the model is larger than
        FLAT_NUMBERS or its parameters cannot share flat arrays."""
        if self._current_flat() is None and FlatState.usable(self._slots, self.FLAT_NUMBERS):
            for name, param, _ in self.named_parameters():
                self.init_state(name, param)
            self._flat = FlatState(self._slots, self.m, self.v)
        return self._flat

    def init_state(self, name, param):
        if name not in self.m:
            xp = backend.get_xp()
            self.m[name], self.v[name] = xp.zeros_like(param), xp.zeros_like(param)

    def update(self, name, param, grad, part, lr):
        param, grad, m, v = (block(a, part) for a in (param, grad, self.m[name], self.v[name]))
        adam_update(param, grad, m, v, self.step_count, lr, (self.beta1, self.beta2), self.eps,
                    self.weight_decay, scratch=self._scratch_like(grad))

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

"""What every optimiser does apart from its update rule: which parameters it
updates (``model.named_parameters()``, walked once), in which blocks, and on
which threads. Adam (``optimisation.adam``) and SGD (``optimisation.sgd``)
are ``Optimizer``s that add their state and their update of one block."""

from concurrent.futures import ThreadPoolExecutor, wait

from minitrans.core import backend, checks
from minitrans.core.threads import usable_cores


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

    A subclass gives ``update`` (one block of one parameter) and, where it
    keeps state per parameter, ``init_state``.
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
        self.slots = [(prefix + key, module, key) for prefix, module in model.named_modules()
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
                for name, module, key in self.slots]

    def zero_grad(self):
        """Set every gradient of the model to zero (``model.zero_grad()``,
        without walking the tree)."""
        for _, module, key in self.slots:
            module.grads[key].fill(0)

    def scale_gradients(self, scale):
        """Multiply every gradient by ``scale`` (gradient clipping's), in place."""
        for _, _, grad in self.named_parameters():
            grad *= scale

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

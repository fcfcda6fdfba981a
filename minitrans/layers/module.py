"""The base class of every layer: parameters, gradients, children, modes.

The contract every layer follows (as in cs231n's layers and llm.c):

* ``params`` and ``grads`` are dicts from a name to an array, with the same
  keys. Names follow the paper (``W``, ``gamma``, ...; a child layer is
  named after the paper's weight it computes, ``W_Q``, ``W_1``).
* ``forward(...)`` computes the output and keeps, in ``self.cache``, exactly
  what ``backward`` needs.
* ``backward(grad_output)`` returns the gradient of each floating-point array
  that was passed to ``forward``, in the same order: a single array when one
  was passed, a tuple when several were, ``None`` when there were none
  (token ids and masks get no gradient). It ADDS the parameter gradients into
  ``grads``, so that a weight used twice receives the sum of both uses;
  ``zero_grad()`` resets them.

A layer that holds other layers as attributes (directly or in a list) is their
parent: ``named_parameters()`` walks the tree and gives qualified names such
as ``"layers.0.self_attn.W_Q.W"`` (the weight of the query projection of the
first layer's self-attention), the keys of optimiser state and checkpoints.
"""

from minitrans.core import backend


class Module:
    """Parameters, gradients, child layers and the train/eval switch."""

    def __init__(self):
        self.params = {}
        self.grads = {}
        self.buffers = {}  # constant arrays that move with the layer (PE table)
        self.cache = None
        self.training = True

    # -------------------------------------------------------------- params

    def add_param(self, name, value):
        """Register a trainable array and a zero gradient of the same shape."""
        self.params[name] = value
        self.grads[name] = backend.get_xp().zeros_like(value)

    def zero_grad(self):
        """Set every gradient of this layer and its children to zero."""
        zero_grads(self.modules())

    def children(self):
        """(name, child) pairs: attributes that are Modules or lists of them.

        Attributes whose name starts with ``_`` are references, not children
        (a tied layer points at the layer that owns the shared weight).
        """
        for name, value in vars(self).items():
            if name.startswith("_"):
                continue
            if isinstance(value, Module):
                yield name, value
            elif isinstance(value, (list, tuple)):
                for index, item in enumerate(value):
                    if isinstance(item, Module):
                        yield f"{name}.{index}", item

    def named_modules(self, prefix=""):
        """(qualified name, module) for this module and all below it."""
        yield prefix, self
        for name, child in self.children():
            yield from child.named_modules(f"{prefix}{name}.")

    def modules(self):
        """This module and all below it, parents first (as ``named_modules``,
        without building the names: the trainer walks the tree every step)."""
        found = [self]
        for _, child in self.children():
            found.extend(child.modules())
        return found

    def named_parameters(self):
        """(qualified name, parameter, gradient) for every trainable array; the
        gradient is None in a copy that only runs forward (no gradient arrays)."""
        for prefix, module in self.named_modules():
            for name, value in module.params.items():
                yield prefix + name, value, module.grads.get(name)

    def num_parameters(self):
        return sum(int(value.size) for _, value, _ in self.named_parameters())

    # --------------------------------------------------------------- modes

    def train(self, mode=True):
        """Training mode: dropout is active."""
        for module in self.modules():
            module.training = mode
        return self

    def eval(self):
        """Evaluation mode: dropout is the identity."""
        return self.train(False)

    # ------------------------------------------------------------ devices

    def apply_to_arrays(self, convert):
        """Replace every parameter, gradient and buffer by ``convert(array)``.

        Used by ``minitrans.to_device`` and ``minitrans.to_numpy``; the cache
        is dropped because it belongs to the old device.
        """
        for module in self.modules():
            for store in (module.params, module.grads, module.buffers):
                for name in store:
                    store[name] = convert(store[name])
            module.cache = None
            module.moved()
        return self

    def moved(self):
        """Called after the arrays moved to another device; a hook for layers
        that hold device state other than arrays (a reused scratch buffer)."""

    def astype(self, dtype):
        """Cast all floating-point arrays to ``dtype``, in place."""
        return backend.to_device(self, dtype=dtype)

    # --------------------------------------------------------- bookkeeping

    def saved(self):
        """The cache of the last forward; a clear error if there was none."""
        if self.cache is None:
            raise RuntimeError(
                f"{type(self).__name__}.backward() was called before forward(); "
                "run forward first so that there is something to differentiate"
            )
        return self.cache

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def __repr__(self):
        shapes = ", ".join(f"{k}={tuple(v.shape)}" for k, v in self.params.items())
        return f"{type(self).__name__}({shapes})"


def zero_grads(modules):
    """Set every gradient of each of ``modules`` to zero (``zero_grad`` of a
    tree whose list of layers the caller already holds)."""
    for module in modules:
        for grad in module.grads.values():
            grad.fill(0)

"""Adam's arrays for all the parameters at once: gradients, m and v as views
of three flat arrays (``optimisation.adam`` runs its update over them), and
on a device the parameters too.

Adam updates each parameter with a dozen element-wise passes. The tiny
config has 82 parameters (a bias of 64 numbers is one of them), so a step
is about a thousand NumPy calls, each costing a microsecond or two
whatever its size, where the arithmetic over its 236,176 numbers takes a
fraction of a millisecond. With every gradient, every m and every v a view
of one flat array, the passes run once over each flat array, and only
``param -= step`` is left per parameter (on the CPU the parameters stay the
model's own arrays: a learner's reference to a weight keeps seeing it
change). The flat update is faster on small models, whose per-parameter
update is mostly Python calls, and gains nothing on large ones, whose
passes are long anyway and whose update runs on two threads (both timed:
benchmarks/results/adam_threads/).
The numbers are those of the per-parameter update, bit for bit: the same
operations on the same values, in the same order for each element.

On a device each ``param -= step`` would be a kernel launch of its own, 82
of them for the tiny config, each costing microseconds of the GPU's time
for a few thousand numbers. There the parameters become views of a fourth
flat array (their values copied in, the model's arrays replaced by the
views), and the whole update is one kernel over the four. A reference to
a weight taken before the first step then stops following it: take it
from the layer (``module.params[name]``) after a step, as the optimiser,
the moving average and the replicas do.

The layers only ever add into their gradients in place (``grads[name] +=
dW``), so a gradient that is a view works unchanged. Whatever replaces an
array (a checkpoint load, a move to the GPU, a loaded optimiser state) is
noticed on the next step, by identity, and the flat arrays are made again
from the current values.
"""

import itertools

from minitrans.core import backend

STEP_VALUES = 5  # how many numbers ``write_step_values`` takes (``adam_step_values``)


# Which parameters AdamW's weight decay applies to (Adam's ``decay``): "all"
# of them, or only the "matrices" (GPT-2's and nanoGPT's choice): weight
# matrices, embedding tables, learned position tables, never a bias or a
# norm's gain or shift: few numbers, which a pull towards 0 would only move
# away from what they need (a gain's natural value is 1, not 0).
DECAYS = ("all", "matrices")


def is_decayed(name, param, decay="all"):
    """Whether AdamW's weight decay applies to the parameter ``name``
    (``param``, its array) when the optimiser's weight_decay is above 0:
    with ``decay`` "all" to every parameter, with "matrices" to those of two
    or more dimensions. The one rule of every path of Adam's update."""
    return decay == "all" or param.ndim >= 2


class FlatState:
    """Flat gradient, m and v arrays whose pieces are the model's gradients
    and Adam's moments. ``slots``: (qualified name, layer, name in the layer)
    of every parameter (``Optimizer.slots``); ``m``, ``v``: Adam's dicts by
    qualified name, whose entries it replaces with views. ``decay``: which
    parameters are decayed (``is_decayed``); ``decayed`` holds, per
    parameter, whether it is.

    ``holds_parameters`` (on a device): the parameters become views of a
    flat ``param`` array as well, and ``decay_mask`` holds, for every
    number, 1 where its parameter is decayed (``is_decayed``) and 0 where
    it is not. Otherwise ``param`` and ``decay_mask`` are None, and
    ``step`` is the scratch array of the CPU's step."""

    def __init__(self, slots, m, v, holds_parameters=False, decay="all"):
        xp = backend.get_xp()
        self.slots, self.holds_parameters = slots, holds_parameters
        params = [module.params[key] for _, module, key in slots]
        self.decayed = [is_decayed(name, param, decay)
                        for (name, _, _), param in zip(slots, params)]
        ends = list(itertools.accumulate(int(param.size) for param in params))
        self.bounds = list(zip([0] + ends[:-1], ends))  # each parameter's (start, stop)
        total, dtype = ends[-1], params[0].dtype
        self.grad, self.m, self.v = (xp.empty(total, dtype=dtype) for _ in range(3))
        self.param = xp.empty(total, dtype=dtype) if holds_parameters else None
        self.step = None if holds_parameters else xp.empty(total, dtype=dtype)
        self.decay_mask = self._decay_mask(dtype) if holds_parameters else None
        # On a device, the numbers that change with the step (the learning
        # rate, the bias corrections, the decay, the gradients' scale), which
        # the kernels read as arrays: written in place before each step, so
        # that a CUDA graph of the kernels, which would freeze Python
        # numbers, reads them anew
        self.step_values = xp.zeros(STEP_VALUES, dtype=dtype)
        self.views = []  # per parameter: its (gradient, m, v, parameter or None) views
        for (name, module, key), param, (start, stop) in zip(slots, params, self.bounds):
            views = tuple(flat[start:stop].reshape(param.shape) for flat in self._flats())
            currents = (module.grads[key], m[name], v[name], param)
            for view, current in zip(views, currents):
                view[...] = current
            module.grads[key], m[name], v[name] = views[:3]
            if holds_parameters:
                module.params[key] = views[3]
            self.views.append(views if holds_parameters else views + (None,))

    def _flats(self):
        """The flat arrays whose pieces are views: gradient, m, v (and the parameters)."""
        return (self.grad, self.m, self.v) + ((self.param,) if self.holds_parameters else ())

    def _decay_mask(self, dtype):
        """1 for every number whose parameter is decayed, 0 for the others."""
        mask = backend.get_xp().ones(self.bounds[-1][1], dtype=dtype)
        for decayed, (start, stop) in zip(self.decayed, self.bounds):
            if not decayed:
                mask[start:stop] = 0
        return mask

    @staticmethod
    def usable(slots, most_numbers):
        """Whether the parameters can share flat arrays: at least one, at most
        ``most_numbers`` numbers in all, all of one floating-point dtype and
        array type, each with a gradient of its own shape and dtype."""
        params = [(module.params[key], module.grads[key]) for _, module, key in slots]
        if not params or sum(int(param.size) for param, _ in params) > most_numbers:
            return False
        first = params[0][0]
        return first.dtype.kind == "f" and all(
            type(param) is type(first) and param.dtype == first.dtype
            and type(grad) is type(first) and grad.dtype == first.dtype
            and grad.shape == param.shape
            for param, grad in params
        )

    def current(self, m, v):
        """Whether it was made for this kind of backend (host or device), and
        every gradient, m and v is still its view, and every parameter its
        view (on a device) or of its view's shape and dtype."""
        if self.holds_parameters != backend.on_device():
            return False
        for (name, module, key), (grad, m_view, v_view, param_view) in zip(self.slots,
                                                                            self.views):
            param = module.params[key]
            if (module.grads[key] is not grad or m.get(name) is not m_view
                    or v.get(name) is not v_view or param.shape != grad.shape
                    or param.dtype != grad.dtype or type(param) is not type(grad)
                    or (param_view is not None and param is not param_view)):
                return False
        return True

    def blocks(self, block_size=None):
        """(gradient, m, v, step) slices of the flat arrays, ``block_size``
        numbers each (None: the whole arrays); ``step`` is the scratch array
        that Adam's step is written into."""
        size = block_size or self.grad.size
        for start in range(0, self.grad.size, size):
            yield tuple(flat[start:start + size]
                        for flat in (self.grad, self.m, self.v, self.step))

    def write_step_values(self, values):
        """``values`` (STEP_VALUES Python numbers) into ``step_values``, in
        place, each number rounded to the parameters' dtype as the kernels
        would round a Python number. On a device one copy from the host
        straight into the array (CuPy's ``set``), not a copy into a fresh
        array and a second into this one."""
        host = backend.to_numpy(values).astype(self.step_values.dtype)
        if backend.on_device():
            self.step_values.set(host)
        else:
            self.step_values[...] = host

    def steps(self, step=None):
        """(parameter, its piece of the step array, in its shape) of every
        parameter: the flat step is applied to the model's own arrays.
        ``step``: a flat step array of the caller's (a fused kernel's output),
        in place of this state's scratch (which only a state on the CPU has)."""
        step = self.step if step is None else step
        for (_, module, key), (start, stop) in zip(self.slots, self.bounds):
            param = module.params[key]
            yield param, step[start:stop].reshape(param.shape)

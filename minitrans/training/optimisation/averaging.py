"""A moving average of the weights: the model that evaluations measure and checkpoints keep.

Near the end of training, Adam's steps make the weights wander around a
good point rather than reach it: each step follows one batch's gradient.
Held-out exact match then swings by a few points from one evaluation to the
next. The paper (§6.1) averages the weights of its last 5 or 20 checkpoints
for this reason. The same idea, step by step, is an exponential moving
average of the weights (Polyak averaging):

    average <- decay * average + (1 - decay) * weights        after every step

It costs one pass over the parameters a step, and the optimiser never sees
it: training goes on from the weights, and only evaluation, ``best.npz``
and the checkpoint's ``param/`` arrays (what ``translate``, ``evaluate`` and
the exports read) use the average. The weights themselves are saved too,
under ``optim/weights/``, so that a resumed run trains on from exactly them.

An average over the last 1 / (1 - decay) steps would be pulled back towards
the random weights of the first steps, so the decay starts small and grows
towards ``decay`` with the optimiser's step count t:

    decay_t = min(decay, (1 + t) / (10 + t))

Measured with ``python benchmarks/task_targets.py --tasks numbers,dates``
before and after: benchmarks/results/task_targets/.
"""

from minitrans.model.replicas import replicate


def decay_at(decay, step):
    """The decay of the average's update after optimiser step ``step``."""
    return min(decay, (1 + step) / (10 + step))


class WeightAverage:
    """The moving average of ``model``'s weights, kept as a model of its own.

    ``self.model`` is a copy of ``model`` (the same layers and buffers) whose
    parameters are the average's arrays, so it evaluates and decodes as any
    model does. It has no gradients: it only runs forward. A tied matrix
    needs nothing of its own here: one layer holds it and the other reads
    it through that layer, in the copy as in the model.
    """

    def __init__(self, model, decay):
        self.decay = float(decay)
        self.model = replicate(model, 0, gradients=False)
        self.model.eval()
        # (the model's layer, the weights' name in it, their average), parameter by
        # parameter: the weights are looked up at every update, as on a device the
        # optimiser makes them views of its flat array (optimisation.flat_state)
        self._slots = []
        for layer, twin in zip(model.modules(), self.model.modules()):
            for key, weights in layer.params.items():
                twin.params[key] = weights.copy()
                self._slots.append((layer, key, twin.params[key]))

    def update(self, step):
        """Move the average towards the weights, after optimiser step ``step``."""
        keep = decay_at(self.decay, step)
        for layer, key, average in self._slots:
            average += (1 - keep) * (layer.params[key] - average)

    def restart(self):
        """Start the average again at the weights as they are (after they
        were replaced from outside, as a checkpoint load does)."""
        for layer, key, average in self._slots:
            average[...] = layer.params[key]

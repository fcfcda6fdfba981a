"""Stochastic gradient descent, with optional momentum: its update rule and
the optimiser that applies it to a model (in blocks and on threads, as
every ``optimisation.optimizer.Optimizer``)."""

from minitrans.core import backend, checks
from minitrans.training.optimisation.optimizer import Optimizer, block


def sgd_update(param, grad, lr, velocity=None, momentum=0.0):
    """w <- w - lr * g, or with momentum mu: v <- mu v + g,  w <- w - lr * v."""
    if momentum:
        velocity *= momentum
        velocity += grad
        grad = velocity
    param -= lr * grad


class SGD(Optimizer):
    """Stochastic gradient descent, with optional momentum; its update rule
    is ``sgd_update`` above."""

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

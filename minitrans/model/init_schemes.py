"""How a model's weights start (``ModelConfig.init``): the layers' own
initial values, or GPT-2's.

"xavier" keeps what each layer draws when it is built: Glorot and Bengio's
uniform matrices (``layers.init.xavier_uniform``), embeddings of standard
deviation d_model^-0.5, biases 0, norms 1 and 0.

"gpt" is GPT-2's scheme (Radford et al., 2019; as nanoGPT writes it): every
matrix and every table (token embeddings, learned positions) drawn from
N(0, 0.02^2), and the two matrices that write into the residual stream,
attention's W_O and the feed-forward network's last matrix, from
N(0, (0.02 / sqrt(2 N))^2), N the number of layers. The residual stream is
a sum of 2 N such outputs, one per sub-layer; with each scaled down by
sqrt(2 N), its variance at the top no longer grows with depth. Biases stay
0 and norms 1 and 0, as the layers made them.
"""

import math

from minitrans.layers import init
from minitrans.layers.feedforward import FeedForward
from minitrans.layers.multihead import MultiHeadAttention
from minitrans.layers.swiglu import SwiGLUFeedForward

INITS = ("xavier", "gpt")
GPT_STD = 0.02

# The layers whose last projection adds into the residual stream, and its name
RESIDUAL_OUTPUTS = {MultiHeadAttention: "W_O", FeedForward: "W_2", SwiGLUFeedForward: "W_down"}


def apply_init(model, scheme, layers, rng):
    """Give ``model`` the initial weights of ``scheme`` (one of INITS); its
    layers already hold "xavier"'s. ``layers``: N, the depth of the model's
    stacks; ``rng``: the host generator the layers drew from."""
    if scheme == "gpt":
        gpt_init(model, layers, rng)


def gpt_init(model, layers, rng):
    """GPT-2's initial weights, drawn in place into every matrix and table
    of ``model`` (each once, however many layers share it), in the order of
    ``named_modules``; vectors (biases, norms) keep their values."""
    residual = residual_outputs(model)
    for _, module in model.named_modules():
        std = GPT_STD / math.sqrt(2 * layers) if id(module) in residual else GPT_STD
        for param in module.params.values():
            if param.ndim >= 2:
                param[...] = init.normal(rng, param.shape, std)


def residual_outputs(model):
    """The ids of the Linear layers of ``model`` whose output is added to
    the residual stream (``RESIDUAL_OUTPUTS``)."""
    found = set()
    for _, module in model.named_modules():
        for kind, name in RESIDUAL_OUTPUTS.items():
            if isinstance(module, kind):
                found.add(id(getattr(module, name)))
    return found

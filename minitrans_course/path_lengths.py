"""Table 1 of the paper, measured: self-attention, recurrent and convolutional
layers compared by complexity per layer, sequential operations and maximum
path length (lesson 0).

    layer                 complexity per layer   sequential ops   max path length
    self-attention        O(n^2 d)               O(1)             O(1)
    recurrent             O(n d^2)               O(n)             O(n)
    convolutional         O(k n d^2)             O(1)             O(n / k), O(log_k n) dilated

Nothing here asserts those formulas; each number is measured on layers that
run. The path length is found by dependence: two inputs that differ only at
position 0 go through the layers, and we look at which outputs differ. The sequential operations
are counted by wrapping the function each layer calls once per dependent
step. The gradient against distance comes from the layers' own backwards.

The kinds: "attention" (softmax(z z^T / sqrt(d)) z, minitrans's
ScaledDotProductAttention with Q = K = V = z), "recurrent" (RecurrentLayer),
"convolution" (a causal 1-D convolution with a contiguous kernel of width
k, as in the decoders of ByteNet and ConvS2S) and "dilated" (the same with
dilation k^l in layer l, as in ByteNet and WaveNet).
"""

import math
import time

from minitrans.core import backend, checks
from minitrans.layers.attention import ScaledDotProductAttention
from minitrans.layers.recurrent import RecurrentLayer

KINDS = ("attention", "recurrent", "convolution", "dilated")

# The paper's Table 1 (restricted self-attention left out), as text.
PAPER = {
    "attention": ("O(n^2 d)", "O(1)", "O(1)"),
    "recurrent": ("O(n d^2)", "O(n)", "O(n)"),
    "convolution": ("O(k n d^2)", "O(1)", "O(n/k)"),
    "dilated": ("O(k n d^2)", "O(1)", "O(log_k(n))"),
}


class CausalConv1d:
    """z_out[t] = tanh(sum over j < k of z[t - j * dilation] W[j]), with z = 0
    before the start: position t sees itself and the past only.

    The k shifted copies of z are laid side by side, so that the whole layer
    is one (B*n, k*d) x (k*d, d) product: every position at once.

    Inputs:  z (B, n, d)
    Returns: (B, n, d)
    """

    def __init__(self, d, k, dilation, rng):
        self.k, self.dilation = k, dilation
        self.W = backend.from_host(rng.normal(0.0, 1.0 / math.sqrt(k * d), size=(k * d, d)))
        self.products = 0  # how many times forward has multiplied

    def forward(self, z):
        xp = backend.get_xp()
        B, n, d = z.shape
        reach = (self.k - 1) * self.dilation
        padded = xp.concatenate([xp.zeros((B, reach, d), dtype=z.dtype), z], axis=1)
        shifted = [
            padded[:, reach - j * self.dilation : reach - j * self.dilation + n]
            for j in range(self.k)
        ]  # shifted[j][:, t] = z[:, t - j * dilation]
        self.products += 1
        return xp.tanh(xp.concatenate(shifted, axis=-1) @ self.W)


def _attention_forward(layer):
    def forward(z):
        return layer.forward(z, z, z)

    return forward


def build_stack(kind, layers, d, k=3, seed=0):
    """``layers`` layers of ``kind`` (not "recurrent"): a list of functions
    z (B, n, d) -> (B, n, d) and the objects that count their products."""
    checks.check_choice("kind", kind, ("attention", "convolution", "dilated"))
    checks.check_positive_int("layers", layers)
    rng = backend.host_rng(seed)
    if kind == "attention":
        parts = [ScaledDotProductAttention() for _ in range(layers)]
        return [_attention_forward(p) for p in parts], parts
    parts = [CausalConv1d(d, k, k**i if kind == "dilated" else 1, rng) for i in range(layers)]
    return [p.forward for p in parts], parts


def _pair(n, d, seed):
    """Two batch rows (2, n, d): row 0 all zeros, row 1 zeros but for a
    random vector at position 0.

    With zero biases an all-zero input gives exactly zero everywhere, so an
    output of row 1 differs from row 0 exactly where it depends on input 0,
    however small the dependence: nothing else is added to it to round it
    away. (On random inputs the change of x_0 fades below float64's
    resolution after some 60 tanh steps and output n-1 would look
    independent of it: the vanishing gradient of lesson 0.)
    """
    z = backend.host_rng(seed).normal(size=(2, n, d))
    z[0] = 0.0
    z[1, 1:] = 0.0
    return backend.from_host(z)


def _differs(out):
    """For each position of a (2, n, d) output: do the two rows differ?"""
    return [bool(changed) for changed in backend.to_numpy(abs(out[1] - out[0]).max(axis=-1) > 0)]


def path_length(kind, n, d=4, k=3, seed=0):
    """The maximum path length, measured: how many layers (for "recurrent":
    recurrent steps, products by W_h) a change of input position 0 goes
    through before output position n - 1 changes.

    Layers are stacked one at a time until the last output moves. For the
    recurrent layer the steps that receive a changed h_{t-1} are counted
    while h_{n-1} is computed.
    """
    checks.check_choice("kind", kind, KINDS)
    checks.check_int("n", n, low=2)
    z = _pair(n, d, seed)
    if kind == "recurrent":
        layer = RecurrentLayer(d, d, rng=seed)
        carried = []
        plain_step = layer.step

        def step(a_in, h_prev):
            carried.append(bool(abs(h_prev[1] - h_prev[0]).max() > 0))
            return plain_step(a_in, h_prev)

        layer.step = step  # an instance attribute: forward calls it for each t
        if not _differs(layer.forward(z))[n - 1]:
            raise RuntimeError("the last state does not depend on the first input")
        return sum(carried)
    for layers in range(1, n + 1):
        functions, _ = build_stack(kind, layers, d, k, seed)
        out = z
        for f in functions:
            out = f(out)
        if _differs(out)[n - 1]:
            return layers
    raise RuntimeError(f"{n} {kind} layers do not connect position 0 to position {n - 1}")


def sequential_steps(kind, n, d=4, k=3, seed=0):
    """The number of dependent steps one layer's forward takes on a length-n
    input: calls of RecurrentLayer.step, or products of one attention or
    convolution layer, counted as they happen."""
    checks.check_choice("kind", kind, KINDS)
    z = _pair(n, d, seed)
    if kind == "recurrent":
        layer = RecurrentLayer(d, d, rng=seed)
        calls = []
        plain_step = layer.step
        layer.step = lambda a_in, h_prev: calls.append(1) or plain_step(a_in, h_prev)
        layer.forward(z)
        return len(calls)
    (forward,), (part,) = build_stack(kind, 1, d, k, seed)
    if kind == "attention":
        # One call computes every position: Q K^T, softmax, P V, each over all n at once.
        calls = []
        plain_forward = part.forward
        part.forward = lambda Q, K, V: calls.append(1) or plain_forward(Q, K, V)
        forward(z)
        return len(calls)
    forward(z)
    return part.products


def multiply_adds(kind, n, d, k=3):
    """Multiply-adds of one layer on one sequence, counted from the shapes of
    its matrix products (projections to Q, K, V left out, as in Table 1):

        attention:    Q K^T (n, d)(d, n) and P V (n, n)(n, d):  2 n^2 d
        recurrent:    x_t W_x and h_{t-1} W_h for n steps:       2 n d^2
        convolution:  (n, k d)(k d, d):                          k n d^2
    """
    checks.check_choice("kind", kind, KINDS)
    if kind == "attention":
        return n * d * n + n * n * d
    if kind == "recurrent":
        return n * (d * d + d * d)
    return n * (k * d) * d


def time_layer(kind, n, d, k=3, repeats=3, seed=0):
    """The best of ``repeats`` wall-clock times (seconds) of one forward of a
    layer of ``kind`` on a (1, n, d) input."""
    checks.check_choice("kind", kind, KINDS)
    z = backend.from_host(backend.host_rng(seed).normal(size=(1, n, d)))
    if kind == "recurrent":
        forward = RecurrentLayer(d, d, rng=seed).forward
    else:
        (forward,), _ = build_stack(kind, 1, d, k, seed)
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        backend.to_numpy(forward(z)[0, -1])  # waits for a GPU to finish
        best = min(best, time.perf_counter() - start)
    return best


def gradient_by_distance(kind, n, d, W_h=None, x_scale=1.0, seed=0):
    """||d out_{n-1} / d x_t|| (Frobenius) for t = 0 .. n-1, from the layer's
    backward, for kind "recurrent" (W_h: the recurrent weight to use, (d, d))
    or "attention" (Q = K = V = x). Returns a host list of n floats; entry t
    is at distance n - 1 - t from the output.

    Row i of the Jacobian is the backward of a unit upstream gradient on
    feature i of the last position: the d rows in one batch of d copies.
    """
    checks.check_choice("kind", kind, ("attention", "recurrent"))
    xp = backend.get_xp()
    x = backend.host_rng(seed).normal(scale=x_scale, size=(1, n, d))
    x = xp.repeat(backend.from_host(x), d, axis=0)  # (d, n, d), d equal rows
    upstream = xp.zeros((d, n, d), dtype=x.dtype)
    upstream[:, n - 1] = xp.eye(d, dtype=x.dtype)  # row i: unit gradient on feature i
    if kind == "recurrent":
        layer = RecurrentLayer(d, d, rng=seed)
        if W_h is not None:
            layer.params["W_h"] = W_h
        layer.forward(x)
        dx = layer.backward(upstream)
    else:
        layer = ScaledDotProductAttention()
        layer.forward(x, x, x)
        dx = sum(layer.backward(upstream))  # x enters as Q, K and V
    norms = xp.sqrt((dx**2).sum(axis=(0, 2)))  # (n,)
    return [float(v) for v in backend.to_numpy(norms)]


def scaled_orthogonal(d, scale, seed=0):
    """scale times a random orthogonal (d, d) matrix: every singular value is
    ``scale``, so a product of m of them has norm scale^m exactly."""
    q, r = backend.get_xp().linalg.qr(backend.from_host(backend.host_rng(seed).normal(size=(d, d))))
    return q * scale

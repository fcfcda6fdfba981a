# %% [markdown]
# # Lesson 0: Why attention
#
# Before 2017 the best translation systems read a sentence one word at a
# time with a recurrent network. *Attention Is All You Need* (Vaswani et al.,
# 2017) removed the recurrence altogether and kept only attention. This lesson
# measures why: we write a small recurrent network ourselves, check its
# gradient, and then measure the three columns of the paper's Table 1 for
# self-attention, recurrent and convolutional layers, instead of taking them
# on trust.
#
# In this lesson:
#
# 1. sequence models before the Transformer: recurrent encoder-decoders, the
#    fixed-size bottleneck, Bahdanau's attention, ByteNet and ConvS2S;
# 2. a recurrent layer, its backward through time and its gradient check;
# 3. vanishing and exploding gradients, measured against the distance in
#    time, and attention's gradient, which does not fade;
# 4. Table 1 measured: maximum path length, sequential operations and the
#    work per layer (counted and timed) at several lengths n;
# 5. the study notes' analogies, checked against the paper and the numbers;
# 6. an exercise: backpropagation through time, written by you.

# %%
import os

# One BLAS thread: the timings in section 4 then measure arithmetic, not how
# the operating system schedules threads on a busy machine. It must be set
# before NumPy is imported.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"

import math

import matplotlib.pyplot as plt
import numpy as np

import minitrans
from minitrans_course import path_lengths as pl
from minitrans.gradcheck import check_layer, format_table

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)
minitrans.use("numpy", dtype="float64")  # gradient checks need float64
print("minitrans", minitrans.__version__, "| backend:", minitrans.core.backend.backend_name(),
      "| dtype:", minitrans.get_dtype())

# %% [markdown]
# ## 1. Sequence models before the Transformer
#
# A translation model reads a source sentence and writes a target sentence,
# both of variable length. The paper's introduction names the approach that
# dominated: **recurrent** networks (RNNs), in particular LSTMs and gated
# recurrent units, arranged as an **encoder-decoder** (Sutskever et al. 2014;
# Cho et al. 2014).
#
# * The **encoder** reads the source one token at a time. At step $t$ it
#   combines the token $x_t$ with its state $h_{t-1}$ into a new state
#   $h_t = f(x_t, h_{t-1})$; the state is the network's memory of everything
#   read so far.
# * In the first encoder-decoders the **decoder** received only the encoder's
#   last state: one vector of fixed size for the whole sentence, however long.
#   That vector is a **bottleneck**: a 50-word sentence must squeeze through
#   the same few hundred numbers as a 5-word one, and translations got worse
#   as sentences grew longer.
# * **Bahdanau, Cho and Bengio (2015)** removed the bottleneck with
#   *attention*: at each output step the decoder scores every encoder state
#   against its own state, turns the scores into weights with a softmax and
#   reads a weighted average of all encoder states. Every source word is now
#   one step away from every output word, but the encoder and decoder are
#   still recurrent, so each sentence is still computed step after step.
# * Section 2 of the paper describes the convolutional attempts to compute
#   all positions in parallel: the Extended Neural GPU, **ByteNet**
#   (Kalchbrenner et al. 2016; stacked *dilated* convolutions) and **ConvS2S**
#   (Gehring et al. 2017; stacked convolutions with a contiguous kernel). A
#   convolution sees only $k$ neighbours per layer, so relating two distant
#   positions needs a stack of layers: "linearly [in the distance] for
#   ConvS2S and logarithmically for ByteNet".
#
# The Transformer keeps Bahdanau's idea, attention, and drops the rest: every
# layer relates all positions in "a constant number of operations", at the
# cost, the paper notes, of an averaged, lower "effective resolution", which
# multi-head attention (lesson 7) counteracts. The paper's section 4 (*Why
# Self-Attention*) compares the layers in three ways, its Table 1:
#
# | layer | complexity per layer | sequential operations | maximum path length |
# | --- | --- | --- | --- |
# | self-attention | $O(n^2 \cdot d)$ | $O(1)$ | $O(1)$ |
# | recurrent | $O(n \cdot d^2)$ | $O(n)$ | $O(n)$ |
# | convolutional | $O(k \cdot n \cdot d^2)$ | $O(1)$ | $O(\log_k(n))$ |
#
# (its fourth row, self-attention restricted to a neighbourhood of size $r$,
# is left out) with $n$ the sequence length, $d$ the representation's size
# and $k$ the kernel width (the $O(\log_k n)$ is for dilated convolutions; contiguous
# kernels need $O(n/k)$ layers). We will measure every cell of it.
#
# ## 2. A recurrent layer, written out
#
# The simplest recurrent layer (Elman's) has one equation:
#
# $$h_t = \tanh(x_t W_x + h_{t-1} W_h + b), \qquad h_{-1} = 0,$$
#
# with $x_t$ of size $d_{in}$, states of size $d_h$, and the *same* $W_x$
# (input to state), $W_h$ (state to state) and $b$ at every step. minitrans
# has it as `RecurrentLayer`. Its forward computes the input's part of every
# step at once, one matrix product, and then has to loop over time:

# %%
import inspect

source = inspect.getsource(minitrans.RecurrentLayer.forward)
print(source[source.index("        A_in"):])

# %% [markdown]
# The loop is not a lazy shortcut: $h_t$ cannot be computed before $h_{t-1}$
# exists, whatever the hardware. A GPU can work on all batch items of one step
# together, and on all features, but not on two steps of the same sentence.
# The paper: this "inherently sequential nature precludes parallelization
# within training examples".
#
# A small example: one batch item, 6 steps, and what changing one input does.

# %%
rnn = minitrans.RecurrentLayer(3, 4, rng=0)
x = minitrans.from_host(np.random.default_rng(1).normal(size=(1, 6, 3)))
H = rnn(x)
print("x:", x.shape, "-> H:", H.shape)
x_changed = x.copy()
x_changed[0, 2] += 1.0  # change the input at position 2 only
moved = np.abs(rnn(x_changed) - H).max(axis=-1)[0]
print("largest change of each state h_0 .. h_5:", np.array2string(moved, precision=4))

# %% [markdown]
# The states before position 2 do not move; every state after it does: the
# change is carried forward, step by step, through $W_h$.
#
# ### Backpropagation through time
#
# The backward is the chain rule applied to the unrolled loop, from the last
# step to the first: **backpropagation through time** (BPTT). With
# $a_t = x_t W_x + h_{t-1} W_h + b$ and $G_t$ the upstream gradient on $h_t$,
# the gradient reaching $h_t$ comes from the output *and* from step $t+1$:
#
# $$g_t = G_t + \delta_{t+1} W_h^\top, \qquad \delta_t = g_t \odot (1 - h_t^2)$$
#
# ($\tanh' = 1 - \tanh^2$, so the states are all the backward needs), and
# since the weights are shared by every step their gradients are sums over
# time:
#
# $$dW_h = \sum_{t \ge 1} h_{t-1}^\top \delta_t, \quad dW_x = \sum_t x_t^\top \delta_t, \quad
# db = \sum_t \delta_t, \quad dx_t = \delta_t W_x^\top.$$
#
# The backward loops too, backwards: $\delta_t$ needs $\delta_{t+1}$. The
# gradient check of lesson 1 compares every gradient with central
# differences:

# %%
from minitrans.gradcheck import randomise_params

rnn = randomise_params(minitrans.RecurrentLayer(3, 4, rng=0), np.random.default_rng(0))
x = minitrans.from_host(np.random.default_rng(2).normal(size=(2, 5, 3)))
print(format_table(check_layer(rnn, x)))


# %% [markdown]
# The checker is only worth something if it catches a wrong backward. A
# common shortcut, **truncated** BPTT, stops the gradient at each step
# ($g_t = G_t$, dropping $\delta_{t+1} W_h^\top$): each input then only gets
# credit for its own state, never for the later ones it influenced.

# %%
class TruncatedRNN(minitrans.RecurrentLayer):
    def backward(self, dH):
        x, H = self.saved()
        dA = dH * (1 - H**2)  # no gradient carried back from step t+1
        self.grads["W_h"] += np.einsum("bti,btj->ij", H[:, :-1], dA[:, 1:])
        self.grads["W_x"] += np.einsum("bti,btj->ij", x, dA)
        self.grads["b"] += dA.sum(axis=(0, 1))
        return dA @ self.params["W_x"].T


wrong = randomise_params(TruncatedRNN(3, 4, rng=0), np.random.default_rng(0))
print(format_table(check_layer(wrong, x)))

# %% [markdown]
# $dx$ and $dW_h$ fail by far more than rounding; $W_x$ and $b$ too, since
# their gradients are built from the same $\delta_t$.
#
# ## 3. Vanishing and exploding gradients
#
# How much does the last state $h_{n-1}$ depend on an input $t$ steps
# earlier? Its Jacobian by $x_t$ is a product of one factor per step in
# between:
#
# $$\frac{\partial h_{n-1}}{\partial x_t} = W_x\, D_t \prod_{s=t+1}^{n-1} W_h D_s
# \quad \text{(row-vector convention)}, \qquad D_s = \mathrm{diag}(1 - h_s^2).$$
#
# If every factor shrinks vectors, the product shrinks geometrically with the
# distance $n-1-t$: the gradient **vanishes**, and the network cannot learn
# that an early word matters. If the factors stretch vectors, it **explodes**.
# We measure the norm, from `RecurrentLayer.backward` (one backward per
# feature of $h_{n-1}$), for $W_h$ = scale × an orthogonal matrix, whose
# singular values all equal the scale. With tiny inputs $h \approx 0$ and
# $\tanh' \approx 1$, so the scale alone decides; with inputs of size 1 the
# states saturate and $\tanh'$ shrinks every factor further.

# %%
n, d = 40, 16
curves = {}
for scale in (0.5, 0.9, 1.0, 1.2):
    W_h = pl.scaled_orthogonal(d, scale, seed=1)
    curves[f"RNN, scale {scale}, tiny x"] = pl.gradient_by_distance(
        "recurrent", n, d, W_h=W_h, x_scale=1e-4)
curves["RNN, scale 1.2, x of size 1"] = pl.gradient_by_distance(
    "recurrent", n, d, W_h=pl.scaled_orthogonal(d, 1.2, seed=1), x_scale=1.0)
curves["self-attention"] = pl.gradient_by_distance("attention", n, d, x_scale=0.3)

distance = np.arange(n)[::-1]  # entry t is n-1-t steps from the output
print(f"{'':30s} {'distance 1':>11s} {'distance 10':>12s} {'distance 39':>12s} "
      f"{'ratio per step':>15s}")
for name, norms in curves.items():
    norms = np.array(norms)
    per_step = (norms[0] / norms[-2]) ** (1 / (n - 2))  # geometric mean over 38 steps
    print(f"{name:30s} {norms[-2]:11.3g} {norms[-11]:12.3g} {norms[0]:12.3g} {per_step:15.3f}")

fig, ax = plt.subplots(figsize=(7, 3.5))
for name, norms in curves.items():
    ax.semilogy(distance[:-1], norms[:-1], label=name,
                linestyle="--" if name == "self-attention" else "-")
ax.set_xlabel("distance n-1-t (steps)")
ax.set_ylabel("||d h_{n-1} / d x_t||")
ax.set_title("The gradient against distance")
ax.legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% [markdown]
# Measured: near $h = 0$ the gradient is multiplied by the scale at every
# step back, almost exactly: $0.5^{39} \approx 2 \cdot 10^{-12}$ after 39 steps,
# $1.2^{39} \approx 10^3$ the other way. Even a scale of 1 is not safe once
# the inputs are of size 1: the saturated $\tanh$ takes its own factor at
# each step, and the "exploding" scale 1.2 ends up vanishing. The LSTM's gates
# and its additive memory cell ease this; they do not change the fact that
# the path from $x_t$ to $h_{n-1}$ is $n-1-t$ steps long.
#
# In self-attention the output at position $n-1$ is a weighted average of
# *every* position, computed in one step, so $x_t$ reaches it through one
# softmax whatever $t$ is. Its curve wanders with the attention weights but
# does not fall with the distance: the earliest position gets about as much
# gradient as the nearest ones.
#
# ## 4. Table 1, measured
#
# `minitrans_course.path_lengths` builds each kind of layer and measures, on
# layers that run:
#
# * **maximum path length**: change input position 0 of a sequence and see
#   whether output position $n-1$ moves. Layers are stacked one at a time
#   until it does (self-attention; a causal convolution with a contiguous
#   kernel of width $k=3$, as in ConvS2S's decoder; the same with dilations
#   $1, k, k^2, \ldots$ as in ByteNet). For the recurrent layer, the steps
#   that receive a changed $h_{t-1}$ are counted while $h_{n-1}$ is computed.
# * **sequential operations**: the layer's step function is wrapped in a
#   counter and the dependent calls of one forward are counted.

# %%
lengths = [4, 16, 64, 256]
rows = {kind: [pl.path_length(kind, n) for n in lengths] for kind in pl.KINDS}
formula = {
    "attention": lambda n: 1,
    "recurrent": lambda n: n - 1,
    "convolution": lambda n: math.ceil((n - 1) / 2),
    "dilated": lambda n: math.ceil(math.log(n, 3) - 1e-9),
}
print("maximum path length (layers; steps for the RNN), k = 3")
print(f"{'layer':12s}" + "".join(f"{'n=' + str(n):>8s}" for n in lengths) + "   formula")
for kind, measured in rows.items():
    assert measured == [formula[kind](n) for n in lengths]  # the formula is checked, not assumed
    print(f"{kind:12s}" + "".join(f"{m:8d}" for m in measured) + "   " + pl.PAPER[kind][2])
print("\nsequential operations per layer")
for kind in pl.KINDS:
    print(f"{kind:12s}" + "".join(f"{pl.sequential_steps(kind, n):8d}" for n in lengths))

# %% [markdown]
# The measured numbers are exactly 1, $n-1$, $\lceil (n-1)/(k-1) \rceil$ and
# $\lceil \log_k n \rceil$: a contiguous causal kernel of width $k$ reaches
# $k-1$ positions further back per layer, a stack with dilations $k^l$
# reaches $k^L - 1$ positions back after $L$ layers. The paper's $O(n/k)$ and
# $O(\log_k n)$ drop the constants. And only the recurrent layer needs more
# than one dependent step: $n$ calls of its step for $n$ positions.
#
# **Complexity per layer.** Counting the multiply-adds of each layer's
# products from their shapes (Table 1 leaves out attention's projections to
# $Q$, $K$, $V$, which cost $n d^2$ like a recurrent layer):
#
# * self-attention: $QK^\top$ is $(n, d)(d, n)$, then $PV$ is $(n, n)(n, d)$:
#   $2 n^2 d$;
# * recurrent: $x_t W_x$ and $h_{t-1} W_h$ for $n$ steps: $2 n d^2$;
# * convolution: $(n, kd)(kd, d)$: $k n d^2$.
#
# Attention is cheaper than recurrence exactly while $n < d$, which is the
# paper's point: "self-attention layers are faster than recurrent layers when
# the sequence length n is smaller than the representation dimensionality
# d", as for sentences with $d = 512$. We count, and time one forward of
# each layer with $d = 64$:

# %%
d = 64
sizes = [16, 32, 64, 128, 256, 512]
times = {kind: [pl.time_layer(kind, n, d, repeats=5) for n in sizes] for kind in pl.KINDS}
print(f"d = {d}; multiply-adds (millions) and time of one forward (ms)")
print(f"{'n':>5s}" + "".join(f"{kind:>24s}" for kind in pl.KINDS))
for i, n in enumerate(sizes):
    cells = [f"{pl.multiply_adds(kind, n, d) / 1e6:9.2f} M {times[kind][i] * 1e3:8.3f} ms"
             for kind in pl.KINDS]
    print(f"{n:5d}" + "".join(f"{c:>24s}" for c in cells))
slower = [n for n, a, r in zip(sizes, times["attention"], times["recurrent"]) if a > r]
print("attention's forward slower than the recurrent one from n =",
      slower[0] if slower else "(not within these sizes)")
print("attention's time, n = 256 -> 512: x %.1f"
      % (times["attention"][-1] / times["attention"][-2]))

fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.3))
for kind in ("attention", "recurrent", "convolution"):
    left.loglog(sizes, [pl.multiply_adds(kind, n, d) for n in sizes], "o-", label=kind)
    right.loglog(sizes, np.array(times[kind]) * 1e3, "o-", label=kind)
left.axvline(d, color="gray", linestyle=":")
left.set_title(f"multiply-adds (d = {d}; dotted: n = d)")
right.set_title("time of one forward (ms)")
for ax in (left, right):
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(n) for n in sizes], minor=False)
    ax.minorticks_off()
    ax.set_xlabel("n")
    ax.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# The counts cross at $n = d = 64$: beyond it attention's $n^2 d$ overtakes
# the recurrence's $n d^2$, and doubling $n$ quadruples attention's work.
# The times cross later on this CPU (printed above) because the recurrent
# layer pays for $n$ small products one after another, each with Python's and
# NumPy's overhead per call, while attention's two large products run at full
# speed; on a GPU, where one small product leaves most of the chip idle, the
# recurrent layer's sequential steps cost even more. Counted work is not the
# whole story; dependent steps are the other half, and that is Table 1's
# middle column.
#
# Table 1, the paper's formulas next to what we measured (path lengths and
# sequential steps at $n = 256$, multiply-adds at $n = 256$, $d = 64$, $k = 3$):

# %%
n = 256
print(f"{'layer':12s} {'complexity':>12s} {'measured':>10s}   {'sequential':>10s} "
      f"{'measured':>8s}   {'path':>12s} {'measured':>8s}")
for kind in pl.KINDS:
    complexity, sequential, path = pl.PAPER[kind]
    print(f"{kind:12s} {complexity:>12s} {pl.multiply_adds(kind, n, 64) / 1e6:8.2f} M   "
          f"{sequential:>10s} {pl.sequential_steps(kind, n):8d}   {path:>12s} "
          f"{rows[kind][lengths.index(n)]:8d}")

# %% [markdown]
# ## 5. The notes' analogies, checked
#
# The Chinese study notes this course grew from explain the same story with
# images. Most of them hold; a few slip.
#
# * **RNN as the telephone game (传话游戏)**: the first word's information
#   must "walk" 49 steps to reach the 50th word and is distorted on the way.
#   The 49 steps are right: the measured path is $n-1$. The image only shows
#   the fading half, though; as measured above, the gradient can also
#   *explode* (scale 1.2), which a whispered message never does.
# * **"Whether a sentence has 10 words or 50, computing all the
#   representations takes the time of one matrix operation" (无论句子是 10 个词
#   还是 50 个词 … 只需要一次矩阵运算的时间)**: one *step*, yes (sequential
#   operations $O(1)$); the same *time*, no. The work is $O(n^2 d)$ and the
#   measured time of attention grows about fourfold per doubling of $n$ once
#   $n$ is large. The notes mix up the two columns of Table 1.
# * **"Self-attention's complexity: O(n²)" (计算复杂度:O(n²))**: the paper
#   says $O(n^2 \cdot d)$ per layer. Dropping $d$ hides the comparison that
#   matters, $n^2 d$ against the recurrence's $n d^2$: attention is the
#   cheaper one for $n < d$.
# * **"RNNs cannot be parallelised" (无法并行化)**: the paper says
#   *within* training examples. All sentences of a batch go through a step
#   together (our layer's step takes the whole batch); the trouble is that
#   memory limits the batch, so long sequences end up starved of parallel
#   work.
# * **"CNNs must stack many layers to capture long-range dependencies"
#   (需要堆叠很多层)**: true for contiguous kernels, $\lceil (n-1)/(k-1) \rceil$
#   layers, 128 at $n = 256$; ByteNet's dilated stack needs only
#   $\lceil \log_3 256 \rceil = 6$. That difference is the paper's "linearly
#   for ConvS2S and logarithmically for ByteNet".
# * **Dates**: one note cites the paper as "Vaswani et al. 2023", the date of
#   its last arXiv revision; it was published at NIPS 2017. Bahdanau et al.
#   appeared on arXiv in 2014 and at ICLR in 2015; both dates are seen.
#
# ## 6. Exercise: backpropagation through time
#
# Write `my_rnn_backward(x, W_x, W_h, H, dH)` in NumPy, returning
# `(dx, dW_x, dW_h, db)`: the gradients of `sum(H * dH)`.
#
# * `x` is $(B, T, d_{in})$, `W_x` $(d_{in}, d_h)$, `W_h` $(d_h, d_h)$;
#   `H` $(B, T, d_h)$ holds the forward's states $h_0 \ldots h_{T-1}$ and
#   `dH` the upstream gradient on each. The bias is not given: the states
#   already hold what the backward needs ($\tanh' = 1 - h^2$).
# * Go backwards in time with the equations of section 2. Loop over $t$ only;
#   the batch and the features are whole arrays.
# * The checker compares with explicit Jacobians built forward in time, on
#   random sizes, a strong $W_h$, a sequence of length 1, a batch of one,
#   float32 inputs and a 40-step sequence. Truncated BPTT passes the length-1
#   case and fails the others; forgetting $1 - h^2$, or keeping only the last
#   step's term of $dW_h$, fails at once.
#
# The skeleton returns zeros of the right shapes, so the checker runs and
# says "not yet". The solution is in `solutions/00_why_attention.py`.

# %%
from minitrans_course.exercises_recurrent import check_rnn_backward


def my_rnn_backward(x, W_x, W_h, H, dH):
    # your code here
    return np.zeros_like(x), np.zeros_like(W_x), np.zeros_like(W_h), np.zeros(W_h.shape[0])


check_rnn_backward(my_rnn_backward);

# %% [markdown]
# ## Summary
#
# * Recurrent encoder-decoders read a sentence one step at a time; Bahdanau's
#   attention removed their fixed-size bottleneck but kept the recurrence.
# * Backpropagation through time is the chain rule on the unrolled loop: the
#   gradient reaching $h_t$ comes from the output and from step $t+1$, and the
#   shared weights' gradients are sums over time; the gradient check catches
#   the truncated version.
# * The gradient from $h_{n-1}$ to $x_t$ is a product of $n-1-t$ factors: it
#   shrinks or grows geometrically with the distance (measured: ×0.5 or ×1.2
#   per step), while attention's does not fall with distance.
# * Measured Table 1: path length 1 for self-attention, $n-1$ for the RNN,
#   $\lceil (n-1)/(k-1) \rceil$ and $\lceil \log_k n \rceil$ for contiguous and
#   dilated convolutions; $n$ sequential steps for the RNN, 1 for the others.
# * Attention's work, $2n^2 d$, is below the RNN's $2nd^2$ exactly while
#   $n < d$; the cost of attention grows with $n^2$, its number of steps does
#   not.
#
# ## Next
#
# [Lesson 1](01_setup_and_backends.ipynb): the arrays and backends every
# later lesson runs on, and the first layer of the Transformer with its
# gradient check.

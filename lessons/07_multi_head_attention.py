# %% [markdown]
# # Lesson 7: Multi-head attention
#
# One attention gives each query a single probability distribution over the
# keys. If a word needs two things at once, say the previous word *and* the
# subject of the sentence, one softmax has to split its weight between them
# and blurs both. The paper's answer (§3.2.2) is to run several attentions
# side by side, each with its own small projections, and to concatenate what
# they find.
#
# In this lesson:
#
# 1. the formula, and the shape of every array from $(B, T, d_\text{model})$
#    to heads and back, reproducing `MultiHeadAttention` by hand;
# 2. why the key projection has no bias;
# 3. heads that attend to different things, built by hand;
# 4. the parameter count, $4 d_\text{model}^2$ whatever the number of heads;
# 5. four projections or one fused product, and why minitrans keeps four;
# 6. the gradient check;
# 7. exercises: splitting into heads and merging them back, written by you.

# %%
import matplotlib.pyplot as plt
import numpy as np

import minitrans
from minitrans.gradcheck import randomise_params

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)

print("minitrans", minitrans.__version__, "| backend:", minitrans.core.backend.backend_name(),
      "| dtype:", minitrans.get_dtype())

# %% [markdown]
# **You are here**: inside all three kinds of Multi-Head Attention box; below
# it, the split of $d_\text{model}$ into $h$ heads and the merge back, with the
# shapes that this lesson reproduces by hand. The drawing is the paper's base
# model (Table 3), made from its `ModelConfig`.

# %%
from minitrans_course.diagrams import draw_architecture

paper_config = minitrans.ModelConfig.preset("base", vocab_size=37000)
_, ax = plt.subplots(figsize=(9, 10))
draw_architecture(paper_config, highlight=("self_attn", "masked_self_attn", "cross_attn"), ax=ax)
plt.show()

# %%
from minitrans_course.diagram_flows import draw_head_split

_, ax = plt.subplots(figsize=(12, 6))
draw_head_split(paper_config, ax=ax)
plt.show()

# %% [markdown]
# ## The formula (§3.2.2)
#
# $$\mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h)\, W^O,
# \qquad \mathrm{head}_i = \mathrm{Attention}(Q W_i^Q,\; K W_i^K,\; V W_i^V)$$
#
# Each head $i$ has its own projections $W_i^Q, W_i^K \in \mathbb{R}^{d_\text{model} \times d_k}$
# and $W_i^V \in \mathbb{R}^{d_\text{model} \times d_v}$, and $W^O \in
# \mathbb{R}^{h d_v \times d_\text{model}}$ mixes the concatenated heads back
# into $d_\text{model}$ features. The paper takes $d_k = d_v =
# d_\text{model}/h$: with $d_\text{model} = 512$ and $h = 8$, each head works
# in 64 dimensions. In self-attention the three arguments are the same
# sequence $x$; in the decoder's cross-attention $Q$ comes from the decoder
# and $K$, $V$ from the encoder's output.
#
# Nobody computes the heads one by one. The $h$ matrices $W_i^Q$, side by side,
# are one $(d_\text{model}, d_\text{model})$ matrix $W^Q$. Two numberings meet
# here: the formula counts heads from 1 ($\mathrm{head}_1$ to $\mathrm{head}_h$),
# NumPy counts from 0, and so does the code of this lesson (`heads[:, 0]` to
# `heads[:, h - 1]`). The code's head $i$ is the formula's $\mathrm{head}_{i+1}$
# and owns columns $i d_k$ to $(i+1) d_k - 1$ of $W^Q$. So minitrans projects
# once, then reshapes:
#
# | step | shape |
# | --- | --- |
# | input $x$ | $(B, T, d_\text{model})$ |
# | project: $xW^Q + b^Q$ (and $K$, $V$) | $(B, T, d_\text{model})$ |
# | reshape: split the features into $h$ blocks | $(B, T, h, d_k)$ |
# | swap axes 1 and 2: heads before positions | $(B, h, T, d_k)$ |
# | attend, every head at once (lesson 5) | $(B, h, T, d_k)$, weights $(B, h, T, T)$ |
# | swap back | $(B, T, h, d_k)$ |
# | reshape: concatenate the heads | $(B, T, d_\text{model})$ |
# | output projection: $\cdot W^O + b^O$ | $(B, T, d_\text{model})$ |
#
# The four projections are four `Linear` layers (lesson 1's $y = xW + b$),
# named after the paper's matrices as Figure 2 draws them: `layer.W_Q`,
# `layer.W_K`, `layer.W_V`, `layer.W_O`. Each holds its weight `W` and bias
# `b`, so the layer's parameters are called `W_Q.W` ($W^Q$), `W_Q.b` ($b^Q$),
# and so on, and its forward reads as the table: `Q =
# self.split_heads(self.W_Q.forward(x))`, attention, `self.W_O.forward(
# self.merge_heads(heads))`.
#
# ## By hand, from the layer's own parameters
#
# A layer with $d_\text{model} = 8$ and $h = 2$ heads ($d_k = 4$), its
# parameters randomised so that the biases are not zero, on a batch of
# $B = 2$ sequences of $T = 5$ positions:

# %%
layer = minitrans.MultiHeadAttention(d_model=8, h=2, rng=0)
randomise_params(layer, np.random.default_rng(0))     # non-zero biases too
p = {name: minitrans.to_numpy(value) for name, value, _ in layer.named_parameters()}
print({name: value.shape for name, value in p.items()})

x = np.random.default_rng(1).standard_normal((2, 5, 8)).astype(np.float32)   # (B, T, d_model)
B, T, d_model = x.shape
h, d_k = layer.h, layer.d_k


def show(label, array):
    print(f"{label:34s} {array.shape}")


show("x", x)
Q = x @ p["W_Q.W"] + p["W_Q.b"]            # (B, T, d_model)
K = x @ p["W_K.W"]                       # no key bias: see below
V = x @ p["W_V.W"] + p["W_V.b"]
show("Q = x W_Q + b_Q", Q)
Q4, K4, V4 = (a.reshape(B, T, h, d_k) for a in (Q, K, V))
show("reshape to (B, T, h, d_k)", Q4)
Qh, Kh, Vh = (a.swapaxes(1, 2) for a in (Q4, K4, V4))
show("swap to (B, h, T, d_k)", Qh)
attention = minitrans.ScaledDotProductAttention()
heads = minitrans.to_numpy(attention.forward(*(minitrans.from_host(a) for a in (Qh, Kh, Vh))))
show("attention weights (B, h, T, T)", attention.attention_weights)
show("heads (B, h, T, d_k)", heads)
back = heads.swapaxes(1, 2)
show("swap back to (B, T, h, d_k)", back)
concat = back.reshape(B, T, d_model)
show("concatenate to (B, T, d_model)", concat)
by_hand = concat @ p["W_O.W"] + p["W_O.b"]
show("output = concat W_O + b_O", by_hand)

from_layer = minitrans.to_numpy(layer.forward(minitrans.from_host(x)))
print("\nsame as layer.forward(x):", np.allclose(by_hand, from_layer, atol=1e-5),
      "| largest difference", np.abs(by_hand - from_layer).max())

# %% [markdown]
# And the reshape really is "$h$ separate heads": the code's head 1 (counted
# from 0, so the second head: the formula's $\mathrm{head}_2$), computed on its
# own with only its slice of columns of $W^Q$, $W^K$, $W^V$ (the $W_2^Q$,
# $W_2^K$, $W_2^V$ of the formula), is `heads[:, 1]`, the second block of the
# batched result.

# %%
i = 1
cols = slice(i * d_k, (i + 1) * d_k)
head_alone = minitrans.to_numpy(attention.forward(
    minitrans.from_host(x @ p["W_Q.W"][:, cols] + p["W_Q.b"][cols]),     # x W_2^Q: (B, T, d_k)
    minitrans.from_host(x @ p["W_K.W"][:, cols]),
    minitrans.from_host(x @ p["W_V.W"][:, cols] + p["W_V.b"][cols])))
print("head 1 on its own:", head_alone.shape, "| equal to heads[:, 1]:",
      np.allclose(head_alone, heads[:, i], atol=1e-6))

# %% [markdown]
# ## Why there is no key bias
#
# The query, value and output projections have a bias; the key projection has
# none. Suppose it had one, $b$. The score of query $i$ and key $j$ would be
#
# $$\frac{q_i \cdot (k_j + b)}{\sqrt{d_k}}
#   = \frac{q_i \cdot k_j}{\sqrt{d_k}} + \frac{q_i \cdot b}{\sqrt{d_k}},$$
#
# and the second term depends on the query $i$ but **not on the key** $j$: it
# adds the same constant to a whole row of scores. Softmax ignores such a
# constant, $\mathrm{softmax}(z + c) = \mathrm{softmax}(z)$ (the $e^c$ cancels
# between numerator and denominator: the same reason lesson 2 could subtract
# the row maximum). So the weights, and everything after them, do not depend
# on $b$, and its gradient, $\sum_j \partial L / \partial k_j$ summed over the
# keys, is always exactly zero: a parameter that could never learn. minitrans
# leaves it out.
#
# Both claims, checked in float64 on random queries and keys:

# %%
with minitrans.using(dtype="float64"):
    rng = np.random.default_rng(2)
    Qb = minitrans.from_host(rng.standard_normal((3, 4)))   # (T_q, d_k)
    Kb = minitrans.from_host(rng.standard_normal((5, 4)))   # (T_k, d_k)
    Vb = minitrans.from_host(rng.standard_normal((5, 2)))   # (T_k, d_v)
    b = minitrans.from_host(rng.standard_normal(4))         # a key bias

    attention = minitrans.ScaledDotProductAttention()
    attention.forward(Qb, Kb, Vb)
    P_without = attention.attention_weights
    attention.forward(Qb, Kb + b, Vb)
    print("weights change by adding b to every key:",
          np.abs(attention.attention_weights - P_without).max())

    dQ, dK, dV = attention.backward(minitrans.from_host(rng.standard_normal((3, 2))))
    print("gradient a key bias would get   (sum of dK over keys):   ", dK.sum(axis=0))
    print("gradient the query bias does get (sum of dQ over queries):", dQ.sum(axis=0))

# %% [markdown]
# The differences are at the level of float64 rounding ($10^{-16}$). The
# query bias, by contrast, does matter: it shifts each query, which changes
# which keys score highest. (The value bias is a subtler case: since each
# row of weights sums to 1, it adds the same $b^V W^O$ to every output, which
# $b^O$ could do alone. It is harmless and kept, as in PyTorch's
# `nn.MultiheadAttention`.)
#
# ## Heads that look at different things
#
# Why several heads? Each head has its own $W_i^Q$ and $W_i^K$, so each can
# ask a different question. Trained Transformers are full of such
# specialised heads; the appendix of the paper shows heads of the encoder's
# fifth layer that follow long-distance dependencies or resolve pronouns. We
# will not train anything here: we write four heads' query and key
# projections by hand, for the six words *the cat sat on the mat*.
#
# Each word's 24-dimensional input $x_t$ has three parts: a one-hot **position**
# (features 0 to 5), a one-hot **word** (features 6 to 11, one per word of the
# vocabulary *the, cat, sat, on, mat, dog*), and 12 random features standing in
# for everything else an embedding carries. With $d_\text{model} = 24$ and
# $h = 4$, each head has $d_k = 6$ columns of $W^Q$ and $W^K$, and a score
# $c = 20$ (divided by $\sqrt{6}$) where it wants to look:
#
# * **head 0, previous word**: the query of position $t$ is "position $t-1$"
#   ($W^Q$ maps position $t$ to column $t - 1$), the key of position $s$ is
#   "position $s$". Position 0 has no previous word; we let it look at itself.
# * **head 1, first word**: every query is the same constant, "position 0",
#   which needs no $W^Q$ at all: it is the query **bias** $b^Q$.
# * **head 2, same word**: query and key are both the word's identity, so each
#   word looks for copies of itself (*the* at positions 0 and 4).
# * **head 3, untouched**: its columns keep the random Xavier initial values,
#   as in a model before training.

# %%
sentence = ["the", "cat", "sat", "on", "the", "mat"]
vocabulary = ["the", "cat", "sat", "on", "mat", "dog"]
T, d_model, h = len(sentence), 24, 4
d_k = d_model // h

rng = np.random.default_rng(0)
x = np.zeros((T, d_model))
for t, word in enumerate(sentence):
    x[t, t] = 1.0                                   # position, features 0..5
    x[t, 6 + vocabulary.index(word)] = 1.0          # word, features 6..11
x[:, 12:] = rng.standard_normal((T, 12))            # everything else, features 12..23

heads_layer = minitrans.MultiHeadAttention(d_model, h, rng=0)
W_Q = minitrans.to_numpy(heads_layer.W_Q.params["W"]).copy()   # (d_model, d_model), Xavier
W_K = minitrans.to_numpy(heads_layer.W_K.params["W"]).copy()
b_Q = np.zeros(d_model)
c = 20.0
W_Q[:, :18] = 0.0                                   # heads 0, 1, 2: written by hand
W_K[:, :18] = 0.0
for t in range(T):                                  # head 0 (columns 0..5): previous position
    W_Q[t, 0 + max(t - 1, 0)] = c
    W_K[t, 0 + t] = 1.0
# head 1 (columns 6..11): position 0, via the bias
b_Q[6 + 0] = c
for s in range(T):
    W_K[s, 6 + s] = 1.0
for w in range(len(vocabulary)):                    # head 2 (columns 12..17): the same word
    W_Q[6 + w, 12 + w] = c
    W_K[6 + w, 12 + w] = 1.0
# head 3 (columns 18..23) keeps its random initial values

heads_layer.W_Q.params["W"] = minitrans.from_host(W_Q)
heads_layer.W_K.params["W"] = minitrans.from_host(W_K)
heads_layer.W_Q.params["b"] = minitrans.from_host(b_Q)
out = heads_layer.forward(minitrans.from_host(x[None]))             # (1, T, d_model)
weights = minitrans.to_numpy(heads_layer.attention.attention_weights)[0]   # (h, T, T)
print("output:", out.shape, "| weights of every head:", weights.shape)

# %%
titles = ["head 0: previous word", "head 1: first word", "head 2: same word", "head 3: untrained"]
fig, axes = plt.subplots(2, 2, figsize=(8, 7.5), layout="constrained")
for head, ax in enumerate(axes.flat):
    image = ax.imshow(weights[head], cmap="viridis", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(T), sentence, rotation=90)
    ax.set_yticks(range(T), sentence)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_title(titles[head])
fig.colorbar(image, ax=axes, fraction=0.03, label="attention weight")
fig.suptitle("Four heads of one MultiHeadAttention layer")
plt.show()

# %%
for head in range(3):
    print(f"{titles[head]:22s} each query's favourite key: {weights[head].argmax(axis=-1)}"
          f" | its weight: {weights[head].max(axis=-1).round(3)}")
print("head 2, query 'the' (position 4):", weights[2, 4].round(3))
print(f"head 3, largest weight anywhere: {weights[3].max():.3f} (uniform would be {1 / T:.3f})")

# %% [markdown]
# One layer, one forward, four different patterns: the previous word (a
# diagonal just below the main one), the first word (a column), copies of the
# same word (*the* splits its weight between both *the*s), and, for the
# untrained head, a blur. Each head's output lands in its own block of $d_k$
# features of the concatenation, so every position receives, side by side,
# the value of its previous word, of the first word and of its copies, and
# $W^O$ can combine them. A single head would have to spread one
# distribution over all three targets and would get an average of them, which
# is what the paper means by "with a single attention head, averaging
# inhibits this".
#
# ## Parameters: $4 d_\text{model}^2$, whatever $h$ is
#
# $W^Q$, $W^K$, $W^V$ and $W^O$ are each $(d_\text{model}, d_\text{model})$:
# more heads means more, narrower blocks of the same matrices, not more
# weights. With the biases of $Q$, $V$ and $O$, minitrans's layer has
# $4 d_\text{model}^2 + 3 d_\text{model}$ parameters. The compute is the same
# too: $h$ heads of size $d_\text{model}/h$ cost about as much as one head of
# full size (§3.2.2). For the paper's $d_\text{model} = 512$:

# %%
d_model = 512
print(f"4 d_model^2 + 3 d_model = {4 * d_model**2 + 3 * d_model:,}")
for h in [1, 2, 4, 8, 16]:
    count = minitrans.MultiHeadAttention(d_model, h, rng=0).num_parameters()
    print(f"h = {h:2d}, d_k = {d_model // h:3d}: {count:,} parameters")

# %% [markdown]
# ## Four projections, or one fused product?
#
# In self-attention $Q$, $K$ and $V$ are all projections of the same $x$.
# Three products $x W^Q$, $x W^K$, $x W^V$ are the same arithmetic as one
# product with the three matrices side by side,
#
# $$x\,[W^Q \mid W^K \mid W^V] = [x W^Q \mid x W^K \mid x W^V],$$
#
# because each column of the result only ever sees its own column of the
# weights. nanoGPT (`c_attn`) and llm.c (`qkvw`) store the three as one
# $(d_\text{model}, 3 d_\text{model})$ matrix and make one product: the
# matrix library gets one large job instead of three smaller ones, and the
# backward's $dx = dQ\,W^{Q\top} + dK\,W^{K\top} + dV\,W^{V\top}$ becomes
# one product $[dQ \mid dK \mid dV]\,[W^Q \mid W^K \mid W^V]^\top$.
#
# minitrans keeps the four separate `Linear` layers. They are what Figure 2
# draws and what you can check against the equations line by line, and
# fusing them saves only about 1% of a training step on a CPU: the products
# are already large (`benchmarks/results/step_breakdown/` shows where a
# step's time goes). The backward then
# sums the three uses of $x$ explicitly, `dx = dQ W_Q^T + dK W_K^T + dV
# W_V^T`, which is the equation itself. The identity above, checked:

# %%
layer = minitrans.MultiHeadAttention(d_model=8, h=2, rng=0)
W = {name: minitrans.to_numpy(getattr(layer, f"W_{name}").params["W"]) for name in "QKV"}
x = np.random.default_rng(1).standard_normal((2, 5, 8)).astype(np.float32)   # (B, T, d_model)
side_by_side = np.concatenate([W["Q"], W["K"], W["V"]], axis=1)           # (d_model, 3 d_model)
QKV = x @ side_by_side                                                    # (B, T, 3 d_model)
print("x [W_Q | W_K | W_V]:", QKV.shape)
for i, name in enumerate("QKV"):
    block = QKV[..., i * 8:(i + 1) * 8]
    print(f"  columns {i * 8}:{(i + 1) * 8} equal x W_{name}:",
          np.allclose(block, x @ W[name], atol=1e-5))

# %% [markdown]
# How much would it save? On a (2048, 256) batch of positions, the size of
# a training step of a mid-sized model, the three products against the one
# (timings depend on the machine and vary from run to run; on two cores the
# one product is usually a little faster, but the whole step has far larger
# costs):

# %%
import timeit

rng = np.random.default_rng(2)
x_big = rng.standard_normal((2048, 256)).astype(np.float32)
W_big = [rng.standard_normal((256, 256)).astype(np.float32) for _ in range(3)]
W_together = np.concatenate(W_big, axis=1)


def best_of(function, repeats=20):
    """The fastest of ``repeats`` runs, in seconds."""
    return min(timeit.repeat(function, number=1, repeat=repeats))


three = best_of(lambda: [x_big @ W for W in W_big])
one = best_of(lambda: x_big @ W_together)
print(f"three products {three * 1e3:.2f} ms, one product {one * 1e3:.2f} ms")

# %% [markdown]
# ## Gradient check
#
# The backward retraces the table of shapes upwards: through $W^O$, the merge
# of heads becomes a split, lesson 5's attention backward gives the gradients
# of the $Q$, $K$, $V$ heads, they are merged back to $(B, T, d_\text{model})$
# and go through the three input projections. In self-attention $x$ is used
# three times (as queries, keys and values), so its gradient is the **sum**
# of the three. The check covers $x$ and all seven parameters, without a mask
# and with the causal mask of lesson 6:

# %%
from minitrans.gradcheck import check_layer, format_table

with minitrans.using(dtype="float64"):
    rng = np.random.default_rng(0)
    x64 = minitrans.from_host(rng.standard_normal((2, 3, 4)))     # (B, T, d_model)
    mha = randomise_params(minitrans.MultiHeadAttention(4, 2, rng=0), rng)
    results = check_layer(mha, x64, label="MHA self")
    mha_causal = randomise_params(minitrans.MultiHeadAttention(4, 2, rng=1), rng)
    results += check_layer(mha_causal, x64, mask=minitrans.causal_mask(3), label="MHA self, causal")
    print(format_table(results))

# %% [markdown]
# ## Exercises: splitting into heads and merging them back
#
# Write the two reshapes of the table of shapes in NumPy:
#
# * `my_split_heads(x, h)`: `x` is $(B, T, d_\text{model})$; return
#   $(B, h, T, d_k)$ with $d_k = d_\text{model} / h$, head $i$ holding
#   features $i d_k$ to $(i+1) d_k - 1$ of every position.
# * `my_merge_heads(heads)`: the inverse, $(B, h, T, d_k) \to
#   (B, T, h\,d_k)$, the heads side by side.
#
# A single `reshape` to $(B, h, T, d_k)$ has the right shape and the wrong
# numbers: it cuts the flat row-major array in order, so a "head" would hold
# features of several positions. Reshape so that each position's features stay
# together, then swap two axes. The checker compares with a loop that copies
# each head's block of features, on random sizes, float32, a batch of one,
# one head, $d_k = 1$ and $T = 1$. The solutions are in
# `solutions/07_multi_head_attention.py`.

# %%
from minitrans_course.exercises_masks_heads import check_merge_heads, check_split_heads


def my_split_heads(x, h):
    # your code here
    B, T, d_model = x.shape
    return np.zeros((B, h, T, d_model // h))


def my_merge_heads(heads):
    # your code here
    B, h, T, d_k = heads.shape
    return np.zeros((B, T, h * d_k))


check_split_heads(my_split_heads)
check_merge_heads(my_merge_heads);

# %% [markdown]
# ## Summary
#
# * Multi-head attention runs $h$ attentions of size $d_k = d_\text{model}/h$
#   side by side, concatenates their outputs and mixes them with $W^O$.
# * In code the $h$ projections are one $(d_\text{model}, d_\text{model})$
#   matrix, one `Linear` layer each for $W^Q$, $W^K$, $W^V$, $W^O$ (named
#   `W_Q`, ...); a reshape to $(B, T, h, d_k)$ and a swap to $(B, h, T, d_k)$
#   give every head its block, and the reverse steps concatenate them.
# * A key bias would add a constant to each row of scores, which softmax
#   ignores, so it is left out; its gradient would always be zero.
# * Different heads can follow different relations at the same time
#   (position, identity, anything $W^Q$ and $W^K$ can express).
# * The layer has $4 d_\text{model}^2$ weights (plus biases) for any $h$, and
#   its backward passes the gradient check, with and without a mask.
# * The projections of one input could run as one product with the weights
#   side by side, $x\,[W^Q \mid W^K \mid W^V]$: the same numbers. minitrans
#   keeps four `Linear` layers, as Figure 2 draws them, because the fused
#   product gained only about 1% of a step.
#
# ## Next
#
# [Lesson 8](08_cross_attention.ipynb), cross-attention: the decoder's queries
# read the encoder's output.

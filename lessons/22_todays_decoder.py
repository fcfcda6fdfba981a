# %% [markdown]
# # Lesson 22: Today's decoder
#
# GPT-2 (lesson 19) changed little in the Transformer's layer: it moved the
# LayerNorm and swapped ReLU for GELU. The open models that came after it,
# Meta's Llama models (Touvron et al. 2023) among the first, changed four
# more things, each small, each from its own paper (the first Llama three
# of them; grouped-query attention came with Llama 2's 34B and 70B models),
# and most open decoders released since have them all. None is beyond what
# this course has built, and minitrans has each as an option of
# `ModelConfig`:
#
# | | GPT-2 (2019) | today (Llama 2 and 3) | minitrans |
# | --- | --- | --- | --- |
# | norm | LayerNorm, pre-norm | RMSNorm (Zhang and Sennrich 2019), pre-norm | `norm="rms"` |
# | positions | learned table added to the embeddings | rotary positions (Su et al. 2021): queries and keys rotated | `positions="rope"`, `rope_base` |
# | feed-forward | two matrices, GELU, d_ff = 4 d_model | SwiGLU (Shazeer 2020): three matrices, d_ff about 8/3 d_model | `activation="swiglu"` |
# | attention | every head its own keys and values | grouped-query attention (Ainslie et al. 2023): groups of query heads share them | `kv_heads` |
# | biases | in every projection but the output projection (the tied embedding, no bias) | none | `bias=False`, `output_bias=False` |
#
# In this lesson, each of the four with its backward, its gradient check
# and an exercise:
#
# 1. RMSNorm, and why the mean may go;
# 2. rotary positions: a score that depends only on the distance, and the
#    offset the key/value cache needs;
# 3. SwiGLU, and why d_ff is about 8/3 of d_model;
# 4. grouped-query attention, and the key/value cache of Llama 2 and 3 at
#    their real sizes;
# 5. a toy ablation: the 2017 block against today's at the same parameter
#    budget, on the sums of the `lm` task, over three seeds.
#
# Lesson 23 then reads a trained GPT-2's or Llama's weights into these
# layers.

# %%
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one BLAS thread; set before NumPy loads

import json
import pathlib
import sys

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown, display

import minitrans
from minitrans.core import memory_budget
from minitrans.gradcheck import check_layer, format_table, randomise_params
from minitrans.ops.activations import gelu, silu

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)

rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. RMSNorm
#
# Layer normalisation (lesson 9) centres each position's vector and divides
# it by its standard deviation, then scales by $\gamma$ and shifts by
# $\beta$. Zhang and Sennrich (2019, *Root Mean Square Layer
# Normalization*) drop the centring and the shift:
#
# $$\text{RMS}(x) = \sqrt{\tfrac{1}{D}\textstyle\sum_j x_j^2},
#   \qquad y = \gamma \odot \frac{x}{\text{RMS}(x)}.$$
#
# The paper's RMS has no $\epsilon$; implementations, Llama's and
# minitrans's `RMSNorm` among them, add one under the root,
# $\sqrt{\tfrac{1}{D}\sum_j x_j^2 + \epsilon}$, so that a vector of zeros
# does not divide by zero. (The paper calls the gain $g$; minitrans's
# parameter is `g`.)
#
# One statistic per position instead of two, one learned vector instead of
# two. Why can the mean go? LayerNorm's output ignores both a **re-scaling**
# of its input (which keeps activations and gradients at a steady size)
# and a **re-centring** (a constant added to every feature). RMSNorm keeps
# the first invariance and gives up the second, and the case for that is
# empirical: Zhang and Sennrich conjecture that the re-scaling is what makes
# LayerNorm work, and find the re-centring dispensable in their experiments.
# On a vector of mean zero the two are the same function: its root mean
# square is its standard deviation. Numerically:

# %%
x = rng.standard_normal((2, 3, 6)) + 0.7
with minitrans.using(dtype="float64"):
    rms, layer_norm = minitrans.RMSNorm(6), minitrans.LayerNorm(6)
    centred = x - x.mean(axis=-1, keepdims=True)
    same = np.abs(rms.forward(centred) - layer_norm.forward(centred)).max()
    scaled = np.abs(rms.forward(3.0 * x) - rms.forward(x)).max()
    shifted = np.abs(rms.forward(x + 1.0) - rms.forward(x)).max()
print(f"a centred input: RMSNorm - LayerNorm = {same:.1e}")
print(f"x times 3: RMSNorm changes by {scaled:.1e} (eps's share); "
      f"x plus 1: by {shifted:.2f} (no centring)")

# %% [markdown]
# Scaling does not move RMSNorm's output (but for $\epsilon$'s share); a
# shift does, where LayerNorm would have ignored it, and nothing downstream
# undoes it: the change to $x / \text{RMS}(x)$ depends on $x$, so no fixed
# bias could take it back, and Llama's linear maps have no bias at all.
# Dropping the centring is a bet on experiment, not an identity: the paper
# trains the same models with both norms (machine translation, reading
# comprehension, image-caption retrieval, image classification) and finds
# RMSNorm's quality comparable to LayerNorm's, with the running time 7% to
# 64% lower depending on the model. (Not measured here: `python
# benchmarks/kernels.py --kernels layer_norm,rms_norm` times each norm's
# fast version against its reference, not one norm against the other.)
#
# ### The backward
#
# With $\epsilon$ under the root, as in the code, write $\hat x = x /
# \text{RMS}(x)$ and, as lesson 11 does for LayerNorm, $g = dy \odot
# \gamma$ for the gradient that reaches $\hat x$. Since $\partial\,
# \text{RMS} / \partial x_j = x_j / (D\,\text{RMS})$,
#
# $$\frac{\partial \hat x_i}{\partial x_j}
#   = \frac{1}{\text{RMS}}\Big(\delta_{ij} - \frac{\hat x_i \hat x_j}{D}\Big),
#   \qquad
#   dx = \frac{1}{\text{RMS}}\Big(g - \hat x \cdot
#        \text{mean}(g \odot \hat x)\Big),
#   \qquad d\gamma = \sum_{\text{positions}} dy \odot \hat x .$$
#
# LayerNorm's backward (lesson 11) has one more term, $-\text{mean}(g)$,
# which comes from the mean it subtracts; here nothing is subtracted, and
# the term is gone. The gradient check of `RMSNorm`, in float64, its gain
# drawn at random so that it is not all ones:

# %%
with minitrans.using(dtype="float64"):
    norm = minitrans.RMSNorm(6)
    randomise_params(norm, np.random.default_rng(1))
    print(format_table(check_layer(norm, x)))

# %% [markdown]
# ### Exercise: RMSNorm, forward and backward
#
# Write `my_rms_norm(x, gamma, eps, dy)` returning `(y, dx, dgamma)` for
# $x$ of shape $(\dots, D)$ and the gain $\gamma$ of shape $(D,)$, with
# $\epsilon$ under the root. The checker tries random
# inputs, rows far from a zero mean (where a LayerNorm habit shows), a row
# of zeros (where $\epsilon$ keeps the division finite), $\epsilon = 1$,
# positions given as rows $(n, D)$, one feature and float32. Its reference
# builds the full $D \times D$ Jacobian at every position. The solution is
# in `solutions/22_todays_decoder.py`.

# %%
from minitrans_course.exercises_modern import check_rms_norm


def my_rms_norm(x, gamma, eps, dy):
    # your code here: y, and the gradients of sum(y * dy) with respect to x and gamma
    return np.zeros_like(x), np.zeros_like(x), np.zeros_like(gamma)


check_rms_norm(my_rms_norm);

# %% [markdown]
# ## 2. Rotary positions
#
# The paper adds a table of sines and cosines to the embeddings (lesson 4),
# and lesson 4 found that the table's shift by $k$ positions is a rotation
# $M_k$ of each pair of its coordinates. Su et al. (2021, *RoFormer*) make
# that the whole mechanism: nothing is added to the embeddings; instead,
# inside every attention layer, the query and the key of position $m$ are
# **rotated** by angles proportional to $m$. Each pair of a head's
# coordinates $(x_i, x_{i + d_k/2})$ turns by the angle $m\,\theta_i$, with
# the paper's frequencies over a head's width,
#
# $$\theta_i = \text{base}^{-2i/d_k}, \qquad
# \begin{pmatrix} y_i \\ y_{i+d_k/2} \end{pmatrix} =
# \begin{pmatrix} \cos m\theta_i & -\sin m\theta_i \\
#                 \sin m\theta_i & \cos m\theta_i \end{pmatrix}
# \begin{pmatrix} x_i \\ x_{i+d_k/2} \end{pmatrix},$$
#
# with base 10,000 (Llama 3: 500,000, below). Su et al. pair neighbours
# $(2i, 2i+1)$, and so does Meta's own Llama code; minitrans pairs $i$ with
# $i + d_k/2$, as Hugging Face's Llama does. The two differ by a fixed
# permutation of each head's coordinates, which can be moved into $W_Q$ and
# $W_K$: Hugging Face's script that converts Meta's checkpoints permutes
# them so, and a checkpoint in Hugging Face's format loads into minitrans
# as it is, while one of Meta's own would need the permutation first
# (lesson 23). One query vector of $d_k = 8$ (four pairs) at positions 0
# to 15:

# %%
POSITIONS = 16
q = np.array([1.0, 0.6, -0.4, 0.8, 0.2, 0.9, 1.0, -0.5])
with minitrans.using(dtype="float64"):
    rope = minitrans.RotaryEmbedding(8, max_len=64)
    turned = minitrans.to_numpy(rope.forward(np.tile(q, (POSITIONS, 1))))  # row m: R_m q
theta = 10000.0 ** (-np.arange(0, 8, 2) / 8)
fig, axes = plt.subplots(1, 4, figsize=(12, 3.2))
for i, ax in enumerate(axes):
    points = turned[:, [i, i + 4]]
    ax.scatter(points[:, 0], points[:, 1], c=np.arange(POSITIONS), cmap="viridis", s=18)
    ax.plot(points[:, 0], points[:, 1], color="gray", linewidth=0.5)
    ax.annotate("m = 0", points[0], fontsize=8, xytext=(4, 4), textcoords="offset points")
    ax.set_title(f"pair ({i}, {i + 4}): θ = {theta[i]:g}", fontsize=9)
    ax.set_aspect("equal")
    ax.set_xlim(-1.4, 1.4)
    ax.set_ylim(-1.4, 1.4)
fig.suptitle("One query's four pairs at positions 0 to 15 (colour: position)", fontsize=10)
fig.tight_layout()
plt.show()

# %% [markdown]
# The first pair turns by one radian per position, the last by a
# thousandth: as in the sinusoidal table, fast pairs tell neighbours apart
# and slow ones measure long distances. A rotation keeps every length, so
# the vector's norm does not change with its position.
#
# Llama 3 raised the base from 10,000 to 500,000, because, its paper says,
# the larger base supports longer contexts better (Llama 3 trains on 8,192
# tokens, and the base eases stretching the context later). Every pair but
# the first turns more slowly, and more of them turn less than once over
# the context, so that their angles never come back to one they took at a
# nearer position. For Llama's heads of $d_k = 128$ (64 pairs):

# %%
wavelengths = {base: 2 * np.pi * base ** (np.arange(0, 128, 2) / 128) for base in (1e4, 5e5)}
for base, wavelength in wavelengths.items():
    print(f"base {base:>9,.0f}: {np.sum(wavelength > 8192)} of 64 pairs turn less than once "
          f"in 8,192 positions; the slowest pair's wavelength {wavelength[-1]:,.0f}")

# %% [markdown]
# Llama 3.1 and the models after it (Llama 3.2 1B and 3B among them) also
# rescale the frequencies, by a `rope_scaling` entry of their `config.json`
# (`rope_type` `"llama3"`), to reach a context of 128K tokens. minitrans's
# rotary positions are the unscaled ones, and lesson 23's loader refuses
# such a model rather than compute something else.
#
# ### The score depends only on the distance
#
# A rotation's transpose is the rotation back, $R_m^\top R_n = R_{n-m}$,
# so the score of a query at $m$ and a key at $n$ is
#
# $$(R_m q)^\top (R_n k) = q^\top R_m^\top R_n\, k = q^\top R_{n-m}\, k :$$
#
# it depends on the positions only through $n - m$. Checked for all
# $64 \times 64$ pairs of positions, against the paper's way, where the
# table is added to the vectors before the product:

# %%
k = rng.standard_normal(8)
with minitrans.using(dtype="float64"):
    Q = minitrans.to_numpy(rope.forward(np.tile(q, (64, 1))))  # row m: R_m q
    K = minitrans.to_numpy(rope.forward(np.tile(k, (64, 1))))  # row n: R_n k
    table = minitrans.to_numpy(minitrans.sinusoidal_table(64, 8))
rotary_scores = Q @ K.T  # [m, n]
added_scores = (q + table) @ (k + table).T  # the paper's: (q + p_m) . (k + p_n)


def spread_along_distances(S):
    """The largest range of the scores that share one distance n - m."""
    return max(np.ptp(np.diagonal(S, offset=d)) for d in range(-len(S) + 1, len(S)))


print(f"rotary:            scores at one distance differ by at most "
      f"{spread_along_distances(rotary_scores):.1e}")
print(f"added sinusoids:   by up to {spread_along_distances(added_scores):.2f}")
print("rotary, distance n - m = 3:", np.round(np.diagonal(rotary_scores, offset=3)[:5], 6))

# %% [markdown]
# With rotations, every pair at distance 3 gets the same score, to
# rounding; with the added table, the same distance gives scores that
# change with the absolute position. Nothing is learned for the positions,
# and the values $V$ are not rotated: the position enters only through
# which keys a query prefers.
#
# ### The offset of the key/value cache
#
# Decoding with a cache (lesson 15) computes the key of a new token once
# and keeps it. With rotary positions that key must be rotated by its
# *absolute* position, the number of tokens before it, not by 0: the layer
# takes an `offset`, the position of its input's first row. Rotating ten
# positions at once, or six and then four from offset 6, is the same:

# %%
x = rng.standard_normal((1, 2, 10, 8))  # (B, h, T, d_k)
with minitrans.using(dtype="float64"):
    whole = minitrans.to_numpy(rope.forward(x))
    pieces = np.concatenate([minitrans.to_numpy(rope.forward(x[:, :, :6])),
                             minitrans.to_numpy(rope.forward(x[:, :, 6:], offset=6))], axis=2)
    forgotten = minitrans.to_numpy(rope.forward(x[:, :, 6:]))  # offset left at 0
print(f"six, then four from offset 6: {np.abs(whole - pieces).max():.1e}; "
      f"the four without their offset: {np.abs(whole[:, :, 6:] - forgotten).max():.2f}")

# %% [markdown]
# A whole model, today's options all at once, decoded one token at a time
# through `start` and `step` (the cache holds keys already rotated), against
# one forward pass over the whole sequence:

# %%
TODAY = dict(decoder_only=True, pre_norm=True, norm="rms", positions="rope", activation="swiglu",
             kv_heads=2, bias=False, output_bias=False, scale_embedding=False, pad_id=None,
             dropout=0.0)
with minitrans.using(dtype="float64"):
    tiny = minitrans.DecoderOnlyLM(minitrans.ModelConfig(
        vocab_size=20, d_model=16, h=4, N=2, d_ff=32, max_len=32, **TODAY), rng=0)
    ids = rng.integers(0, 20, size=(2, 12))
    parallel = minitrans.to_numpy(tiny.forward(ids))
    state = tiny.start(2)
    stepped = np.stack([minitrans.to_numpy(tiny.step(state, ids[:, t])) for t in range(12)], 1)
print(f"step by step against one forward pass: logits differ by at most "
      f"{np.abs(parallel - stepped).max():.1e}")

# %% [markdown]
# ### The backward, and the gradient check
#
# A rotation keeps no activations: its backward is the rotation back,
# $dx = R_m^\top dy = R_{-m}\,dy$, at the same offset. `MultiHeadAttention`
# with `rope=True` rotates $Q$ and $K$ after their projections, and in its
# backward turns $dQ$ and $dK$ back before theirs. Both checked, at an
# offset:

# %%
with minitrans.using(dtype="float64"):
    results = check_layer(minitrans.RotaryEmbedding(4, max_len=8), rng.standard_normal(
        (2, 2, 3, 4)), offset=2, label="RotaryEmbedding (offset 2)")
    attention = minitrans.MultiHeadAttention(4, 2, rng=0, rope=True, max_len=8)
    randomise_params(attention, np.random.default_rng(2))
    results += check_layer(attention, rng.standard_normal((2, 3, 4)),
                           mask=minitrans.causal_mask(3), offset=3,
                           label="MHA, rotary, causal (offset 3)")
    print(format_table(results))

# %% [markdown]
# ### Exercise: rotary positions at an offset
#
# Write `my_rotate(x, offset, base)` for $x$ of shape $(B, h, T, d_k)$
# whose first position is `offset`: pair coordinate $i$ with $i + d_k/2$,
# as above. The checker tries positions from 0 and from 5, one new position
# at 100 (a decoding step), $d_k = 2$, Llama 3's base of 500,000 and
# float32. Its reference multiplies complex numbers, $x_i + j\,x_{i+d_k/2}$
# times $e^{j m \theta_i}$, one at a time.

# %%
from minitrans_course.exercises_modern import check_rotate


def my_rotate(x, offset, base):
    # your code here
    return x


check_rotate(my_rotate);

# %% [markdown]
# ## 3. SwiGLU
#
# The paper's feed-forward network is $\max(0, xW_1 + b_1)W_2 + b_2$. A
# **gated linear unit** (Dauphin et al. 2017) computes two projections and
# lets one open or close the other, element by element. Shazeer (2020,
# *GLU Variants Improve Transformer*) tried several gates and found the
# SiLU best, or nearly, among them:
#
# $$\text{FFN}_\text{SwiGLU}(x) = \big(\text{SiLU}(xW_\text{gate}) \odot
#   xW_\text{up}\big)\, W_\text{down}, \qquad
#   \text{SiLU}(a) = a\,\sigma(a).$$
#
# The SiLU (also called Swish) is, like the GELU of lesson 17, a smooth
# ReLU:

# %%
a = np.linspace(-5, 5, 201)
with minitrans.using(dtype="float64"):
    silu_a, gelu_a = (minitrans.to_numpy(f(minitrans.from_host(a))) for f in (silu, gelu))
fig, ax = plt.subplots(figsize=(5, 3.2))
ax.plot(a, np.maximum(a, 0), label="ReLU (2017)")
ax.plot(a, gelu_a, label="GELU (GPT-2)")
ax.plot(a, silu_a, label="SiLU (SwiGLU's gate)")
ax.axhline(0, color="gray", linewidth=0.5)
ax.legend()
ax.set_title("Three activations")
plt.show()
print(f"SiLU's minimum: {silu_a.min():.3f} at a = {a[silu_a.argmin()]:.2f}")

# %% [markdown]
# ### Why d_ff is about 8/3 of d_model
#
# Three matrices instead of two. The paper's network holds $2 \cdot
# d_\text{model} \cdot 4 d_\text{model} = 8\,d_\text{model}^2$ weights;
# SwiGLU's three hold $3\,d_\text{model}\,d_{ff}$. The same count needs
# $d_{ff} = \tfrac{8}{3} d_\text{model}$, which is how Shazeer compared the
# variants fairly and how Llama sized its network. At $d_\text{model} =
# 512$, without biases as in Llama:

# %%
d = 512
paper_ffn = minitrans.FeedForward(d, 4 * d, rng=0, bias=False)
swiglu = minitrans.SwiGLUFeedForward(d, round(8 * d / 3), rng=0, bias=False)
print(f"ReLU network, d_ff = {4 * d}: {paper_ffn.num_parameters():,} weights")
print(f"SwiGLU,       d_ff = {swiglu.d_ff}: {swiglu.num_parameters():,} weights")

# %% [markdown]
# Meta's reference code computes the width from $\tfrac{8}{3}
# d_\text{model}$, times an optional `ffn_dim_multiplier`, rounded up to a
# multiple of `multiple_of` (a size that suits the accelerator). The
# numbers of the models' released `params.json` files give the
# `intermediate_size` of their `config.json` files:

# %%
def llama_d_ff(d_model, multiple_of, multiplier=None):
    """The feed-forward width of Meta's Llama code, from d_model."""
    hidden = int(2 * (4 * d_model) / 3)
    if multiplier is not None:
        hidden = int(multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


for name, d_model, multiple_of, multiplier, published in (
        ("Llama 2 7B", 4096, 256, None, 11008), ("Llama 2 70B", 8192, 4096, 1.3, 28672),
        ("Llama 3 8B", 4096, 1024, 1.3, 14336)):
    d_ff = llama_d_ff(d_model, multiple_of, multiplier)
    print(f"{name:<12} d_model {d_model}: d_ff = {d_ff} = {d_ff / d_model:.3f} d_model "
          f"(config.json: {published})")

# %% [markdown]
# Llama 2 7B keeps the 8/3 (rounded up to 2.69); the larger models take
# 1.3 times more, 3.5 $d_\text{model}$.
#
# ### The backward, and the gradient check
#
# With $a = xW_\text{gate}$, $u = xW_\text{up}$ and $m = \text{SiLU}(a)
# \odot u$: $dm$ comes from $W_\text{down}$'s backward, then $du = dm \odot
# \text{SiLU}(a)$ and $da = dm \odot u \odot \text{SiLU}'(a)$, with
# $\text{SiLU}'(a) = \sigma(a)\,(1 + a(1 - \sigma(a)))$. $x$ feeds both
# projections, so its gradient is the sum of what comes back through each:

# %%
with minitrans.using(dtype="float64"):
    ffn = minitrans.SwiGLUFeedForward(4, 6, rng=0)
    randomise_params(ffn, np.random.default_rng(3))
    print(format_table(check_layer(ffn, rng.standard_normal((2, 3, 4)))))

# %% [markdown]
# ### Exercise: the SwiGLU feed-forward
#
# Write `my_swiglu(x, W_gate, W_up, W_down)`, without biases. The checker
# tries random sizes, positions as rows, $d_{ff} = 1$, gate
# pre-activations of +1000 and −1000 (where one way of writing the sigmoid
# gives inf / inf) and float32.

# %%
from minitrans_course.exercises_modern import check_swiglu


def my_swiglu(x, W_gate, W_up, W_down):
    # your code here
    return np.zeros_like(x)


check_swiglu(my_swiglu);

# %% [markdown]
# ## 4. Grouped-query attention
#
# Multi-head attention (lesson 7) gives each of its $h$ heads its own
# queries, keys and values. While decoding, the keys and values of every
# past position are kept in the cache (lesson 15), for every head of every
# layer, and for long contexts and large batches the cache, not the
# weights, fills the accelerator's memory. Shazeer (2019) let all the query
# heads share **one** key/value head (multi-query attention); Ainslie et
# al. (2023) found the middle way: `kv_heads` key/value heads ($h_\text{kv}$),
# each shared by a group of $g = h / h_\text{kv}$ query heads. $W_K$ and $W_V$
# then project to $h_\text{kv} \cdot d_k$ columns instead of $h \cdot
# d_k$, and query head $i$ reads key/value head $\lfloor i/g \rfloor$:

# %%
with minitrans.using(dtype="float64"):
    gqa = minitrans.MultiHeadAttention(16, 4, rng=0, kv_heads=2)
    K_shared = np.arange(2.0)[None, :, None, None] * np.ones((1, 2, 3, 4))  # head 0: 0, 1: 1
    print("W_Q:", gqa.W_Q.params["W"].shape, " W_K:", gqa.W_K.params["W"].shape,
          " W_V:", gqa.W_V.params["W"].shape)
    print("key/value head read by query heads 0 to 3:",
          minitrans.to_numpy(gqa.repeat_kv(K_shared))[0, :, 0, 0])

# %% [markdown]
# `kv_heads = h` is multi-head attention; `kv_heads = 1` is multi-query
# attention. In the backward, each shared key/value head was used by $g$
# query heads, so its gradient is the **sum** of theirs, the backward of
# the repetition (`sum_groups`); everything else is lesson 11's backward.
#
# Repeating the heads is the reference version, the one that reads as the
# paper and the one this course runs. The fast version, minitrans's default
# outside the course, copies nothing: the queries of a group's $g$ heads
# are stacked as $g \cdot T_q$ rows, which meet their one key/value head in
# a single product (`minitrans/layers/grouped.py`). Then $dK = dS^\top Q$
# runs over all $g \cdot T_q$ rows, so the product itself adds up the
# group's gradients.
# Both versions, checked for two key/value heads of four and for one:

# %%
causal = minitrans.causal_mask(3)
with minitrans.using(dtype="float64"):
    results = []
    for kv_heads in (2, 1):
        layer = minitrans.MultiHeadAttention(4, 4, rng=0, kv_heads=kv_heads)
        randomise_params(layer, np.random.default_rng(4))
        x = rng.standard_normal((2, 3, 4))
        for kernel_set in ("reference", "fast"):
            with minitrans.using(kernels=kernel_set):
                results += check_layer(layer, x, mask=causal,
                                       label=f"MHA, kv_heads {kv_heads} of 4, {kernel_set}")
    print(format_table(results))

# %% [markdown]
# ### The cache at real sizes
#
# Per token, the cache holds a key and a value of $d_k$ numbers for each
# key/value head of each layer: $2 \cdot N \cdot h_\text{kv} \cdot
# d_k$ numbers (`memory_budget.kv_cache_numbers`), 2 bytes each in
# float16. The sizes below are those of the models' `config.json` files,
# with their context lengths (Llama 2: 4,096 tokens; Llama 3: 8,192); the
# parameter counts, computed from them by `ModelConfig.parameter_count()`,
# are those Hugging Face lists (6.74 B, 69.0 B and 8.03 B).

# %%
LLAMAS = {  # hidden_size, heads, key/value heads, layers, intermediate_size, vocab, context
    "Llama 2 7B": (4096, 32, 32, 32, 11008, 32000, 4096),
    "Llama 2 70B": (8192, 64, 8, 80, 28672, 32000, 4096),
    "Llama 3 8B": (4096, 32, 8, 32, 14336, 128256, 8192),
}
GiB = 2**30
print(f"{'model':<12}{'parameters':>16}{'weights':>10}{'cache/token':>13}{'at context':>12}"
      f"{'without GQA':>13}{'batch 16':>10}")
for name, (d, h, kv, N, d_ff, V, context) in LLAMAS.items():
    llama = minitrans.ModelConfig(vocab_size=V, d_model=d, h=h, N=N, d_ff=d_ff, max_len=context,
                                  **{**TODAY, "kv_heads": kv})
    per_token = memory_budget.kv_cache_numbers(llama, 1) * 2  # bytes in float16
    full = memory_budget.kv_cache_numbers(llama, context) * 2
    no_gqa = 2 * N * h * (d // h) * context * 2
    print(f"{name:<12}{llama.parameter_count():>16,}{llama.parameter_count() * 2 / GiB:>8.1f} G"
          f"{per_token / 2**20:>10.3f} MiB{full / GiB:>9.2f} GiB{no_gqa / GiB:>10.2f} GiB"
          f"{16 * full / GiB:>7.0f} GiB")

# %% [markdown]
# (Weights in float16, GiB = $2^{30}$ bytes; "batch 16" is the cache of 16
# sequences at full context.) Llama 2 7B, without grouping, keeps half a
# megabyte per token: a batch of 16 sequences of 4,096 tokens needs 32 GiB
# of cache, more than its 12.6 GiB of weights. Llama 2 70B, ten times
# larger, keeps *less* per token, because its 64 query heads share 8
# key/value heads (10 GiB per sequence without the grouping). Llama 3 8B,
# with 8 key/value heads for 32, fits twice Llama 2 7B's context in half
# the memory. Ainslie et al. found grouped-query attention's quality close
# to multi-head attention's, at the speed of multi-query.
#
# Decoding need not repeat the cache either. `MultiHeadAttention.attend`,
# the inference half of the layer, stacks the queries of a group's $g$
# heads as $g$ rows, $(B, h_\text{kv}, g \cdot T_q, d_k)$, against their one
# key/value head, which it reads in place: the same numbers as the
# repetition above, up to rounding (`tests/library/test_grouped_query.py`).
# Decoding times with 2 and with 8 key/value heads, the llama config of
# `benchmarks/vs_pytorch.py` otherwise (a quarter of the cache), are in
# `benchmarks/results/grouped_query/`.
#
# ### Exercise: the backward of grouped-query attention
#
# Write `my_grouped_attention_backward(Q, K, V, dout)` returning `(dQ, dK,
# dV)` for causal attention, $\text{softmax}(QK^\top / \sqrt{d_k} + M)\,V$
# with the scores scaled by $1/\sqrt{d_k}$ as in lesson 5, where $Q$ and
# `dout` are $(B, h, T, d_k)$ and $K$, $V$ are $(B, h_\text{kv}, T, d_k)$,
# query head $i$ reading key/value head $\lfloor i / g \rfloor$. Lesson 11's attention backward
# does most of the work. The checker tries groups of 2 and 3, multi-query
# (one key/value head), multi-head ($h_\text{kv} = h$), one position
# and float32; its reference works each query head out alone and adds it
# into its key/value head.

# %%
from minitrans_course.exercises_modern import check_grouped_attention_backward


def my_grouped_attention_backward(Q, K, V, dout):
    # your code here
    return np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)


check_grouped_attention_backward(my_grouped_attention_backward);

# %% [markdown]
# ## 5. A toy ablation: the 2017 block against today's
#
# Do these choices make a better model? The papers say yes, at their
# scales. At this course's scale, `benchmarks/modern_ablation.py` trains
# decoder-only models on the `lm` task (two-digit sums, "12+34=" → "46",
# 9,000 sums to train on and 1,000 held out) and measures the held-out sums
# as the task measures them: the cross-entropy of the answer's tokens,
# teacher forced, and the exact match of the greedy answers. Every model has
# two layers, $d_\text{model} = 64$ and 4 heads and trains for the same
# steps on the same batches, three seeds each (a seed fixes the held-out
# split, the initial weights and the batch order). Besides the 2017 block
# and today's, it trains pre-norm alone, each of the four changes alone on
# top of pre-norm, and today's block without biases, as in Llama (the other
# rows keep the paper's biases).
#
# A fair comparison holds the parameter budget fixed: SwiGLU's third matrix
# costs parameters, grouped-query attention's smaller $W_K$ and $W_V$ save
# some, so each row gets the $d_{ff}$ that brings its count closest to the
# 2017 block's. The two blocks, by `ModelConfig.parameter_count()`:

# %%
ROOT = pathlib.Path.cwd().resolve().parent  # the lessons run in lessons/
sys.path.insert(0, str(ROOT / "benchmarks"))
import modern_ablation  # noqa: E402  benchmarks/modern_ablation.py, whose results we read

from minitrans.data.tasks import load_task  # noqa: E402

task = load_task("lm", seed=0)
for row_id, what, changes in modern_ablation.ROWS:
    if row_id in ("2017", "today"):
        config = modern_ablation.row_config(task, changes)
        print(f"{row_id:<6} {what:<48} d_ff {config.d_ff:>3}: "
              f"{config.parameter_count():,} parameters")

# %% [markdown]
# The stored results (training them takes the time the first line says; the
# lesson only reads them):

# %%
stored = json.loads((ROOT / "benchmarks" / "results" / "modern_ablation.json")
                    .read_text(encoding="utf-8"))
rows = {row["id"]: row for row in stored["rows"]}
print(stored["machine"])
print("training:", stored["setup"]["training"])
display(Markdown(modern_ablation.markdown_table(stored["rows"])))

# %% [markdown]
# The held-out loss along training, averaged over the seeds:

# %%
fig, ax = plt.subplots(figsize=(7, 4))
for row in stored["rows"]:
    steps, losses = zip(*row["curve"])
    style = "-" if row["id"] in ("2017", "today") else ":"
    ax.plot(steps, losses, style, label=row["id"], linewidth=2 if style == "-" else 1.2)
ax.set_yscale("log")
ax.set_xlabel("step")
ax.set_ylabel("held-out loss (nats per answer token)")
ax.legend(fontsize=8)
ax.set_title("The lm task: mean of three seeds")
plt.show()

# %% [markdown]
# Each row against the 2017 block, with the seeds' spread beside it (half
# the range of the three runs): a difference smaller than the spreads is
# not one this toy can see.

# %%
base = rows["2017"]
for row in stored["rows"][1:]:
    d_loss = row["mean"]["loss"] - base["mean"]["loss"]
    d_match = row["mean"]["exact_match"] - base["mean"]["exact_match"]
    noise = row["spread"]["exact_match"] + base["spread"]["exact_match"]
    print(f"{row['id']:<9} loss {d_loss:+.3f} (spreads {row['spread']['loss']:.3f}, "
          f"{base['spread']['loss']:.3f}); exact match {d_match:+6.1%} "
          f"({'beyond' if abs(d_match) > noise else 'within'} the spreads, {noise:.1%})")
print("\nexact match seed by seed:")
for row in stored["rows"]:
    print(f"{row['id']:<9}", "  ".join(f"{run['exact_match']:6.1%}" for run in row["runs"]))

# %% [markdown]
# What the toy shows, read with the spreads:
#
# * **No row is beyond the seeds' spread from the 2017 block.** Today's
#   block has the best mean (a held-out loss of 0.059 against 0.131, an
#   exact match of 94.0% against 83.7%), but the 2017 block's seeds range
#   from 68.8% to 94.8%. Three seeds of a model of 100,000 parameters on
#   two-digit sums cannot settle what the papers measured on billions of
#   tokens. (Nor is this the task's full training: with its defaults, a
#   model twice as wide and batches of 128, the 2017 block reaches 99.5% in
#   1,750 steps, as `benchmarks/results/task_targets/` records.)
# * **What it suggests is steadier and faster learning.** Today's three
#   seeds lie within 4 points of each other (92.0% to 95.8%), the 2017
#   block's within 26; today's block reaches a held-out loss of 0.16 by step
#   1,250, where the 2017 block is at 0.50. Of the single changes SwiGLU
#   comes closest (0.16 at step 1,250, 90.7% ± 3.3% at the end); rotary
#   positions alone have the lowest mean and the widest spread (61.0% to
#   94.1%): the changes do not simply add up here.
# * **Without biases, one seed of three stalled**, at a held-out loss of
#   0.695 and 10.9% exact match, where the other two reach 79.7% and 94.7%
#   (the run with biases, same seed: 94.2%). Llama trains well without
#   biases at its scale and with its schedule; at this toy's, a small model
#   without them can sit on a plateau. One seed is no finding either, but a
#   reason to run more seeds before believing a table.
# * The seconds per run measure the machine's load as much as the models:
#   they are no speed comparison.

# %% [markdown]
# ## Summary
#
# * RMSNorm divides each position by its root mean square and scales by
#   the gain $\gamma$: LayerNorm without the centring and the shift, still
#   invariant to the input's scale, kept for its results in experiments
#   rather than for an identity; its backward loses LayerNorm's
#   $-\text{mean}(g)$ term.
# * Rotary positions turn each pair of a head's query and key coordinates
#   by $m\,\theta_i$, so a score depends only on the distance $n - m$
#   (checked to rounding over 64 × 64 positions); a cached key is rotated
#   at its absolute position, the layer's `offset`.
# * SwiGLU gates one projection with the SiLU of another: three matrices,
#   so $d_{ff} \approx \tfrac{8}{3} d_\text{model}$ keeps the paper's
#   parameter count (Llama 2 7B: 11,008 for 4,096).
# * Grouped-query attention shares each key/value head among $h /
#   h_\text{kv}$ query heads; their gradients add up in the backward,
#   and the cache shrinks by the same factor (Llama 2 70B: 8 of 64 heads,
#   1.25 GiB per 4,096 tokens instead of 10).
# * On the toy sums at the 2017 block's parameter budget, three seeds
#   each (`benchmarks/modern_ablation.py`), today's block has the best mean
#   (94.0% exact match against 83.7%) and the steadiest seeds, but within
#   the 2017 block's seed spread: this scale cannot tell them apart.
#
# ## Next
#
# [Lesson 23](23_loading_pretrained_weights.ipynb), loading pretrained
# weights: GPT-2's and Llama's checkpoints read into these layers, checked
# against `transformers`, fine-tuned for a step and saved back.

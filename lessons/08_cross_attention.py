# %% [markdown]
# # Lesson 8: Cross-attention, where the decoder reads the source
#
# So far every attention layer took its queries, keys and values from one
# sequence: self-attention. The decoder of the Transformer has a second
# attention block in each layer, between its masked self-attention and its
# feed-forward network. The paper (§3.2.3) calls it *encoder-decoder
# attention*; today it is usually called **cross-attention**. Its queries come
# from the decoder, its keys and values from the encoder's output (the paper's
# "memory keys and values"; code, minitrans included, calls the encoder output
# the **memory**). It is the only place where information from the source
# sentence enters the decoder.
#
# In this lesson:
#
# 1. the shapes: $T_\text{tgt}$ queries against $T_\text{src}$ keys, so the
#    attention matrix is not square;
# 2. why the keys and the values must come, as a pair, from the same sequence;
# 3. `MultiHeadAttention.forward(x, memory, mask=...)` and the padding mask of
#    the source;
# 4. a heat map of cross-attention, target words against source words;
# 5. the backward, which returns two gradients, and its gradient check;
# 6. an exercise: one head of cross-attention, written by you.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np

import minitrans
from minitrans import MultiHeadAttention, ScaledDotProductAttention, padding_mask

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)

PAD = 0  # the id of <pad>, as in the rest of minitrans

# %% [markdown]
# **You are here**: the decoder's middle attention box, whose keys and values
# come from the encoder's output, the memory. The drawing is the paper's base
# model (Table 3), made from its `ModelConfig`.

# %%
from minitrans_course.diagrams import draw_architecture

paper_config = minitrans.ModelConfig.preset("base", vocab_size=37000)
_, ax = plt.subplots(figsize=(9, 10))
draw_architecture(paper_config, highlight="cross_attn", ax=ax)
plt.show()

# %% [markdown]
# ## Queries from one sequence, keys and values from another
#
# Multi-head attention (§3.2.2, lesson 7) is the same function as before,
#
# $$\text{MultiHead}(Q, K, V) = \text{Concat}(\text{head}_1, \dots, \text{head}_h)\,W^O,
# \qquad \text{head}_i = \text{Attention}(Q W_i^Q, K W_i^K, V W_i^V),$$
#
# only with different arguments. Let $x$ be the decoder's hidden states and $m$
# the encoder's output:
#
# | | self-attention (encoder or decoder) | cross-attention (decoder) |
# | --- | --- | --- |
# | queries | $x$, shape $(B, T, d_\text{model})$ | $x$, shape $(B, T_\text{tgt}, d_\text{model})$ |
# | keys and values | $x$, shape $(B, T, d_\text{model})$ | $m$, shape $(B, T_\text{src}, d_\text{model})$ |
# | attention weights | $(B, h, T, T)$, square | $(B, h, T_\text{tgt}, T_\text{src})$ |
# | output | $(B, T, d_\text{model})$ | $(B, T_\text{tgt}, d_\text{model})$ |
#
# After the projections and the split into heads, $Q$ is
# $(B, h, T_\text{tgt}, d_k)$ and $K$, $V$ are $(B, h, T_\text{src}, d_k)$, so
# $QK^\top$ is $(B, h, T_\text{tgt}, T_\text{src})$: **one row per target
# position, one column per source position**. The output has one row per
# query, so it has the decoder's length and slots back into the decoder's
# residual stream.
#
# In minitrans the same class does both: `forward(x)` is self-attention,
# `forward(x, memory)` is cross-attention. Below, a batch of 2 with 3 target
# positions and 5 source positions.

# %%
rng = np.random.default_rng(0)
B, T_tgt, T_src, d_model, h = 2, 3, 5, 8, 2

cross = MultiHeadAttention(d_model, h, rng=0)
x = minitrans.from_host(rng.standard_normal((B, T_tgt, d_model)))       # decoder states
memory = minitrans.from_host(rng.standard_normal((B, T_src, d_model)))  # encoder output

out = cross.forward(x, memory)
weights = cross.attention.attention_weights
print("x      (B, T_tgt, d_model):", x.shape)
print("memory (B, T_src, d_model):", memory.shape)
print("weights (B, h, T_tgt, T_src):", weights.shape)
print("out    (B, T_tgt, d_model):", out.shape)
print("each row of weights sums to 1:",
      np.allclose(minitrans.to_numpy(weights).sum(axis=-1), 1.0, atol=1e-6))

# %% [markdown]
# ## Why K and V come as a pair
#
# Look at one head and one query $i$ (a target position). Attention computes
#
# $$P_{ij} = \operatorname{softmax}_j\!\left(\frac{q_i \cdot k_j}{\sqrt{d_k}}\right),
# \qquad \text{out}_i = \sum_{j=1}^{T_\text{src}} P_{ij}\, v_j .$$
#
# The weights $P_{i1}, \dots, P_{iT_\text{src}}$ are a probability
# distribution **over the key positions** $j$. The output averages the values
# with these weights, so value $j$ must be the value *of key position $j$*: the
# keys and the values have to be indexed by the same positions, that is, come
# from the same sequence. In matrix form, $P$ is $(T_\text{tgt}, T_\text{src})$
# and $PV$ needs $V$ to have $T_\text{src}$ rows.
#
# Values from the decoder could not work: with $T_\text{tgt} \ne T_\text{src}$
# the product is not even defined, and if the lengths happened to be equal,
# the weight computed for source word $j$ would multiply the vector of target
# word $j$, which has nothing to do with it. The query has no such constraint:
# each query only produces its own row of $P$, so there can be any number of
# them. The key decides *where* to look, the value *what* is found there.
#
# `ScaledDotProductAttention` (lesson 5) refuses values of the wrong length:

# %%
attention = ScaledDotProductAttention()
d_k = 4
Q = minitrans.from_host(rng.standard_normal((1, 3, d_k)))   # 3 queries
K = minitrans.from_host(rng.standard_normal((1, 5, d_k)))   # 5 keys
# 3 values: from the queries' sequence
V_wrong = minitrans.from_host(rng.standard_normal((1, 3, d_k)))
try:
    attention.forward(Q, K, V_wrong)
except ValueError as error:
    print("ValueError:", error)

# %% [markdown]
# Any number of queries is fine, with the same memory. This is what happens
# when translating: the decoder produces one word at a time, so it sends one
# query per step, $T_\text{tgt} = 1$, against the whole source sentence.

# %%
for length in (1, 3, 7):
    queries = minitrans.from_host(rng.standard_normal((B, length, d_model)))
    y = cross.forward(queries, memory)
    print(f"T_tgt = {length}: out {y.shape}, weights {cross.attention.attention_weights.shape}")

# %% [markdown]
# Since the memory is the same at every decoding step, its keys and values can
# be computed once per sentence: `keys_values(memory)` returns the projected
# $K$ and $V$ heads, each $(B, h, T_\text{src}, d_k)$, and `attend(x, K, V)`
# runs the query half of `forward`. Decoding in minitrans does this (a later
# lesson on decoding uses it); the result is the same:

# %%
K_heads, V_heads = cross.keys_values(memory)
print("K, V heads:", K_heads.shape, V_heads.shape)
print("attend == forward:", np.allclose(minitrans.to_numpy(cross.attend(x, K_heads, V_heads)),
                                        minitrans.to_numpy(cross.forward(x, memory)), atol=1e-6))

# %% [markdown]
# ## Padding in the source
#
# Source sentences in a batch have different lengths, so the shorter ones are
# padded with `<pad>` tokens, and the encoder still produces a vector at each
# padded position. A query must not read those. `padding_mask(src, PAD)`
# (lesson 6) gives
# a boolean mask of shape $(B, 1, T_\text{src})$, True where the source token
# is real. Its axis of length 1 broadcasts over the target positions: *every*
# query of sentence $b$ ignores the same padded keys. Inside attention, the
# masked scores become $-\infty$ before the softmax, so their weights are
# exactly 0.
#
# Below, the second source sentence has 3 real tokens and 2 pads.

# %%
src = minitrans.to_device(np.array([[5, 6, 7, 8, 9],
                                    [5, 6, 7, PAD, PAD]]))  # (B, T_src) token ids
src_mask = padding_mask(src, PAD)
print("mask (B, 1, T_src):", src_mask.shape)
print(minitrans.to_numpy(src_mask).astype(int))

out = cross.forward(x, memory, mask=src_mask)
print("\nweights of sentence 2, head 1 (rows: 3 target positions, columns: 5 source positions):")
print(np.round(minitrans.to_numpy(cross.attention.attention_weights[1, 0]), 3))

# %% [markdown]
# A stronger test: whatever the encoder wrote at the padded positions must
# not change the output. We overwrite them with large numbers and compare.
# The weights of the padded keys stay exactly 0, and the reference softmax
# this course runs shifts each row by the largest of its unmasked scores
# (lesson 5), so nothing changes at all. (minitrans's fast softmax shifts a
# head's scores by one number, until their spread passes 60, as the huge
# scores make it here: then it shifts each row by its own maximum instead,
# and the same weights come out rounded slightly differently, about
# $10^{-7}$ in float32.)

# %%
noisy_memory = memory.copy()
noisy_memory[1, 3:] = 100.0                     # garbage at the two padded positions
out_noisy = cross.forward(x, noisy_memory, mask=src_mask)
print("largest change of the output:", float(np.abs(minitrans.to_numpy(out_noisy - out)).max()))

# %% [markdown]
# ## A picture: target words against source words
#
# A heat map of one head's weights, rows = target positions, columns = source
# positions, shows which source word each target word reads. In a trained
# translation model these maps often look like a soft word alignment. We have
# no trained model here, so we build one alignment **by hand**, to see what
# such a map looks like and to check that the code computes what we expect.
#
# The source is "the black cat sleeps <pad>", the target "le chat noir dort"
# (French puts the adjective after the noun, so the alignment is not
# diagonal). One head, $d_\text{model} = 8$. The memory vector of source word
# $j$ is the unit vector $e_j$ (the pad gets a random vector); the decoder
# vector of each target word is the unit vector of the source word it
# translates. With $W^K = W^V = W^O = I$, zero biases and $W^Q = c\,I$, the
# score of a matching pair is $c / \sqrt{d_k}$ and of any other pair 0. We
# take $c = 4\sqrt{8}$, so a match scores 4 and gets weight
# $e^4 / (e^4 + 3) \approx 0.948$ among the 4 real source words.
#
# Next to it, the same inputs through a layer with its random initial
# weights (two heads, first head shown): an **untrained** layer, whose
# pattern means nothing yet. Learning the projections is what turns the right
# map into the left one.

# %%
source_words = ["the", "black", "cat", "sleeps", "<pad>"]
target_words = ["le", "chat", "noir", "dort"]
aligned_to = [0, 2, 1, 3]  # le -> the, chat -> cat, noir -> black, dort -> sleeps

eye = np.eye(d_model)
memory_words = np.zeros((1, len(source_words), d_model))
memory_words[0, :4] = eye[:4]                            # e_0 .. e_3 for the real words
memory_words[0, 4] = np.random.default_rng(1).standard_normal(d_model)  # the pad's vector
decoder_words = eye[aligned_to][None]                    # (1, T_tgt=4, d_model)
mask_words = padding_mask(minitrans.to_device(np.array([[5, 6, 7, 8, PAD]])), PAD)

hand_made = MultiHeadAttention(d_model, 1, rng=0)
c = 4 * math.sqrt(d_model)
for linear, W in [(hand_made.W_Q, c * eye), (hand_made.W_K, eye), (hand_made.W_V, eye),
                  (hand_made.W_O, eye)]:
    linear.params["W"] = minitrans.from_host(W)
    if "b" in linear.params:                             # W_K has no bias
        linear.params["b"] = minitrans.from_host(np.zeros(d_model))

x_words, memory_words = minitrans.from_host(decoder_words), minitrans.from_host(memory_words)
hand_made.forward(x_words, memory_words, mask=mask_words)
hand_map = minitrans.to_numpy(hand_made.attention.attention_weights[0, 0])      # (T_tgt, T_src)

untrained = MultiHeadAttention(d_model, 2, rng=0)
untrained.forward(x_words, memory_words, mask=mask_words)
random_map = minitrans.to_numpy(untrained.attention.attention_weights[0, 0])    # head 1 of 2

print("hand-made weights (T_tgt=4, T_src=5):")
print(np.round(hand_map, 3))

# %%
fig, axes = plt.subplots(1, 2, figsize=(9, 3.8), layout="constrained")
panels = [(hand_map, "hand-set weights (not trained)"),
          (random_map, "random weights (untrained), head 1")]
for ax, (weights_map, title) in zip(axes, panels):
    image = ax.imshow(weights_map, cmap="viridis", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(source_words)), source_words, rotation=45)
    ax.set_yticks(range(len(target_words)), target_words)
    ax.set_xlabel("source token (key, encoder)")
    ax.set_ylabel("target token (query, decoder)")
    ax.set_title(title, fontsize=10)
fig.colorbar(image, ax=axes, label="attention weight")
fig.suptitle("Cross-attention weights: 4 target rows x 5 source columns")
plt.show()

# %% [markdown]
# The left map is a soft alignment: "chat" reads "cat", "noir" reads "black",
# each with weight 0.948, and the `<pad>` column is exactly 0 in both maps.
# The right map spreads its weight over the real words with no relation to
# their meaning, as expected before training.

# %% [markdown]
# ## The backward: two gradients
#
# Cross-attention has two floating-point inputs, so its backward returns two
# gradients, `(dx, dmemory)`:
#
# * $x$ is used once, through $Q = xW^Q$, so $\partial L / \partial x$ comes
#   back through the query projection alone;
# * the memory is used twice, through $K = mW^K$ and $V = mW^V$, so
#   $\partial L / \partial m$ is the **sum** of what flows back through the key
#   projection and through the value projection.
#
# (In self-attention $x$ plays all three parts, and its backward returns the
# sum of the three as one array.) In the full model every decoder layer reads
# the same memory, so the encoder's output receives the sum of the `dmemory`
# of all $N$ decoder layers.
#
# Gradients at padded source positions are exactly zero: they got zero weight,
# so nothing they hold affects the loss.

# %%
out = cross.forward(x, memory, mask=src_mask)
dout = minitrans.from_host(rng.standard_normal(out.shape))
dx, dmemory = cross.backward(dout)
print("dx      (B, T_tgt, d_model):", dx.shape)
print("dmemory (B, T_src, d_model):", dmemory.shape)
print("largest |dmemory| at the padded positions:",
      float(np.abs(minitrans.to_numpy(dmemory[1, 3:])).max()))

# %% [markdown]
# ## Gradient check
#
# `check_layer` perturbs every element of $x$, of the memory and of the seven
# parameters ($W^Q, W^K, W^V, W^O, b^Q, b^V, b^O$), with the source padding
# mask in place, and compares with the backward. Both input gradients appear
# in the table.

# %%
from minitrans.gradcheck import check_layer, format_table
from minitrans.gradcheck import randomise_params

with minitrans.using(dtype="float64"):
    check_rng = np.random.default_rng(0)
    layer64 = randomise_params(MultiHeadAttention(d_model, h, rng=0), check_rng)
    x64 = minitrans.from_host(check_rng.standard_normal((B, T_tgt, d_model)))
    memory64 = minitrans.from_host(check_rng.standard_normal((B, T_src, d_model)))
    results = check_layer(layer64, x64, memory64, mask=padding_mask(src, PAD),
                          label="cross-attention")
    print(format_table(results))
    print("all pass:", all(r.passed for r in results))

# %% [markdown]
# ## Exercise: one head of cross-attention
#
# Write `my_cross_attention(x, memory, W_Q, W_K, W_V, src_mask)` in NumPy, one
# head without biases:
#
# * `x` is the decoder's $(B, T_\text{tgt}, d)$, `memory` the encoder's
#   $(B, T_\text{src}, d)$, and `W_Q`, `W_K`, `W_V` are $(d, d_k)$;
# * queries come from `x`, keys and values from `memory`; the scores are
#   $(B, T_\text{tgt}, T_\text{src})$;
# * `src_mask` is $(B, 1, T_\text{src})$, `True` at real source tokens:
#   masked scores become $-\infty$ before the softmax (every source has at
#   least one real token);
# * return the $(B, T_\text{tgt}, d_k)$ output.
#
# The checker always has $T_\text{tgt} \ne T_\text{src}$, so
# that keys taken from the wrong sequence fail on their shapes, and tries
# source padding, a source of one real token, a batch of one, one target
# position and float32, against projections and attention computed one dot
# product at a time. The solution is in `solutions/08_cross_attention.py`.

# %%
from minitrans_course.exercises_masks_heads import check_cross_attention


def my_cross_attention(x, memory, W_Q, W_K, W_V, src_mask):
    # your code here
    return np.zeros(x.shape[:-1] + W_V.shape[-1:])


check_cross_attention(my_cross_attention);

# %% [markdown]
# ## Summary
#
# * Cross-attention is multi-head attention with queries from the decoder,
#   $(B, T_\text{tgt}, d_\text{model})$, and keys and values from the encoder
#   output, $(B, T_\text{src}, d_\text{model})$; its weights are
#   $(B, h, T_\text{tgt}, T_\text{src})$, not square.
# * The weights are a distribution over source positions, so the values they
#   average must be indexed by the same positions as the keys: K and V come
#   from one sequence, Q may have any length.
# * `padding_mask(src, PAD)`, $(B, 1, T_\text{src})$, hides padded source
#   positions from every query; their weights and gradients are exactly zero.
# * The backward returns `(dx, dmemory)`; the memory's gradient sums its key
#   and value paths.
#
# ## Next
#
# [Lesson 9](09_residual_and_layer_norm.ipynb), residual connections and layer
# normalisation.

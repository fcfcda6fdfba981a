# %% [markdown]
# # Lesson 6: Masks
#
# Attention lets every query look at every key. Twice in a Transformer that
# is too much:
#
# * **padding**: sentences in a batch have different lengths, so the short
#   ones are filled up with a `<pad>` token; nobody should attend to it;
# * **the future**: during training the decoder receives the whole target
#   sentence at once, and position $t$ must not read the tokens after it.
#
# Both are handled the same way: a boolean mask says which (query, key) pairs
# are allowed, and the forbidden scores become $-\infty$ before the softmax
# (§3.2.3).
#
# In this lesson:
#
# 1. the causal mask and the padding mask, built with `minitrans.masks`;
# 2. why $-\infty$, and not a large negative number;
# 3. masked attention weights, as pictures;
# 4. a query that may attend to nothing: zero output, zero gradient, no NaN;
# 5. why the decoder needs the causal mask and the encoder does not, and a
#    numerical proof that the masked decoder cannot see the future;
# 6. an exercise: the decoder's mask, written by you.

# %%
import matplotlib.pyplot as plt
import numpy as np

import minitrans
from minitrans import causal_mask, decoder_mask, padding_mask
from minitrans.ops.softmax import masked_softmax, softmax

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)

print("minitrans", minitrans.__version__, "| backend:", minitrans.core.backend.backend_name())

# %% [markdown]
# **You are here**: the causal mask lives in the decoder's masked
# self-attention; the padding masks, written in red beside every attention
# box, apply everywhere. The drawing is the paper's base model (Table 3), made
# from its `ModelConfig`.

# %%
from minitrans_course.diagrams import draw_architecture

paper_config = minitrans.ModelConfig.preset("base", vocab_size=37000)
_, ax = plt.subplots(figsize=(9, 10))
draw_architecture(paper_config, highlight="masked_self_attn", ax=ax)
plt.show()

# %% [markdown]
# ## Two masks
#
# In minitrans a mask is a boolean array that broadcasts to the scores
# $(B, T_q, T_k)$: **`True` where a query may attend**, `False` where it may
# not.
#
# * `causal_mask(T)` is $(T, T)$ and lower-triangular: query $i$ may see keys
#   $0, 1, \dots, i$, itself included, and nothing after it.
# * `padding_mask(ids, pad_id)` is $(B, 1, T)$: `False` at the keys that are
#   `<pad>`. Its middle axis of size 1 broadcasts over the queries: no query
#   may attend to a padding key.
# * `decoder_mask(ids, pad_id)` is $(B, T, T)$, the two combined with a
#   logical *and*: the mask of the decoder's self-attention.

# %%
print(causal_mask(5).astype(int))

# %%
PAD = 0
vocabulary = {0: "<pad>", 1: "<bos>", 2: "the", 3: "cat", 4: "sat", 5: "a", 6: "dog", 7: "ran",
              8: "far"}
ids = minitrans.to_device(np.array([[1, 2, 3, 4, 0, 0],     # <bos> the cat sat <pad> <pad>
                                    [1, 5, 6, 7, 8, 0]]))   # <bos> a dog ran far <pad>
tokens = [[vocabulary[int(i)] for i in row] for row in minitrans.to_numpy(ids)]

pad = padding_mask(ids, PAD)
dec = decoder_mask(ids, PAD)
print("ids:", ids.shape, "| padding_mask:", pad.shape, "| decoder_mask:", dec.shape)
print("padding mask of sentence 0:", pad[0].astype(int))
print("decoder mask of sentence 0:")
print(dec[0].astype(int))

# %% [markdown]
# The same three masks as pictures, for the first sentence (yellow: may
# attend). The padding mask is drawn broadcast to $(T, T)$: the same row for
# every query.

# %%
T = ids.shape[1]
panels = [("causal_mask(6)", causal_mask(T)),
          ("padding_mask, broadcast", np.broadcast_to(pad[0], (T, T))),
          ("decoder_mask = both", dec[0])]
fig, axes = plt.subplots(1, 3, figsize=(11, 4), layout="constrained")
for ax, (title, mask) in zip(axes, panels):
    image = ax.imshow(minitrans.to_numpy(mask).astype(int), cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(T), tokens[0], rotation=90)
    ax.set_yticks(range(T), tokens[0])
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_title(title)
colorbar = fig.colorbar(image, ax=axes, ticks=[0, 1], fraction=0.02)
colorbar.ax.set_yticklabels(["masked", "may attend"])
fig.suptitle("Masks of '<bos> the cat sat <pad> <pad>'")
plt.show()

# %% [markdown]
# The rows of the `<pad>` queries in the decoder mask are not empty: a pad
# position still sees the real tokens before it. Its output is garbage, but
# harmless, because the loss ignores pad positions (a later lesson).
#
# ## $-\infty$ before the softmax
#
# With $M_{ij} = 0$ where the mask is `True` and $M_{ij} = -\infty$ where it
# is `False`,
#
# $$\mathrm{Attention}(Q, K, V)
#   = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}} + M\right) V .$$
#
# A forbidden key's weight is $e^{-\infty} / \sum_j e^{s_j} = 0$ **exactly**,
# so its value contributes nothing, and no gradient flows to it either.
# minitrans's `masked_softmax` puts $-\infty$ in the masked places with
# `xp.where(mask, z, -inf)`.
#
# Many implementations use a large negative number instead, such as
# $-10^9$. Compare, in float32, one row of five scores whose last two keys are
# masked, filled with different values:

# %%
scores = np.array([[1.2, 0.3, -0.5, 2.0, 0.7]], dtype=np.float32)   # (1 query, 5 keys)
row_mask = np.array([[True, True, True, False, False]])

print("fill       weight left on the 2 masked keys")
for fill in [-10.0, -30.0, -1e4, -1e9, -np.inf]:
    weights = softmax(np.where(row_mask, scores, np.float32(fill)))
    print(f"{fill:<10g} {weights[0, 3:].sum():.3e}")

# %% [markdown]
# A finite fill $c$ gives a masked key the weight $e^{c - \max_j s_j}$ divided
# by the row's sum, which is exactly 0 only when $c - \max_j s_j$ is below the
# underflow limit of the dtype (about $-104$ in float32). $-10$ and $-30$
# leak; $-10^4$ and $-10^9$ are large enough here, but "large enough" depends
# on the scores and on the dtype ($-10^9$ is not even representable in
# float16, whose largest finite magnitude is 65504). $-\infty$ needs no such
# judgement: it is exact for any scores and any float type.
#
# The real difference shows in a row where **every** key is masked:

# %%
all_masked = np.zeros((1, 5), dtype=bool)
with np.errstate(invalid="ignore"):
    print("fill -inf, plain softmax:", softmax(np.where(all_masked, scores, -np.inf)))
print("fill -1e9, plain softmax:", softmax(np.where(all_masked, scores, np.float32(-1e9))))
print("minitrans masked_softmax:", masked_softmax(scores, all_masked))

# %% [markdown]
# * With $-\infty$ and the plain softmax of lesson 2, the row maximum is
#   $-\infty$ and $-\infty - (-\infty)$ is NaN. Loud, and the NaN would
#   spread through the whole model.
# * With $-10^9$ every score is equal, so the softmax is uniform: the query
#   silently attends, with weight $1/5$ each, to exactly the keys it was
#   forbidden to see.
# * `masked_softmax` checks for this case and returns a row of zeros: a query
#   that may see nothing receives nothing.
#
# ## Masked attention weights
#
# Self-attention over the first sentence, with random vectors standing in for
# the queries, keys and values ($Q = K = V = X$, shape $(T, d) = (6, 8)$),
# without a mask, with the causal mask, and with the decoder mask. Each row
# still sums to 1, over the keys it may see.

# %%
rng = np.random.default_rng(0)
X = minitrans.from_host(rng.standard_normal((T, 8)))     # (T, d)
attention = minitrans.ScaledDotProductAttention()

fig, axes = plt.subplots(1, 3, figsize=(11, 4), layout="constrained")
for ax, (title, mask) in zip(axes, [("no mask", None), ("causal mask", causal_mask(T)),
                                    ("decoder mask", dec[0])]):
    attention.forward(X, X, X, mask=mask)
    weights = minitrans.to_numpy(attention.attention_weights)    # (T, T)
    image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(T), tokens[0], rotation=90)
    ax.set_yticks(range(T), tokens[0])
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_title(title)
    masked = ("" if mask is None
              else f" | largest masked weight {weights[~minitrans.to_numpy(mask)].max()}")
    print(f"{title:12s} row sums {weights.sum(axis=-1).round(6)}{masked}")
fig.colorbar(image, ax=axes, fraction=0.02, label="attention weight")
fig.suptitle("Self-attention weights of '<bos> the cat sat <pad> <pad>'")
plt.show()

# %% [markdown]
# Above the diagonal the masked weights are exactly 0, and in the decoder mask
# the two `<pad>` columns are too; the first query, `<bos>`, can only attend
# to itself, with weight 1.
#
# ## A query that may attend to nothing
#
# When does a row with no allowed key happen? A sentence made only of
# padding (an empty line in a batch), or a mask assembled from several
# conditions that exclude each other. It must not poison the batch. Here
# query 1 of three may see no key:

# %%
with minitrans.using(dtype="float64"):
    rng = np.random.default_rng(1)
    Q = minitrans.from_host(rng.standard_normal((3, 4)))   # (T_q, d_k)
    K = minitrans.from_host(rng.standard_normal((4, 4)))   # (T_k, d_k)
    V = minitrans.from_host(rng.standard_normal((4, 2)))   # (T_k, d_v)
    mask = minitrans.to_device(np.array([[True, True, False, False],
                                         [False, False, False, False],    # query 1: nothing
                                         [True, True, True, True]]))
    attention = minitrans.ScaledDotProductAttention()
    out = attention.forward(Q, K, V, mask=mask)
    dQ, dK, dV = attention.backward(minitrans.from_host(rng.standard_normal((3, 2))))
    print("weights:\n", attention.attention_weights.round(3))
    print("output row of query 1:", out[1], "| dQ row of query 1:", dQ[1])
    print("any NaN anywhere:", any(bool(np.isnan(a).any()) for a in (out, dQ, dK, dV)))

# %% [markdown]
# The output of query 1 is zero and so is its gradient, while queries 0 and 2
# are computed as usual. The gradient check of lesson 5, rerun with this mask
# and with the causal mask, confirms that the backward is right in both
# cases (masked weights are 0, so the softmax backward gives them a zero
# score gradient):

# %%
from minitrans.gradcheck import check_layer, format_table

with minitrans.using(dtype="float64"):
    rng = np.random.default_rng(2)
    Q = minitrans.from_host(rng.standard_normal((2, 3, 4)))   # (B, T_q, d_k)
    K = minitrans.from_host(rng.standard_normal((2, 4, 4)))   # (B, T_k, d_k)
    V = minitrans.from_host(rng.standard_normal((2, 4, 2)))   # (B, T_k, d_v)
    results = check_layer(minitrans.ScaledDotProductAttention(), Q, K, V, mask=mask,
                          label="Attention (row 1 fully masked)")
    Q4 = minitrans.from_host(rng.standard_normal((2, 4, 4)))  # T_q = T_k = 4 for the causal mask
    results += check_layer(minitrans.ScaledDotProductAttention(), Q4, K, V, mask=causal_mask(4),
                           label="Attention (causal)")
    print(format_table(results))

# %% [markdown]
# ## Where each mask is used (§3.2.3)
#
# | attention | queries from | keys, values from | mask |
# | --- | --- | --- | --- |
# | encoder self-attention | source | source | padding of the source, $(B, 1, T_\text{src})$ |
# | decoder self-attention | target | target | `decoder_mask`: causal and padding, $(B, T, T)$ |
# | encoder-decoder (cross) attention | target | encoder output | padding of the source, $(B, 1, T_\text{src})$ |
#
# The paper describes only the causal mask; padding masks are the practical
# side of training on batches of sentences of different lengths.
#
# **The encoder has no causal mask.** Its input, the source sentence, is
# given whole before anything is produced, so every word may use every other,
# in both directions. In *the bank of the river*, *bank* needs *river*, which
# comes after it.
#
# **The decoder needs one, because of teacher forcing.** In training the
# decoder gets the whole target sentence, shifted right by one place behind a
# `<bos>`, and at every position predicts the next token. For the target
# *die Katze schläft*:
#
# | position $t$ | 0 | 1 | 2 | 3 |
# | --- | --- | --- | --- | --- |
# | decoder input | `<bos>` | die | Katze | schläft |
# | target (to predict) | die | Katze | schläft | `<eos>` |
#
# All four predictions are made in one parallel pass. The token that position
# $t$ must predict is sitting in the input at position $t + 1$: without the
# mask, position $t$ could simply attend to it and copy it. Training would
# then teach the model to copy, and at generation time, when the future
# tokens do not exist yet, it would have nothing to copy. The causal mask
# makes training see exactly what generation will see: the tokens before and
# at $t$.
#
# ## Causality, demonstrated
#
# If position $t$ really cannot see the future, changing a later token must
# leave every earlier output *exactly* unchanged. Take self-attention over
# six positions, change the input at position 4, and compare the outputs
# position by position:

# %%
rng = np.random.default_rng(3)
X = rng.standard_normal((6, 8))                 # (T, d): six input vectors
X_changed = X.copy()
X_changed[4] = rng.standard_normal(8)           # a different token at position 4

attention = minitrans.ScaledDotProductAttention()
changes = {}
for label, mask in [("causal mask", causal_mask(6)), ("no mask", None)]:
    before = minitrans.to_numpy(attention.forward(*[minitrans.from_host(X)] * 3, mask=mask))
    after = minitrans.to_numpy(attention.forward(*[minitrans.from_host(X_changed)] * 3, mask=mask))
    changes[label] = np.abs(after - before).max(axis=-1)      # (T,): largest change per position
    print(f"{label:12s} largest change of each output:", changes[label].round(4))
print("causal mask: outputs 0..3 exactly equal:", bool((changes["causal mask"][:4] == 0.0).all()))

# %%
fig, ax = plt.subplots(figsize=(6, 4))
positions = np.arange(6)
ax.bar(positions - 0.2, changes["no mask"], width=0.4, label="no mask")
ax.bar(positions + 0.2, changes["causal mask"], width=0.4, label="causal mask")
ax.axvline(3.5, color="gray", linestyle=":")
ax.set_xlabel("output position (the input at position 4 was changed)")
ax.set_ylabel("largest |change| of the output")
ax.set_title("Changing a later token: who notices?")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# With the causal mask, outputs 0 to 3 are bit-for-bit identical (a change of
# exactly 0.0), and only positions 4 and 5, which are allowed to see position
# 4, change. Without it, every position changes. (Bit for bit here because
# the new token did not change the largest of the 36 scores: minitrans's
# softmax subtracts that one number from all of them, lesson 5, and a token
# that changed it could move earlier outputs by float32 rounding error,
# nothing more.) The projections $W^Q, W^K, W^V$ of a real decoder (next
# lesson) act on each position separately, so they do not break this: the
# whole decoder stack is causal.

# %% [markdown]
# ## Exercise: the decoder's mask
#
# Write `my_decoder_mask(ids, pad_id)` in NumPy: `ids` is $(B, T)$; return the
# boolean $(B, T, T)$ mask of the decoder's self-attention, `True` where query
# $i$ may attend to key $j$: $j \le i$ (the diagonal included) **and** token
# $j$ is not `pad_id`. Padding hides keys only, as `padding_mask` does: a
# padding query keeps the real tokens before it (the loss ignores its output).
# The checker compares exactly, entry by entry, with a mask it builds from the
# two positions of every entry, on sentences without padding, padded ones, a
# sentence of one real token, a batch of one, $T = 1$, and a `pad_id` other
# than 0. The solution is in `solutions/06_masks.py`.

# %%
from minitrans_course.exercises_masks_heads import check_decoder_mask


def my_decoder_mask(ids, pad_id):
    # your code here
    B, T = ids.shape
    return np.zeros((B, T, T), dtype=bool)


check_decoder_mask(my_decoder_mask);

# %% [markdown]
# ## Summary
#
# * A mask is a boolean array, `True` = may attend, that broadcasts to the
#   scores: `causal_mask` $(T, T)$, `padding_mask` $(B, 1, T)$,
#   `decoder_mask` $(B, T, T)$.
# * Masked scores become $-\infty$, so their weights are exactly 0 for any
#   scores and dtype; a finite "large negative" number may leak, and turns a
#   fully masked row into uniform attention over forbidden keys.
# * A fully masked row gives NaN in a plain softmax; minitrans returns a zero
#   output and zero gradients instead.
# * The encoder sees the whole source and uses only a padding mask; the
#   decoder, fed the shifted target by teacher forcing, needs the causal mask
#   so that position $t$ cannot read the token it must predict.
# * With the causal mask, earlier outputs are independent of later inputs:
#   exactly, or up to float32 rounding when a later token moves the shift.
#
# ## Next
#
# [Lesson 7](07_multi_head_attention.ipynb), multi-head attention: several
# attentions side by side, each with its own projections.

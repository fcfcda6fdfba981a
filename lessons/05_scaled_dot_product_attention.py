# %% [markdown]
# # Lesson 5: Scaled dot-product attention
#
# Attention is the one operation the Transformer is named after. Every
# position of a sequence builds its new representation by *looking up* the
# other positions: it asks a question, every position answers with how well
# it matches, and the answers are blended in proportion to the match. This
# lesson takes the paper's formula (§3.2.1) apart.
#
# In this lesson:
#
# 1. queries, keys and values, seen as a search engine;
# 2. $\mathrm{Attention}(Q, K, V) = \mathrm{softmax}(QK^\top/\sqrt{d_k})\,V$,
#    one step at a time, with the shape of every array;
# 3. a hand-built example in which "it" attends to "animal";
# 4. the cost: time grows as $n^2$ with the sequence length, measured;
# 5. the backward and its gradient check;
# 6. how minitrans computes the softmax faster, and why it is still the same;
# 7. an exercise: attention with a mask, written by you.

# %%
import os

# One BLAS thread: the timings in section 4 then measure arithmetic, not how
# the operating system schedules threads on a busy machine. It must be set
# before NumPy is imported.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"

import timeit

import matplotlib.pyplot as plt
import numpy as np

import minitrans
from minitrans.ops.softmax import softmax

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)

print("minitrans", minitrans.__version__, "| backend:", minitrans.core.backend.backend_name(),
      "| dtype:", minitrans.get_dtype())

# %% [markdown]
# **You are here**: scaled dot-product attention is the heart of every
# Multi-Head Attention box; the encoder's self-attention is highlighted, and
# the decoder's two attention boxes compute the same function. The drawing is the
# paper's base model (Table 3), made from its `ModelConfig`.

# %%
from minitrans_course.diagrams import draw_architecture

paper_config = minitrans.ModelConfig.preset("base", vocab_size=37000)
_, ax = plt.subplots(figsize=(9, 10))
draw_architecture(paper_config, highlight="self_attn", ax=ax)
plt.show()

# %% [markdown]
# ## Queries, keys and values: a search engine
#
# Think of typing into a search engine.
#
# * The **query** is what you type: what you are looking for.
# * Each page in the index has a **key**, its title: what it can be found by.
# * Each page also has a **value**, its contents: what you get back.
#
# The engine compares your query with every key, and the better a key matches,
# the more of that page's contents you receive. A Python `dict` does the same
# with an all-or-nothing match: one key equals the query, and you get exactly
# its value. Attention makes the lookup *soft*: the match is a number, the dot
# product $q \cdot k$, and you get a **weighted average of all the values**,
# with weights that are positive and sum to 1.
#
# A tiny index of three pages, with two-dimensional keys. The query points
# in almost the same direction as the key of page 1:

# %%
keys = np.array([[1.0, 0.0],      # page 0
                 [0.0, 1.0],      # page 1
                 [-1.0, 0.0]])    # page 2
values = np.array([[10.0, 0.0, 0.0],
                   [0.0, 10.0, 0.0],
                   [0.0, 0.0, 10.0]])
query = np.array([0.5, 3.0])

scores = keys @ query                     # one match score per page
weights = softmax(scores)                 # positive, sum to 1
print("scores :", scores)
print("weights:", weights.round(3), "sum", weights.sum())
print("result :", (weights @ values).round(2), "(mostly page 1's contents)")

# %% [markdown]
# In a Transformer the queries, keys and values are not typed in by anyone:
# each position's vector $x$ (its embedding of lesson 3 plus the positional
# encoding of lesson 4, or the previous layer's output) is mapped by three
# learned matrices to its query $q = xW^Q$, its key $k = xW^K$ and its value
# $v = xW^V$. The same word can therefore ask one thing (its query), advertise
# another (its key) and hand over a third (its value).
#
# ## The formula, step by step (§3.2.1)
#
# Stack the $T_q$ queries as the rows of $Q$, and the $T_k$ keys and values
# as the rows of $K$ and $V$:
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V$$
#
# | step | array | shape |
# | --- | --- | --- |
# | inputs | $Q$; $K$; $V$ | $(T_q, d_k)$; $(T_k, d_k)$; $(T_k, d_v)$ |
# | 1. every query against every key | $QK^\top$ | $(T_q, T_k)$ |
# | 2. scale | $S = QK^\top / \sqrt{d_k}$ | $(T_q, T_k)$ |
# | 3. softmax over the keys (each row) | $P = \mathrm{softmax}(S)$ | $(T_q, T_k)$, rows sum to 1 |
# | 4. weighted average of the values | $PV$ | $(T_q, d_v)$ |
#
# Row $i$ of the output is $\sum_j P_{ij} v_j$: the values, mixed with the
# weights of query $i$. Queries and keys must have the same length $d_k$ (they
# meet in a dot product); the values may have another, $d_v$; and there may be
# a different number of queries and keys ($T_q \neq T_k$ in cross-attention,
# where the decoder's positions query the encoder's). The division by
# $\sqrt{d_k}$ is lesson 2's: without it the scores of $d_k$-dimensional
# random vectors have variance $d_k$ and the softmax saturates.
#
# With 3 queries, 5 keys, $d_k = 4$ and $d_v = 2$:

# %%
rng = np.random.default_rng(0)
Q = rng.standard_normal((3, 4))   # (T_q, d_k)
K = rng.standard_normal((5, 4))   # (T_k, d_k)
V = rng.standard_normal((5, 2))   # (T_k, d_v)

raw = Q @ K.T                     # (T_q, T_k)
S = raw / np.sqrt(K.shape[-1])    # (T_q, T_k)
P = softmax(S)                    # (T_q, T_k)
out = P @ V                       # (T_q, d_v)
for name, array in [("Q", Q), ("K", K), ("V", V), ("Q K^T", raw), ("S", S), ("P", P), ("P V", out)]:
    print(f"{name:6s} {array.shape}")
print("rows of P sum to", P.sum(axis=-1))

# %% [markdown]
# minitrans's `ScaledDotProductAttention` is exactly these four lines (plus
# the mask of the next lesson). It accepts any leading axes, so one call
# handles a batch of sequences, or, in lesson 7, a batch of sequences times
# several heads: shapes $(\dots, T_q, d_k)$, $(\dots, T_k, d_k)$,
# $(\dots, T_k, d_v)$. It keeps the weights $P$ of its last forward in
# `attention_weights`, for plotting.

# %%
attention = minitrans.ScaledDotProductAttention()
layer_out = attention.forward(minitrans.from_host(Q), minitrans.from_host(K),
                              minitrans.from_host(V))
print("same output as the four lines above:",
      np.allclose(minitrans.to_numpy(layer_out), out, atol=1e-6))
print("same weights:", np.allclose(minitrans.to_numpy(attention.attention_weights), P, atol=1e-6))

batch = minitrans.from_host(rng.standard_normal((2, 3, 7, 4)))   # (B=2, heads=3, T=7, d_k=4)
print("self-attention over leading axes:", attention.forward(batch, batch, batch).shape)

# %% [markdown]
# ## "it" attends to "animal"
#
# Take the sentence *The animal didn't cross the street because it was too
# tired*. What does *it* refer to? A reader knows it is the animal (streets do
# not get tired). Let us build, by hand, a single attention step in which the
# query of *it* matches the key of *animal* best.
#
# Each word gets a made-up 6-dimensional embedding, one feature per property:

# %%
words = ["The", "animal", "didn't", "cross", "the", "street", "because", "it", "was", "too",
         "tired"]
features = ["noun", "animate", "pronoun", "verb", "adjective", "other"]
properties = {
    "animal": ["noun", "animate"], "street": ["noun"], "it": ["pronoun"],
    "didn't": ["verb"], "cross": ["verb"], "was": ["verb"], "tired": ["adjective"],
}
X = np.zeros((len(words), len(features)))            # (T=11, d_model=6)
for t, word in enumerate(words):
    for name in properties.get(word, ["other"]):
        X[t, features.index(name)] = 1.0
print("X:", X.shape)
print("animal:", X[1], "| street:", X[5], "| it:", X[7])

# %% [markdown]
# Now the three projections, with $d_k = 2$:
#
# * $W^K$ gives every word a key with two entries, "I am a noun" and "I am
#   animate": *animal* gets $(1, 1)$, *street* $(1, 0)$, every other word
#   $(0, 0)$.
# * $W^Q$ gives the pronoun the query $(2, 4)$: "I am looking for a noun, and
#   above all an animate one". The adjective *tired* asks $(0, 4)$: "who is
#   animate here?". The other words ask nothing: query $(0, 0)$.
# * $W^V$ is the identity: a word's value is its embedding, so we can read
#   the output feature by feature.
#
# The scores of *it* are then $(2,4)\cdot(1,1) = 6$ for *animal*,
# $(2,4)\cdot(1,0) = 2$ for *street* and 0 for the rest, divided by
# $\sqrt{2}$.

# %%
W_Q = np.zeros((6, 2))
W_Q[features.index("pronoun")] = [2.0, 4.0]      # "it": a noun, above all an animate one
W_Q[features.index("adjective")] = [0.0, 4.0]    # "tired": something animate
W_K = np.zeros((6, 2))
W_K[features.index("noun")] = [1.0, 0.0]         # key entry 0: I am a noun
W_K[features.index("animate")] = [0.0, 1.0]      # key entry 1: I am animate
W_V = np.eye(6)

Q_it = minitrans.from_host(X @ W_Q)    # (11, 2)
K_it = minitrans.from_host(X @ W_K)    # (11, 2)
V_it = minitrans.from_host(X @ W_V)    # (11, 6)
attention = minitrans.ScaledDotProductAttention()
Z = minitrans.to_numpy(attention.forward(Q_it, K_it, V_it))     # (11, 6)
weights_it = minitrans.to_numpy(attention.attention_weights)    # (11, 11)

it = words.index("it")
for j in np.argsort(-weights_it[it])[:3]:
    print(f"it -> {words[j]:8s} {weights_it[it, j]:.3f}")
print("each other word gets", weights_it[it, 0].round(3))

# %% [markdown]
# The heat map shows the whole weight matrix $P$: row $i$ is how query $i$
# spreads its attention over the keys (each row sums to 1).

# %%
fig, ax = plt.subplots(figsize=(6, 5))
image = ax.imshow(weights_it, cmap="viridis", vmin=0.0, vmax=1.0)
ax.set_xticks(range(len(words)), words, rotation=90)
ax.set_yticks(range(len(words)), words)
ax.set_xlabel("key (the word attended to)")
ax.set_ylabel("query (the word attending)")
ax.set_title("Hand-built attention weights P")
fig.colorbar(image, ax=ax, label="attention weight")
fig.tight_layout()
plt.show()

# %% [markdown]
# Three things to read off:
#
# * The row of *it* puts most of its weight on *animal*, some on *street*
#   (a noun, but not animate) and little on each other word.
# * *tired* also leans towards *animal*, the only animate key.
# * Every other row is flat. A query of zeros scores every key 0, and the
#   softmax of equal scores is uniform: $1/11 \approx 0.09$ each. A word with
#   nothing to ask takes an even average.
#
# The output row of *it* is the weighted average of the values, i.e. of the
# embeddings: *it* now carries the features "noun" and "animate" that it did
# not have, borrowed mostly from *animal*.

# %%
print("feature   it before   it after")
for f, name in enumerate(features):
    print(f"{name:9s} {X[it, f]:9.2f} {Z[it, f]:10.2f}")

# %% [markdown]
# A trained model is not given these matrices: it learns $W^Q$, $W^K$ and
# $W^V$ from data. And in a real model *tired* versus *wide* ("it was too
# wide" means the street) must change what *it* asks for, which requires
# context to reach *it* first, through earlier layers. One hand-wired layer
# cannot do that; a stack of learned ones can.
#
# ## The cost grows as $n^2$
#
# Every query meets every key: for a sequence of length $n$, $QK^\top$ is an
# $(n, n)$ matrix, each entry a dot product of length $d$, so it takes about
# $n^2 d$ multiply-adds, and $PV$ as many again. Table 1 of the paper puts
# self-attention at $O(n^2 \cdot d)$ per layer, against $O(n \cdot d^2)$ for a
# recurrent layer: cheaper as long as $n < d$, which is typical for sentences,
# and every position reaches every other in one step rather than $n$.
#
# Measured: time the forward for $n$ from 64 to 2048 at fixed $d = 64$ (the
# best of a few runs, to filter out interruptions). On log-log axes a power
# law $t \propto n^2$ is a straight line of slope 2.

# %%
d = 64
lengths = [64, 128, 256, 512, 1024, 2048]
seconds = []
attention = minitrans.ScaledDotProductAttention()
rng = np.random.default_rng(1)
for n in lengths:
    Qn, Kn, Vn = (minitrans.from_host(rng.standard_normal((n, d))) for _ in range(3))
    repeats = max(5, 2_000_000 // n**2)            # more repeats for the fast small cases
    best = min(timeit.repeat(lambda: attention.forward(Qn, Kn, Vn), number=1, repeat=repeats))
    seconds.append(best)
    print(f"n = {n:5d}: {best * 1e3:8.3f} ms")

slope = np.polyfit(np.log(lengths[-3:]), np.log(seconds[-3:]), 1)[0]
print(f"slope of log(time) against log(n), n = 512..2048: {slope:.2f}")

# %%
fig, ax = plt.subplots(figsize=(6, 4))
ax.loglog(lengths, np.array(seconds) * 1e3, "o-", label="measured, d = 64")
reference = np.array(seconds[-1]) * 1e3 * (np.array(lengths) / lengths[-1]) ** 2
ax.loglog(lengths, reference, "--", color="gray", label="slope 2: time $\\propto n^2$")
ax.set_xlabel("sequence length n")
ax.set_ylabel("forward time (ms)")
ax.set_title("Attention time grows as $n^2$")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# For long sequences the points run roughly parallel to the slope-2 line:
# doubling $n$ multiplies the time by about four. The fitted slope printed
# above comes out near 2, not exactly 2: timings on a shared machine are
# noisy, and once the $(n, n)$ arrays outgrow the processor's caches each
# element costs a little more, which pushes it up. For short sequences the
# curve is flatter, because a fixed cost per call (Python, allocating arrays)
# outweighs the arithmetic. Memory grows the same way: at $n = 2048$ the
# weights $P$ alone are $2048^2$ float32 numbers, 16 MB, for one head of one
# sentence. This quadratic cost is why so much later work tries to make
# attention cheaper for long inputs.
#
# ## Backward
#
# With $S$ the scaled scores, $P = \mathrm{softmax}(S)$ and the upstream
# gradient $\frac{\partial L}{\partial \mathrm{out}}$ of shape $(T_q, d_v)$,
# the backward runs the four steps in reverse:
#
# $$\frac{\partial L}{\partial V} = P^\top \frac{\partial L}{\partial \mathrm{out}}, \qquad
# \frac{\partial L}{\partial P} = \frac{\partial L}{\partial \mathrm{out}}\, V^\top,$$
#
# $$\frac{\partial L}{\partial S} = P \odot \left(\frac{\partial L}{\partial P}
# - \mathrm{rowsum}\!\left(\frac{\partial L}{\partial P} \odot P\right)\right), \qquad
# \frac{\partial L}{\partial Q} = \frac{\partial L}{\partial S} \frac{K}{\sqrt{d_k}}, \qquad
# \frac{\partial L}{\partial K}
# = \left(\frac{\partial L}{\partial S}\right)^{\!\top} \frac{Q}{\sqrt{d_k}}.$$
#
# The third is the softmax backward of lesson 2, row by row. Shapes:
# $(T_k, T_q)(T_q, d_v) = (T_k, d_v)$ like $V$; $(T_q, d_v)(d_v, T_k) =
# (T_q, T_k)$ like $P$; $(T_q, T_k)(T_k, d_k) = (T_q, d_k)$ like $Q$;
# $(T_k, T_q)(T_q, d_k) = (T_k, d_k)$ like $K$. `backward(dout)` returns the
# tuple `(dQ, dK, dV)`. The layer has no parameters, so the check covers its
# three inputs, here with a batch and a head axis, $T_q = 3$, $T_k = 5$:

# %%
from minitrans.gradcheck import check_layer, format_table

with minitrans.using(dtype="float64"):
    rng = np.random.default_rng(0)
    Q64 = minitrans.from_host(rng.standard_normal((2, 2, 3, 4)))   # (B, h, T_q, d_k)
    K64 = minitrans.from_host(rng.standard_normal((2, 2, 5, 4)))   # (B, h, T_k, d_k)
    V64 = minitrans.from_host(rng.standard_normal((2, 2, 5, 3)))   # (B, h, T_k, d_v)
    print(format_table(check_layer(minitrans.ScaledDotProductAttention(), Q64, K64, V64)))

# %% [markdown]
# ## The same softmax, a cheaper shift
#
# Lesson 2 subtracted each row's maximum before `exp`. Any number would do:
# $\mathrm{softmax}(z - c) = \mathrm{softmax}(z)$ for every constant $c$ of a
# row. The maximum is the textbook choice because it is always safe: the
# largest exponent is $e^0 = 1$, so nothing overflows, and the row sum is at
# least 1, so nothing divides by zero.
#
# It has a cost that has nothing to do with arithmetic. A training step of
# the base configuration of `benchmarks/` has scores of shape
# $(B, h, T_q, T_k) = (32, 8, 64, 64)$, and NumPy takes the maximum along a
# short last axis one row at a time: 16,384 rows of 64 numbers.

# %%
scores_demo = np.random.default_rng(1).standard_normal((32, 8, 64, 64)).astype(np.float32)


def best_time(function, repeats=20):
    """The fastest of ``repeats`` runs, in milliseconds."""
    return min(timeit.repeat(function, number=1, repeat=repeats)) * 1000


print(f"max of each row (16,384 rows):       {best_time(lambda: scores_demo.max(axis=-1)):.2f} ms")
print("max of each head (256 (64, 64) blocks): "
      f"{best_time(lambda: scores_demo.max(axis=(-2, -1))):.2f} ms")
print(f"exp of every score:                   {best_time(lambda: np.exp(scores_demo)):.2f} ms")

# %% [markdown]
# So `ScaledDotProductAttention` calls `attention_softmax(scores, mask)`
# from `minitrans/ops/softmax.py`, a *kernel pair*: its reference version is
# `masked_softmax` (`softmax` without a mask), which reads as the equation,
# and its fast version, `softmax_in_place`, which runs by default, subtracts
# **one** number per head of each
# sentence, the largest score of that $(T_q, T_k)$ block, and writes the
# result into the array of scores instead of a new one. Is one shift for a
# whole block safe? Nothing overflows (it is the block's largest score). The
# danger is the other side: a row whose own scores all lie more than about
# 104 below the block's maximum gets exponents that float32 rounds to 0, and
# the row becomes $0/0$. Every row's maximum is at least the block's
# minimum, so if $\max - \min \le 60$ in every block, no row is more than 60
# below its shift, and $e^{-60} \approx 10^{-26}$ is far from float32's
# smallest number. When some block spreads wider, `softmax_in_place` falls
# back to each row's own maximum.
#
# Both halves, checked: on ordinary scores the fast version agrees with the
# clear one to float32 rounding; a block with one row 1000 below the other
# breaks a blind shared shift, and `softmax_in_place` sees it.

# %%
from minitrans.ops.softmax import softmax_in_place

fast = softmax_in_place(scores_demo.copy())
print("ordinary scores, largest difference from softmax():",
      float(np.abs(fast - softmax(scores_demo)).max()))

far_apart = np.array([[0.0, 1.0, 2.0], [-1000.0, -999.0, -998.0]], dtype=np.float32)
with np.errstate(invalid="ignore"):
    blind = np.exp(far_apart - far_apart.max())
    print("one shift for the block, blindly:\n", blind / blind.sum(axis=-1, keepdims=True))
print("softmax_in_place (spread 1002 > 60, so each row's own max):\n",
      softmax_in_place(far_apart.copy()))

# %% [markdown]
# The blind shift turns the second row into $0/0$ = NaN; `softmax_in_place`
# gives both rows the same weights, as it should, since they differ by a
# constant. The fast version is what minitrans trains with by default;
# `softmax` and `masked_softmax` stay the reference versions, and
# `tests/library/test_kernels.py` and `tests/library/test_attention.py` check
# that they agree, with masks, fully masked rows, both shifts and NaN. This
# course runs the reference versions (`minitrans.use(kernels="reference")`
# at the top of every lesson, lesson 1), so the attention layers of these
# lessons call `masked_softmax`; `python benchmarks/kernels.py` times each
# fast version against its reference.
#
# ## Exercise: attention with a mask
#
# Write `my_attention(Q, K, V, mask)` in NumPy:
#
# * `Q` is $(B, T_q, d_k)$, `K` is $(B, T_k, d_k)$, `V` is $(B, T_k, d_v)$;
#   return the $(B, T_q, d_v)$ output.
# * `mask` is a boolean array that broadcasts to the scores $(B, T_q, T_k)$,
#   `True` where a query may attend. The checker tries padding masks
#   $(B, 1, T_k)$, a causal mask, a batch of one, large scores, float32, and a
#   query whose every key is masked, which must get a zero output. Masked
#   keys must get a weight of exactly 0: replace their scores by $-\infty$
#   before the softmax (`np.where(mask, scores, -np.inf)`), and give a row
#   with no finite score zero weights instead of NaN. Lesson 6 explains why
#   $-\infty$ (a fill of $-10^9$ fails the fully masked case).
# * Subtract each row's maximum before `np.exp`, as in lesson 2.
#
# The skeleton returns zeros of the right shape, so the checker runs and says
# "not yet". The solution is in `solutions/05_scaled_dot_product_attention.py`.

# %%
from minitrans_course.exercises import check_attention


def my_attention(Q, K, V, mask):
    # your code here
    return np.zeros(Q.shape[:-1] + V.shape[-1:])


check_attention(my_attention);

# %% [markdown]
# ## Summary
#
# * A query is compared with every key by a dot product; the softmax of the
#   scaled scores gives weights that sum to 1; the output is the weighted
#   average of the values. A soft dictionary lookup.
# * Shapes: $Q$ $(T_q, d_k)$, $K$ $(T_k, d_k)$, $V$ $(T_k, d_v)$, weights
#   $(T_q, T_k)$, output $(T_q, d_v)$, with any leading batch and head axes.
# * What a query "looks for" is set by $W^Q$ and $W^K$: hand-made, they make
#   *it* attend to *animal*; trained, they learn such patterns from data.
# * The cost is $O(n^2 d)$ in time and $O(n^2)$ in memory: doubling the
#   sequence quadruples both.
# * The backward is two matrix products, the softmax backward, and two more
#   matrix products; the gradient check confirms it.
# * Softmax may subtract any constant per row. minitrans subtracts one per
#   head of a sentence when the scores' spread allows it, because NumPy's
#   maximum of each short row costs more than the exponentials.
#
# ## Next
#
# [Lesson 6](06_masks.ipynb), masks: how the decoder is kept from reading the
# future, and how padding is ignored.

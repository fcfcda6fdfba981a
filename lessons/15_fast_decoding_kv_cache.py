# %% [markdown]
# # Lesson 15: Fast decoding with the key/value cache
#
# Training sees the whole target at once: one forward pass computes every
# position in parallel, and the causal mask keeps each position from looking
# ahead (§3.2.3). Generating is different. The decoder is *auto-regressive*
# (§3.1): token $t$ is chosen from the logits after tokens $0 \dots t-1$, and
# only then can token $t + 1$ be computed. So generation is a loop of
# $L$ steps, one token each.
#
# The obvious loop feeds the whole prefix back into the model at every step.
# It works, but it recomputes, at step $t$, the keys and values of $t$
# positions that have not changed since the step before. This lesson:
#
# 1. shows why they cannot change (the causal mask);
# 2. opens minitrans's key/value cache: `KVCache`, `model.start` and
#    `model.step`, and the cross-attention keys and values computed once per
#    source sentence;
# 3. checks that cached decoding gives the same tokens and the same logits as
#    recomputing, to float64 precision;
# 4. times both as the output grows;
# 5. works out how much memory the cache costs for the paper's base model;
# 6. ends with an exercise: one decoding step with a cache, written yourself.

# %% [markdown]
# As in lesson 14 we ask NumPy's BLAS for a single thread before NumPy loads:
# on a small CPU shared with other programs, timings with two threads are
# slower and jump around.

# %%
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one BLAS thread; set before NumPy loads

import time

import matplotlib.pyplot as plt
import numpy as np

import minitrans
from minitrans import decoding
from minitrans.model.kvcache import KVCache

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)

# %% [markdown]
# ## A model to decode with
#
# Caching is arithmetic, not learning, so an untrained model will do: its
# outputs are random tokens, but the question is only whether two ways of
# computing them agree, and how long each takes. A small encoder-decoder
# with the toy tasks' sizes, and a batch of random source sentences
# $(B, T_\text{src})$:

# %%
config = minitrans.ModelConfig(vocab_size=20, d_model=64, h=4, N=2, d_ff=256, dropout=0.0,
                               max_len=80)
model = minitrans.Transformer(config, rng=0).eval()
rng = np.random.default_rng(0)
# ids 4.. avoid the specials
src = minitrans.to_device(rng.integers(4, config.vocab_size, size=(32, 10)))
print(f"{model.num_parameters():,} parameters; src {src.shape} (B, T_src)")

# %% [markdown]
# ## Why the past does not change
#
# Let the prefix be $y_0 \dots y_{t-1}$ ($y_0 = \langle\text{bos}\rangle$).
# In the first decoder layer, position $i$ attends only to positions
# $\le i$ (the causal mask), so its output depends on $y_0 \dots y_i$ and
# nothing later. The next layer sees only those outputs, at positions
# $\le i$ again, and so on up the stack: **the activations of position $i$,
# in every layer, are fixed once $y_i$ is known.** Appending $y_t$ adds a new
# position; it changes nothing at the old ones. In particular the keys and
# values of the old positions,
#
# $$K_{\le t-1} = X_{\le t-1} W^K, \qquad V_{\le t-1} = X_{\le t-1} W^V,$$
#
# are the same at step $t$ as at step $t - 1$. Let us see it: run the model,
# in float64, on a prefix of 5 tokens and on the same prefix with a sixth
# appended, and compare the logits of the first 5 positions.

# %%
with minitrans.using(dtype="float64"):
    model64 = minitrans.Transformer(config, rng=0).eval()  # the same weights, in float64
    prefix = minitrans.to_device(np.concatenate([np.ones((32, 1), dtype=np.int64),  # <bos>
                                                 rng.integers(4, 20, size=(32, 5))], axis=1))
    short = minitrans.to_numpy(model64.forward(src, prefix[:, :5]))  # (B, 5, V)
    longer = minitrans.to_numpy(model64.forward(src, prefix))  # (B, 6, V)
print("logits of 5 tokens:", short.shape, "| of 6 tokens:", longer.shape)
print("largest change at the first 5 positions:", np.abs(longer[:, :5] - short).max())

# %% [markdown]
# The first five positions are the same, bit for bit: the reference
# softmax this course runs shifts each row of scores by its own largest
# score (lesson 5), which a later position, masked out of that row, cannot
# change. (minitrans's fast softmax shifts a head's scores by their largest
# one, which the sixth position can change, and a different shift rounds
# differently in the last bits: there the two agree to float64 rounding,
# about $10^{-15}$.) So recomputing them is wasted work. Without a cache, step $t$ of
# every decoder layer
#
# * projects all $t$ positions to queries, keys and values, and runs the
#   feed-forward network on all $t$: $O(t \cdot d_\text{model}^2)$ operations,
#   of which only the last row is new;
# * computes $t \times t$ attention scores, $O(t^2 d_\text{model})$, of
#   which only the last row is needed.
#
# With a cache, step $t$ projects only the new position, $O(d_\text{model}^2)$,
# and computes one row of $t$ scores, $O(t \cdot d_\text{model})$. Over $L$
# steps the decoder then processes $L$ positions instead of $1 + 2 + \dots + L
# = L(L + 1)/2$.
#
# ## The cache
#
# `minitrans.model.kvcache.KVCache` holds the keys and values of one attention
# layer: two buffers $(B, h, \text{max\_len}, d_k)$, allocated once, and a
# `length`. `append(K_new, V_new)` copies the new positions into place and
# `keys`, `values` are the filled part, $(B, h, \text{length}, d_k)$:

# %%
cache = KVCache(batch=2, h=4, d_k=16, max_len=8, dtype="float32")
print("buffers:", cache.K.shape, "| length", cache.length)
for step in range(3):
    # one new position, (B, h, 1, d_k)
    K_new = minitrans.from_host(rng.standard_normal((2, 4, 1, 16)))
    cache.append(K_new, K_new)
    print(f"after append {step + 1}: keys {cache.keys.shape}, values {cache.values.shape}")

# %% [markdown]
# `model.start(src)` begins decoding a batch. It runs the **encoder once**,
# and computes once, for each decoder layer, the keys and values that the
# cross-attention will read: they come from the encoder output, which never
# changes while we decode, so they are the same at every step. It returns a
# `DecodingState` with
#
# * `caches`: one empty `KVCache` per decoder layer, for self-attention;
# * `memory_kvs`: per layer, the cross-attention $(K, V)$, each
#   $(B, h, T_\text{src}, d_k)$;
# * `memory_mask`: the source padding mask $(B, 1, T_\text{src})$;
# * `position`: how many target tokens have been fed.

# %%
state = model.start(src)
print(len(state.caches), "self-attention caches, buffers", state.caches[0].K.shape,
      "(B, h, max_len, d_k)")
print(len(state.memory_kvs), "cross-attention (K, V) pairs, K", state.memory_kvs[0][0].shape,
      "(B, h, T_src, d_k)")
print("memory_mask", state.memory_mask.shape, "| position", state.position)

# %% [markdown]
# `model.step(state, tokens)` feeds one token per row, `tokens` $(B,)$, and
# returns the logits of the next one, $(B, V)$. Inside, for the new position
# only: embed it at position `state.position` (its positional encoding);
# in each decoder layer project it to $q, k, v$, append $k, v$ to the
# layer's cache, attend with $q$ over all cached keys and values, then
# cross-attend over the precomputed `memory_kvs`, then the feed-forward
# network; finally the output projection. Three steps of greedy decoding by
# hand:

# %%
tokens = minitrans.to_device(np.full(32, 1))  # <bos> for every row
for step in range(3):
    logits = model.step(state, tokens)  # (B, V)
    tokens = logits.argmax(axis=-1)  # greedy: the most probable next token
    print(f"step {step + 1}: logits {logits.shape}, cache length {state.caches[0].length}, "
          f"layer-0 keys {state.caches[0].keys.shape}, position {state.position}")

# %% [markdown]
# (`decoding.greedy` is this loop, plus stopping at `<eos>` and never
# choosing `<pad>`.)
#
# ## Same tokens, same logits
#
# A cache is only an optimisation if it changes nothing. `decoding.greedy`
# decodes either way: `use_cache=True` is the loop above;
# `use_cache=False` calls `model.prefix_logits(src, prefix)` every step,
# which runs the whole model, encoder included, on the source and the
# entire prefix and keeps the last position's logits. With
# `return_logits=True` both also return the logits of every step,
# $(B, L, V)$. In float64 they should agree to rounding error:

# %%
with minitrans.using(dtype="float64"):
    cached_tokens, cached_logits = decoding.greedy(model64, src, 30, use_cache=True,
                                                   return_logits=True)
    full_tokens, full_logits = decoding.greedy(model64, src, 30, use_cache=False,
                                               return_logits=True)
print("tokens:", cached_tokens.shape, "| logits:", cached_logits.shape, cached_logits.dtype)
print("identical tokens:", bool((cached_tokens == full_tokens).all()))
print(f"largest |difference| of the logits: {float(abs(cached_logits - full_logits).max()):.1e}")

# %% [markdown]
# The same tokens at all $32 \times 30$ places, and logits equal to about
# $10^{-15}$: the two paths add the same numbers in a different order, so the
# last bits can differ, nothing more. (The test suite checks the same for
# the decoder-only model of lesson 16, and that the scores of beam search,
# whose caches are reordered after every step, equal the log-probabilities
# recomputed without a cache.)
#
# ## How much faster?
#
# Now the timing, back in float32: batch 32, outputs of 8, 16, 32 and 64
# tokens, each way, the best of two runs. An untrained model rarely emits
# `<eos>`, so every run decodes the full length (the printed shapes check
# it).

# %%
lengths = [8, 16, 32, 64]
timings = {True: [], False: []}
decoding.greedy(model, src, 4)  # warm up once
for length in lengths:
    for use_cache in (True, False):
        best = float("inf")
        for _ in range(2):
            start = time.perf_counter()
            out = decoding.greedy(model, src, length, use_cache=use_cache)
            best = min(best, time.perf_counter() - start)
        timings[use_cache].append(best)
    print(f"L = {length:2d}: output {out.shape}, cached {timings[True][-1]:.3f} s, "
          f"recomputing {timings[False][-1]:.3f} s, ratio "
          f"{timings[False][-1] / timings[True][-1]:.1f}x")

# %%
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(lengths, timings[False], "o-", label="recompute the prefix (use_cache=False)")
ax.plot(lengths, timings[True], "o-", label="key/value cache (use_cache=True)")
ax.set_title("Greedy decoding, batch 32, d_model 64, N = 2")
ax.set_xlabel("output length L (tokens)")
ax.set_ylabel("time (s)")
ax.set_xticks(lengths)
ax.legend()
plt.show()

# %% [markdown]
# The cached curve is close to a straight line: every step costs about the
# same. The recomputing curve bends upwards, because step $t$ redoes $t$
# positions, and the gap widens with every doubling of $L$. At these small
# sizes the per-step overhead of Python and of launching many small matrix
# products is a large part of the cached cost, so the ratio is smaller than
# the $(L + 1)/2$ that counting decoded positions predicts (32.5 for
# $L = 64$).
#
# ## The price: memory
#
# The cache trades memory for time. Each decoder layer keeps, for each
# sequence of the batch and each position decoded so far, a key and a value
# of $h \cdot d_k = d_\text{model}$ numbers each. For $N$ layers, batch $B$
# and $T$ positions that is
#
# $$2 \cdot N \cdot B \cdot T \cdot d_\text{model} \text{ numbers},$$
#
# plus the same again with $T_\text{src}$ for the cross-attention keys and
# values of the source. minitrans allocates each buffer at its full
# `max_len` up front (appending is then a copy, never a reallocation), so
# $T$ is `config.max_len` here. Check the formula against the state we
# built above:

# %%
N, B, d_model = config.N, src.shape[0], config.d_model
measured = sum(c.K.nbytes + c.V.nbytes for c in state.caches)
formula = 2 * N * B * config.max_len * d_model * 4  # float32: 4 bytes a number
print(f"self-attention caches: {measured:,} bytes; 2 N B max_len d_model x 4 bytes = {formula:,}")
measured_memory = sum(K.nbytes + V.nbytes for K, V in state.memory_kvs)
print(f"cross-attention K, V:  {measured_memory:,} bytes; 2 N B T_src d_model x 4 bytes = "
      f"{2 * N * B * src.shape[1] * d_model * 4:,}")

# %% [markdown]
# For the paper's base model, $N = 6$ and $d_\text{model} = 512$ (Table 3),
# one position of one sequence costs $2 \cdot 6 \cdot 512 = 6{,}144$ numbers,
# 24 KiB in float32. How that grows with the batch and the length:

# %%
# only the sizes; no weights are built
base = minitrans.ModelConfig.preset("base", vocab_size=37000)
per_position = 2 * base.N * base.d_model
print(f"base model: N={base.N}, d_model={base.d_model}: {per_position:,} numbers, "
      f"{per_position * 4 / 1024:.0f} KiB per position (float32)")
for batch, length in [(1, 100), (32, 100), (32, 512), (128, 512)]:
    numbers = per_position * batch * length
    print(f"  B = {batch:3d}, T = {length:3d}: {numbers:>12,} numbers = "
          f"{numbers * 4 / 2**20:7.1f} MiB")
print("the weights themselves: about 63 million numbers, 240 MiB (lesson 12)")

# %% [markdown]
# A batch of 32 sentences of 512 tokens needs 384 MiB of self-attention cache,
# more than the model's own weights. For today's large decoder-only models
# (lesson 16), with dozens of layers, $d_\text{model}$ in the thousands and
# prompts of many thousands of tokens, the cache is often the largest thing
# in the GPU's memory, which is why later models shrink it, for instance by
# letting several query heads share one key/value head (multi-query
# attention, Shazeer 2019). The cache is worth its memory for any
# auto-regressive Transformer: without it, generating $L$ tokens costs
# $O(L^2)$ position computations instead of $O(L)$.

# %% [markdown]
# ## Exercise: one step with a cache
#
# Write `my_cache_step(K_cache, V_cache, q, k, v)` for one attention head:
# `K_cache` $(B, t, d_k)$ and `V_cache` $(B, t, d_v)$ hold the $t$ positions
# decoded so far ($t$ may be 0), and `q`, `k` $(B, 1, d_k)$, `v` $(B, 1, d_v)$
# are the new position's. Return `(out, K, V)`: the cache with the new
# position appended at the end, $(B, t + 1, \cdot)$, and the new position's
# attention output $(B, 1, d_v)$ over all $t + 1$ positions, itself
# included. The checker draws whole sequences, recomputes causal attention
# over all of them query by query, and compares your output with its last
# row; its cases include an empty cache, a batch of one, float32 and a score
# of 1000.

# %%
from minitrans_course.exercises_decoding import check_kv_cache_step


def my_cache_step(K_cache, V_cache, q, k, v):
    # your code here
    return np.zeros(q.shape[:2] + v.shape[-1:]), K_cache, V_cache


# %%
check_kv_cache_step(my_cache_step);

# %% [markdown]
# ## Summary
#
# * Because of the causal mask, the activations, keys and values of a
#   decoded position never change when later tokens are appended.
# * Without a cache, step $t$ recomputes all $t$ positions; with one, it
#   projects only the new token, appends its key and value, and attends over
#   the cached ones. The encoder output and the cross-attention keys and
#   values are computed once per source sentence (`model.start`).
# * Cached and recomputed decoding give the same tokens and logits equal to
#   about $10^{-15}$ in float64.
# * Time: the cached loop grows about linearly with the output length, the
#   recomputing one faster.
# * Memory: $2 \cdot N \cdot B \cdot T \cdot d_\text{model}$ numbers, 24 KiB
#   per position for the base model; for long sequences and large batches
#   it can exceed the weights.
#
# ## Next
#
# [Lesson 16](16_decoder_only_language_models.ipynb), decoder-only language
# models: the same parts, without the encoder.

# %% [markdown]
# # Lesson 12: The whole model
#
# The previous lessons built every box of the paper's Figure 1 and checked
# its gradient. Now we put them together into `minitrans.Transformer`, feed
# it a batch the way training does, and check the gradient of the whole
# thing, loss included.
#
# In this lesson:
#
# 1. Figure 1 assembled from a `ModelConfig`: the parts, their parameter
#    names and counts, and the paper's base model (about 65M parameters);
# 2. teacher forcing: the target shifted right, with `<bos>`, `<eos>` and `<pad>`;
# 3. the masks the model builds for itself;
# 4. training computes every position in one pass, inference one token per
#    step: the same logits, at very different costs;
# 5. a gradient check of the whole model with its loss;
# 6. the decoder-only sibling, `DecoderOnlyLM`;
# 7. an exercise: the shifted decoder input and target, written by you.

# %%
import collections
import time

import matplotlib.pyplot as plt
import numpy as np

import minitrans
from minitrans.data import BOS_ID, EOS_ID, PAD_ID, UNK_ID, make_seq2seq_batch
from minitrans.data.tasks import load_task
from minitrans.gradcheck import check_layer, format_table
from minitrans.gradcheck import tiny_model

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)

# %% [markdown]
# ## 1. Figure 1, assembled
#
# A model is described by a frozen `ModelConfig` with the paper's names
# (Table 3): $d_\text{model}$, $h$ heads, $N$ layers per stack, $d_{ff}$ and
# the dropout rate $P_{drop}$. `Transformer(config)` builds:
#
# | Figure 1 | attribute | maps |
# | --- | --- | --- |
# | input embedding + positional encoding (§3.4, §3.5) | `src_embed` | source ids $(B, S) \to (B, S, d_\text{model})$ |
# | encoder, $N$ layers of self-attention + FFN (§3.1) | `encoder` | $(B, S, d_\text{model}) \to$ memory $(B, S, d_\text{model})$ |
# | output embedding + positional encoding | `tgt_embed` | shifted target ids $(B, T) \to (B, T, d_\text{model})$ |
# | decoder, $N$ layers of masked self-attention + cross-attention + FFN | `decoder` | $(B, T, d_\text{model})$ and memory $\to (B, T, d_\text{model})$ |
# | "Linear" before the softmax (§3.4) | `output_projection` | $(B, T, d_\text{model}) \to$ logits $(B, T, V)$ |
#
# The final softmax of Figure 1 lives in the loss (`LabelSmoothedCrossEntropy`
# computes log-softmax and cross-entropy together) and in decoding.
#
# We build a small model for the toy translation task that ships with
# minitrans: English into a made-up language with subject-object-verb order.

# %%
task = load_task("translate", seed=0, num_train=200, num_valid=10)
vocab = task.vocab
config = minitrans.ModelConfig.preset("toy", vocab_size=len(vocab), max_len=64)
model = minitrans.Transformer(config, rng=0)
print(config)
print(f"\n{model.num_parameters():,} parameters")

# %% [markdown]
# Drawn from the config itself, with its sizes: `draw_architecture(config)`
# returns a matplotlib Figure, or draws into the axes `ax` it is given (here
# pyplot's, which the notebook shows); `highlight=` greys all but the named
# parts, as at the top of lessons 3 to 10.

# %%
from minitrans_course.diagrams import draw_architecture

_, ax = plt.subplots(figsize=(9, 10))
draw_architecture(config, ax=ax)
plt.show()

# %% [markdown]
# Every parameter has a qualified name: the path of attributes from the model
# down to the layer, then the name of the array. The attributes are named
# after the paper: `self_attn`, `cross_attn` and `feed_forward` are the
# sub-layers themselves, and `self_attn_norm`, `cross_attn_norm`,
# `feed_forward_norm` the Add & Norm blocks beside them. Every projection is
# a `Linear` layer named after its weight in the paper, holding `W` and `b`:
# `decoder.layers.0.self_attn.W_Q.W` is $W^Q$ of the first decoder layer's
# self-attention, `decoder.layers.0.feed_forward.W_1.b` is $b_1$ of its
# feed-forward network, and `decoder.layers.0.cross_attn_norm.layer_norm.gamma`
# the gain of the layer norm after its cross-attention. These names are the
# keys of the optimiser's state and of checkpoints. The first decoder layer:

# %%
for name, value, _ in model.named_parameters():
    if name.startswith("decoder.layers.0."):
        print(f"{name:48s} {str(tuple(value.shape)):12s} {value.size:7,}")

# %% [markdown]
# Per part of Figure 1, and per sub-layer:

# %%
def count_by(model, depth):
    """Parameter counts grouped by the first `depth` components of their names."""
    counts = collections.Counter()
    for name, value, _ in model.named_parameters():
        counts[".".join(name.split(".")[:depth])] += int(value.size)
    return counts

for part, count in count_by(model, 1).items():
    print(f"{part:10s} {count:9,}")
print()
for part, count in count_by(model, 4).items():
    if ".layers.0." in part + ".":
        print(f"{part:36s} {count:7,}")

# %% [markdown]
# A decoder layer has one more attention block than an encoder layer (the
# cross-attention, with its own Add & Norm), so it is about a third larger.
#
# **Counting by formula.** With $d = d_\text{model}$ and vocabulary $V$:
#
# * multi-head attention: $W_Q, W_K, W_V, W_O$ of $d \times d$ and biases
#   $b_Q, b_V, b_O$ (`W_Q.W`, `W_Q.b`, ...; minitrans leaves out the key
#   bias, which softmax would ignore): $4d^2 + 3d$;
# * feed-forward: $2\,d\,d_{ff} + d_{ff} + d$; layer norm: $2d$;
# * encoder layer: attention + FFN + 2 norms; decoder layer: 2 attentions +
#   FFN + 3 norms;
# * embeddings $V d$ each, the output projection $dV + V$. With
#   `tie_embeddings=True` (§3.4: "we share the same weight matrix between the
#   two embedding layers and the pre-softmax linear transformation") one
#   $V \times d$ matrix serves all three and only the projection's bias $V$
#   is extra. The positional encodings are fixed, not parameters.

# %%
def count_parameters(c):
    """The number of parameters of Transformer(c), by formula."""
    d = c.d_model
    attention, ffn, norm = 4 * d * d + 3 * d, 2 * d * c.d_ff + c.d_ff + d, 2 * d
    encoder = c.N * (attention + ffn + 2 * norm) + (norm if c.pre_norm else 0)
    decoder = c.N * (2 * attention + ffn + 3 * norm) + (norm if c.pre_norm else 0)
    if c.tie_embeddings:
        embeddings = c.vocab_size * d + c.vocab_size
    else:
        embeddings = c.source_vocab_size * d + c.vocab_size * d + d * c.vocab_size + c.vocab_size
    return encoder + decoder + embeddings

for options in [{}, {"tie_embeddings": True}, {"pre_norm": True}]:
    small = minitrans.ModelConfig.preset("toy", vocab_size=len(vocab), **options)
    print(f"toy {options}: formula {count_parameters(small):,}, "
          f"built model {minitrans.Transformer(small, rng=0).num_parameters():,}")

# %% [markdown]
# The formula agrees with the built models. Now the paper's base model:
# $N = 6$, $d_\text{model} = 512$, $h = 8$, $d_{ff} = 2048$, and a shared
# source-target vocabulary of "about 37000 tokens" (§5.1). Table 3 lists it at
# $65 \times 10^6$ parameters.

# %%
# the preset shares, as the paper does
base_tied = minitrans.ModelConfig.preset("base", vocab_size=37000)
base = minitrans.ModelConfig.preset("base", vocab_size=37000, tie_embeddings=False)
print(f"base, three separate V x d matrices: {count_parameters(base):>11,}")
print(f"base, one shared matrix (paper §3.4): {count_parameters(base_tied):>11,}")

start = time.perf_counter()
big_model = minitrans.Transformer(base_tied, rng=0)        # about 250 MB of float32
print(f"built in {time.perf_counter() - start:.1f} s: {big_model.num_parameters():,} parameters")
for part, count in count_by(big_model, 1).items():
    print(f"  {part:10s} {count:11,}")
del big_model

# %% [markdown]
# (`tgt_embed` is missing from the list because it owns nothing: it reads
# `src_embed`'s table, and the output projection owns only its bias.)
# With the weight sharing of §3.4 we get 63.1M, about 3% below the paper's 65M
# (the paper gives its vocabulary only as "about 37000", and does not list
# its count in more detail). Without sharing, the three $37000 \times 512$
# matrices alone would hold 57M parameters and the model 101M. Note where the
# parameters are: almost a third of the tied model is the embedding table.
#
# ## 2. Teacher forcing and the shifted target
#
# Every vocabulary begins with four special tokens:

# %%
for token_id in (PAD_ID, BOS_ID, EOS_ID, UNK_ID):
    print(token_id, vocab.tokens[token_id])

# %% [markdown]
# * `<pad>` fills short sequences up to the batch's longest; masks keep
#   attention and the loss away from it (id 0, which the masks assume).
# * `<bos>` ("beginning of sequence") is what the decoder reads at the first
#   position, when no target word exists yet.
# * `<eos>` ("end of sequence") is the last word the decoder must produce:
#   at inference, generating it is how the model says it is done.
# * `<unk>` stands for a word the vocabulary does not know.
#
# The decoder predicts the target one position ahead. In training we do not
# feed it its own guesses but the **true** target, shifted one place to the
# right behind `<bos>` (teacher forcing). For a target $y_1 y_2 y_3$:
#
# | position $t$ | 0 | 1 | 2 | 3 |
# | --- | --- | --- | --- | --- |
# | decoder input `tgt_in` | `<bos>` | $y_1$ | $y_2$ | $y_3$ |
# | expected output `tgt_out` | $y_1$ | $y_2$ | $y_3$ | `<eos>` |
#
# The output at position $t$ has seen `tgt_in[0..t]`, that is `<bos>` and
# $y_1 \dots y_t$, and must predict $y_{t+1}$. `make_seq2seq_batch` builds
# exactly this from (source ids, target ids) pairs. Two pairs of different
# lengths:

# %%
by_length = sorted(task.train[:40], key=lambda pair: (len(pair[0].split()), pair))
pairs = [by_length[-1], by_length[0]]                      # a long sentence and a short one
encoded = [task.encode_pair(source, target) for source, target in pairs]
batch = make_seq2seq_batch(encoded)
print("src    ", batch.src.shape, "  tgt_in", batch.tgt_in.shape, "  tgt_out", batch.tgt_out.shape)
print("tokens to predict (not <pad>):", batch.num_tokens)

for row, (source, target) in enumerate(pairs):
    print(f"\nsource: {source}\ntarget: {target}")
    print(f"{'t':>3}  {'tgt_in':10s} {'tgt_out':10s}")
    for t in range(batch.tgt_in.shape[1]):
        shown = [vocab.decode([batch.tgt_in[row, t]], strip_special=False)[0],
                 vocab.decode([batch.tgt_out[row, t]], strip_special=False)[0]]
        print(f"{t:>3}  {shown[0]:10s} {shown[1]:10s}")

# %% [markdown]
# Read a row across: `tgt_out` is `tgt_in` moved one place to the left. The
# shorter sentence ends in `<pad>` in both arrays; the loss ignores positions
# whose target is `<pad>`.
#
# ## 3. The masks the model builds
#
# `Transformer.forward(src, tgt_in)` builds its masks from the ids themselves
# (True where a query may attend):
#
# * `padding_mask(src)`, shape $(B, 1, S)$: no query may attend to a
#   `<pad>` of the source. Used in the encoder's self-attention and in the
#   decoder's cross-attention (broadcast over the $T$ queries).
# * `decoder_mask(tgt_in)`, shape $(B, T, T)$: causal (position $t$ sees
#   $0..t$, §3.2.3: "prevent leftward information flow") **and** no `<pad>` key.

# %%
src_mask = minitrans.padding_mask(batch.src, PAD_ID)
tgt_mask = minitrans.decoder_mask(batch.tgt_in, PAD_ID)
print("padding_mask(src):", src_mask.shape, "  decoder_mask(tgt_in):", tgt_mask.shape)

row = 1                                                    # the shorter, padded sentence
src_tokens = vocab.decode(batch.src[row], strip_special=False)
tgt_tokens = vocab.decode(batch.tgt_in[row], strip_special=False)
cross = np.broadcast_to(src_mask[row], (len(tgt_tokens), len(src_tokens)))

fig, axes = plt.subplots(1, 2, figsize=(10, 4))
for ax, mask, keys, title in [(axes[0], tgt_mask[row], tgt_tokens,
                               "decoder self-attention: decoder_mask"),
                              (axes[1], cross, src_tokens, "cross-attention: padding_mask(src)")]:
    image = ax.imshow(mask, cmap="Greys", vmin=0, vmax=1)
    ax.set_xticks(range(len(keys)), keys, rotation=90)
    ax.set_yticks(range(len(tgt_tokens)), tgt_tokens)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query: decoder input tgt_in")
    ax.set_title(title, fontsize=10)
    colorbar = fig.colorbar(image, ax=ax, ticks=[0, 1], fraction=0.046)
    colorbar.ax.set_yticklabels(["blocked", "may attend"])
fig.tight_layout()
plt.show()

# %% [markdown]
# Left: a lower triangle, cut off on the right where `tgt_in` is padding.
# The `<pad>` query rows still see the real tokens before them, but their
# outputs are never used: the loss skips them. Right: every decoder position
# may read every real source word, none of the padding.
#
# ## 4. Training in parallel, inference one token at a time
#
# With teacher forcing and the causal mask, **one** forward pass computes the
# logits of all $T$ positions, $(B, T, V)$: every target word is known in
# advance, and the mask makes position $t$ ignore the later ones. That is the
# parallelism the paper contrasts with recurrent networks (§4: a recurrent
# layer needs $O(n)$ sequential operations, self-attention $O(1)$).
#
# At inference the target is not known: the model must produce $y_1$, feed it
# back, produce $y_2$, and so on, one step per token (autoregression). Two ways:
#
# * `prefix_logits(src, prefix)` recomputes everything (encoder included) for
#   the whole prefix at every step;
# * `start(src)` encodes once, and `step(state, tokens)` feeds one new token,
#   reusing the keys and values of earlier positions from a cache (lesson 15
#   looks inside it).
#
# If the masks are right, all three must give the same logits at every
# position: position $t$'s output may depend only on `tgt_in[0..t]`. We check
# that on a batch of 32 sentences, in evaluation mode (no dropout).

# %%
model.eval()
big_batch = task.make_batch(task.train[:32])
src, tgt_in = big_batch.src, big_batch.tgt_in
B, T = tgt_in.shape

def best_time(function, repeats=3):
    """The fastest of a few runs, in seconds, and the result of the last."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return min(times), result

def one_pass():
    return model.forward(src, tgt_in)                                       # (B, T, V)

def cached_steps():
    state = model.start(src)
    return np.stack([model.step(state, tgt_in[:, t]) for t in range(T)], axis=1)

def recomputed_prefixes():
    return np.stack([model.prefix_logits(src, tgt_in[:, :t + 1]) for t in range(T)], axis=1)

timings = {}
timings["one teacher-forced pass"], full = best_time(one_pass)
timings["T cached steps"], stepped = best_time(cached_steps)
timings["T recomputed prefixes"], recomputed = best_time(recomputed_prefixes, repeats=1)

real = minitrans.to_numpy(tgt_in) != PAD_ID                                 # (B, T)
print(f"B = {B}, T = {T}, V = {full.shape[-1]}")
per_position = [np.abs(stepped - full)[:, t][real[:, t]].max() for t in range(T)]
print("max |step - full| at each position t :", " ".join(f"{d:.0e}" for d in per_position))
print("max |prefix - full| over real tokens :", f"{np.abs(recomputed - full)[real].max():.1e}")
print("max |step - full| at <pad> positions :", f"{np.abs(stepped - full)[~real].max():.1e}")
for label, seconds in timings.items():
    print(f"{label:24s} {1000 * seconds:7.1f} ms")

# %% [markdown]
# At every real position the three agree to float32 rounding ($10^{-6}$).
# (At `<pad>` positions they differ: the full pass masks `<pad>` keys, the
# cache knows nothing about padding. Those logits are never used.) The full
# pass is the cheapest: a few large matrix products for all $T$ positions
# at once. The cached steps do the same arithmetic in $T$ small pieces,
# paying Python overhead for each. Recomputing every prefix repeats the
# encoder and the whole prefix at each step, $O(T^2)$ work, and is several
# times slower than either.

# %%
fig, ax = plt.subplots(figsize=(6, 3))
ax.barh(list(timings), [1000 * t for t in timings.values()],
        color=["tab:green", "tab:blue", "tab:red"])
ax.set_xlabel("milliseconds (best of runs)")
ax.set_ylabel("how the logits are computed")
ax.set_title(f"Logits of all {T} positions of {B} sentences")
ax.invert_yaxis()
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 5. A gradient check of the whole model
#
# Every layer passed its own check; the assembly can still be wrong (a
# gradient sent to the wrong place, a sum forgotten where the encoder output
# feeds every decoder layer). So we check the whole model, from token ids to
# the label-smoothed loss, with padding in source and target and dropout on
# (the checker replays the same dropout masks at each evaluation).
# `minitrans.gradcheck.tiny_model` builds it: $V = 7$, $d_\text{model} = 4$,
# $h = 2$, $d_{ff} = 8$, one layer per stack, parameters randomised, wrapped
# with its loss so that `forward` returns a scalar. Central differences cost
# four forwards per parameter, which is why it is tiny.

# %%
with minitrans.using(dtype="float64"):
    model_with_loss, tiny_batch = tiny_model(N=1)
    src_ids, tiny_in, tiny_out = (minitrans.to_numpy(a) for a in tiny_batch)
    print("src\n", src_ids, "\ntgt_in\n", tiny_in, "\ntgt_out\n", tiny_out)
    start = time.perf_counter()
    results = check_layer(model_with_loss, *tiny_batch)
    print(format_table(results))
print(f"\n{len(results)} tensors, {sum(r.passed for r in results)} pass, worst relative error "
      f"{max(r.rel_error for r in results):.1e}, {time.perf_counter() - start:.1f} s")

# %% [markdown]
# Every parameter of Figure 1, from the source embedding to the output
# projection, agrees with central differences to about nine digits or better.
#
# ### Reference and fast kernels
#
# The layers you have read call a few *kernels* that come in two versions,
# side by side in one module: a reference version that reads as the
# equation (`softmax`, the layer-norm formulas, $-\sum q \log p$, Adam with
# $\hat m$ and $\hat v$) and a fast version that computes the same numbers
# with fewer arrays or inside BLAS. minitrans runs the fast ones by default;
# this course runs the reference ones, chosen at the top of every lesson
# with `minitrans.use(kernels="reference")` (lesson 1), so the gradient
# check above ran on the versions you have read. `with
# minitrans.using(kernels="fast"):` runs one block on the fast set, and
# `MINITRANS_KERNELS=reference` chooses before Python starts. The tests
# check every pair equal, and run the gradient check above and a short
# training on both sets; `python benchmarks/kernels.py` times each pair.
# One pair differs on purpose: dropout's fast masks come from 16-bit random
# integers, so a seed drops other elements than on the reference set.

# %%
from minitrans.core import kernels

print("active kernel set:", kernels.active())
print("pairs:", ", ".join(sorted(kernels.PAIRS)))

# %% [markdown]
# ## 6. The decoder-only sibling
#
# Drop the encoder and the cross-attention, keep the masked self-attention
# stack, and train it to predict token $t+1$ from tokens $0..t$ of a single
# sequence: that is `minitrans.DecoderOnlyLM`, the shape of GPT and of most
# large language models since. It is built from the same `InputEmbedding`,
# `Decoder` (with `cross_attention=False`), and `OutputProjection`; its
# forward takes one id array $(B, T)$, builds only `decoder_mask`, and
# returns logits $(B, T, V)$ where `logits[:, t]` predicts `ids[:, t + 1]`.
# Lesson 16 trains one.

# %%
lm_config = minitrans.ModelConfig.preset("toy", vocab_size=len(vocab), max_len=64,
                                         decoder_only=True)
lm = minitrans.DecoderOnlyLM(lm_config, rng=0)
print(f"{lm.num_parameters():,} parameters:", dict(count_by(lm, 1)))
print("logits:", lm.forward(tgt_in).shape)

# %% [markdown]
# ## 7. Exercise: the shifted target
#
# Write `my_shift_right(sentences, bos, eos, pad)`: `sentences` is a list of
# target sentences, each a list of token ids, of different lengths. Return
# `(decoder_input, decoder_target)`, two integer arrays of shape $(B, T)$
# with $T$ the longest sentence's length plus 1, as `make_seq2seq_batch`
# builds `tgt_in` and `tgt_out` (section 2): the input is `bos` followed by
# the sentence, the target the sentence followed by `eos`, both padded with
# `pad` on the right. An empty sentence gives `[bos]` and `[eos]`. The checker
# compares exactly with arrays it fills position by position, on sentences of
# varying lengths, one sentence, equal lengths, an empty sentence, and other
# special ids. The solution is in `solutions/12_the_whole_model.py`.

# %%
from minitrans_course.exercises_output import check_shift_right


def my_shift_right(sentences, bos, eos, pad):
    # your code here
    T = max(len(sentence) for sentence in sentences) + 1
    return np.zeros((len(sentences), T), dtype=int), np.zeros((len(sentences), T), dtype=int)


check_shift_right(my_shift_right);

# %% [markdown]
# ## Summary
#
# * `Transformer(ModelConfig(...))` is Figure 1: two embeddings, an encoder,
#   a decoder and an output projection, with named parameters; the paper's
#   base model with shared embeddings has about 63M parameters by our count
#   (65M in Table 3).
# * Teacher forcing feeds `<bos> y1 y2 y3` and trains the outputs towards
#   `y1 y2 y3 <eos>`; `<pad>` fills batches and is masked everywhere.
# * The model builds a padding mask for the source and a causal-and-padding
#   mask for the target from the ids themselves.
# * Training computes all positions in one pass; inference generates one
#   token per step, and the key/value cache gives the same logits without
#   recomputing the prefix.
# * The whole model's gradient checks out, loss, padding and dropout included.
#
# ## Next
#
# [Lesson 13](13_adam_and_warmup.ipynb), Adam and the warm-up learning-rate
# schedule.

# %% [markdown]
# # Lesson 19: From here to GPT-2
#
# Lesson 16 took the decoder of the paper, dropped its cross-attention and
# trained it as a language model. That is, in outline, GPT. Two years after
# *Attention Is All You Need*, OpenAI's GPT-2 (Radford et al. 2019,
# *Language Models are Unsupervised Multitask Learners*) was such a model,
# made larger and trained on 40 GB of web text. Nothing in it is beyond
# what this course has built: a handful of choices differ, and the sizes.
#
# In this lesson:
#
# 1. what changed between the 2017 encoder-decoder and GPT-2, choice by
#    choice, and the sizes of the four GPT-2 models next to the paper's base
#    and big models;
# 2. GPT-2 small built with minitrans at its real shape (124 million
#    parameters): its parameters counted part by part against the
#    published checkpoint, one forward pass timed, and the memory that
#    training it would need (lesson 23 shows how the published weights load);
# 3. what trained embeddings carry: a small GPT-shaped model trained on the
#    toy English of lesson 16, its word vectors' nearest neighbours and a
#    2-D projection, against the untrained embedding;
# 4. where the Transformer Explainer, an interactive GPT-2 in the browser,
#    fits into this course;
# 5. an exercise: the parameter count of a decoder-only model from its sizes.

# %% [markdown]
# As in lesson 16, one BLAS thread, asked for before NumPy loads, keeps the
# training below fast on a small shared CPU.

# %%
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one BLAS thread; set before NumPy loads

import time

import matplotlib.pyplot as plt
import numpy as np

import minitrans
from minitrans.core import memory_budget
from minitrans.data import BOS_ID, EOS_ID, Vocab, pad, toy_language
from minitrans.layers.loss import LabelSmoothedCrossEntropy
from minitrans.ops.activations import gelu
from minitrans.training.optimisation.adam import Adam
from minitrans.training.optimisation.clipping import clip_grad_norm
from minitrans.training.optimisation.schedule import transformer_lr

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)

# %% [markdown]
# ## 1. What changed from 2017 to 2019
#
# GPT-2's paper describes its model in one paragraph (§2.3): it "largely
# follows" the first GPT (Radford et al. 2018), with layer normalisation
# moved to the input of each sub-block, one more layer normalisation after
# the last block, a different initialisation, a vocabulary of 50,257 and a
# context of 1,024 tokens. Gathering what GPT and GPT-2 changed against the
# paper, and where each choice lives in minitrans:
#
# | | Transformer (2017) | GPT-2 (2019) | minitrans | lesson |
# | --- | --- | --- | --- | --- |
# | stacks | encoder and decoder, cross-attention between them | decoder only: masked self-attention, no encoder, no cross-attention | `decoder_only=True` (`DecoderOnlyLM`) | [16](16_decoder_only_language_models.ipynb) |
# | where the LayerNorm sits | after each residual addition (post-norm) | before each sub-layer (pre-norm), and one final LayerNorm | `pre_norm=True` | [9](09_residual_and_layer_norm.ipynb) |
# | feed-forward activation | ReLU | GELU (tanh approximation) | `activation="gelu"` | [17](17_dropout_initialisation_and_gelu.ipynb) |
# | positions | sinusoidal table, fixed | learned table of 1,024 × d_model | `positions="learned"` | [4](04_positional_encoding.ipynb) |
# | embedding and output matrix | one matrix for source and target embeddings and the pre-softmax projection (§3.4) | one matrix for the input embedding and the output projection, with no output bias | `tie_embeddings=True`, `output_bias=False` | [12](12_the_whole_model.ipynb) |
# | embedding scale | × √d_model (§3.4) | none | `scale_embedding=False` (default: × √d_model) | [3](03_tokens_and_embeddings.ipynb) |
# | padding | a `<pad>` token, masked | no padding token (`<\|endoftext\|>` ends documents) | `pad_id=None` | [6](06_masks.ipynb) |
# | tokens | BPE, 37,000 shared between English and German | byte-level BPE: 256 bytes + 50,000 merges + `<\|endoftext\|>` = 50,257 | `data.bpe` (merges over characters); `data.gpt2_tokenizer` reads GPT-2's own files | [3](03_tokens_and_embeddings.ipynb), [23](23_loading_pretrained_weights.ipynb) |
# | initialisation | not specified | the residual layers' weights scaled by 1/√N at initialisation, N the number of residual layers: two per block (attention and feed-forward), 24 in GPT-2 small | Xavier everywhere | — |
# | task and data | translation, WMT 2014 sentence pairs | next token of WebText (40 GB, 8 million documents) | `minitrans train lm` | [16](16_decoder_only_language_models.ipynb) |
#
# The GELU (Hendrycks and Gimpel 2016), in the form GPT-2's code uses, is
#
# $$\text{GELU}(x)
#   \approx \tfrac12 x \Big(1 + \tanh\big(\sqrt{2/\pi}\,(x + 0.044715\,x^3)\big)\Big),$$
#
# a smooth ReLU: $x$ times (about) the probability that a standard normal
# number is below $x$. Unlike ReLU it lets a little of the negative side
# through, with a small dip below zero, and its derivative has no jump:

# %%
x = np.linspace(-4, 4, 401)
with minitrans.using(dtype="float64"):
    gelu_x = minitrans.to_numpy(gelu(minitrans.from_host(x)))
print(f"GELU at -3, -1, 0, 1, 3: {np.round(np.interp([-3, -1, 0, 1, 3], x, gelu_x), 4)}; "
      f"its minimum {gelu_x.min():.4f} at x = {x[gelu_x.argmin()]:.2f}")
fig, ax = plt.subplots(figsize=(5, 3.2))
ax.plot(x, np.maximum(x, 0), label="ReLU (the paper)")
ax.plot(x, gelu_x, label="GELU, tanh form (GPT-2)")
ax.axhline(0, color="gray", linewidth=0.5)
ax.set_xlabel("x")
ax.legend()
ax.set_title("The feed-forward network's activation")
plt.show()

# %% [markdown]
# The sizes. GPT-2 came in four sizes (the paper's Table 2 gives $N$ and
# $d_\text{model}$; the head counts are those of OpenAI's released
# configuration files). Every one keeps $d_k = d_\text{model}/h = 64$, as
# the paper's models do, $d_{ff} = 4\,d_\text{model}$, a context of 1,024
# tokens and the vocabulary of 50,257. Below, the parameter counts are
# computed from the sizes by `ModelConfig.parameter_count()`, next to the
# published ones.
#
# Two figures need care. The paper's base and big models are counted with
# the English-German vocabulary of 37,000 tokens; minitrans gives the base
# model 63 M where the paper says 65 M (lesson 12: the paper gives its
# vocabulary only as "about 37000" and its count in no more detail). And
# GPT-2's paper lists 117 M, 345 M, 762 M and 1,542 M parameters, while the
# released checkpoints hold 124 M, 355 M, 774 M and 1,558 M (the names OpenAI
# later gave the models): the counts here follow the checkpoints, in OpenAI's
# own layout, which has one key bias per layer more than minitrans's
# (section 2).

# %%
GPT2 = dict(vocab_size=50257, max_len=1024, pre_norm=True, tie_embeddings=True,
            decoder_only=True, positions="learned", activation="gelu", dropout=0.0,
            output_bias=False, scale_embedding=False, pad_id=None)


def gpt2_config(d_model, h, N):
    return minitrans.ModelConfig(d_model=d_model, h=h, N=N, d_ff=4 * d_model, **GPT2)


def openai_count(config):
    """GPT-2's count in OpenAI's layout: one key bias per layer more."""
    return config.parameter_count() + config.N * config.d_model


models = [  # name, config, the count its paper gives
    ("Transformer base", minitrans.ModelConfig.preset("base", vocab_size=37000), "65M"),
    ("Transformer big", minitrans.ModelConfig.preset("big", vocab_size=37000), "213M"),
    ("GPT-2 small", gpt2_config(768, 12, 12), "117M"),
    ("GPT-2 medium", gpt2_config(1024, 16, 24), "345M"),
    ("GPT-2 large", gpt2_config(1280, 20, 36), "762M"),
    ("GPT-2 XL", gpt2_config(1600, 25, 48), "1542M"),
]
print(f"{'model':<17}{'d_model':>8}{'h':>4}{'d_k':>5}{'layers':>8}{'d_ff':>6}{'vocab':>7}"
      f"{'parameters (computed)':>24}{'(paper)':>9}")
for name, c, paper in models:
    layers = f"{c.N}+{c.N}" if not c.decoder_only else f"{c.N}"
    count = openai_count(c) if c.decoder_only else c.parameter_count()
    print(f"{name:<17}{c.d_model:>8}{c.h:>4}{c.d_model // c.h:>5}{layers:>8}{c.d_ff:>6}"
          f"{c.vocab_size:>7}{count:>24,}{paper:>9}")

# %% [markdown]
# GPT-2 small is about as wide as the paper's models (768, between 512 and
# 1,024) and has as many layers as the base model's two stacks together,
# 12, yet twice its parameters: its layers are wider (85 M in its 12
# layers against 44 M in the base model's 12), and its embedding of
# $50{,}257 \times 768 = 38.6$ M is a third of the model (the base model's
# is 19 M). From medium to XL the layers take over: a layer holds about
# $12\,d_\text{model}^2$ parameters, which grows with the square of the
# width, while the embedding grows only with the width.
#
# ## 2. GPT-2 small, built with minitrans
#
# The configuration of GPT-2 small, in float32, with GPT-2's choices of
# section 1: no output bias, no embedding scale, no padding id (building it
# draws 124 million random numbers: a few seconds and half a gigabyte):

# %%
config = gpt2_config(768, 12, 12)
print(config)
start = time.perf_counter()
gpt2 = minitrans.DecoderOnlyLM(config, rng=0)
print(f"built in {time.perf_counter() - start:.1f} s: {gpt2.num_parameters():,} parameters "
      f"(ModelConfig.parameter_count: {config.parameter_count():,}), "
      f"{minitrans.to_numpy(gpt2.embed.embedding.W_E).dtype}")

# %% [markdown]
# Part by part, by summing the sizes of the arrays the model holds:

# %%
def parameters_by_part(model):
    """Parameter counts by part: the embedding, one decoder layer (all equal), the rest."""
    parts = {}
    for name, value, _ in model.named_parameters():
        if name.startswith("decoder.layers."):
            index, _, rest = name[len("decoder.layers."):].partition(".")
            part = f"one layer: {rest.split('.')[0]}" if index == "0" else "layers 1 to 11"
        else:
            part = name.rsplit(".", 1)[0] + "." + name.rsplit(".", 1)[1]
        parts[part] = parts.get(part, 0) + int(value.size)
    return parts


parts = parameters_by_part(gpt2)
for part, count in parts.items():
    print(f"{part:<32}{count:>14,}")
print(f"{'total':<32}{sum(parts.values()):>14,}")

# %% [markdown]
# One layer holds $4 d^2 + 3d$ for attention ($d = 768$: $W_Q, W_K, W_V,
# W_O$ and three biases), $2 d\, d_{ff} + d_{ff} + d$ for the feed-forward
# network, and two LayerNorms of $2d$: 7,087,104 numbers, twelve times. The
# token embedding ($V \times d$) is also the output matrix, and the output
# projection has no bias: it adds nothing.
#
# Now the published count. OpenAI's checkpoint stores, per layer, the
# three projections $W_Q, W_K, W_V$ as one fused matrix `attn.c_attn` of
# $768 \times 2304$ with a bias of 2,304, which includes a **key bias**.
# Listing the checkpoint's tensors by the names that Hugging Face's
# `transformers` gives them (written out here from the architecture, not
# read from a file):

# %%
def gpt2_checkpoint_shapes(V, d, N, d_ff, context):
    """{name: shape} of every tensor of a GPT-2 checkpoint (transformers' names)."""
    shapes = {"wte.weight": (V, d), "wpe.weight": (context, d)}
    for i in range(N):
        layer = {"ln_1.weight": (d,), "ln_1.bias": (d,),
                 "attn.c_attn.weight": (d, 3 * d), "attn.c_attn.bias": (3 * d,),
                 "attn.c_proj.weight": (d, d), "attn.c_proj.bias": (d,),
                 "ln_2.weight": (d,), "ln_2.bias": (d,),
                 "mlp.c_fc.weight": (d, d_ff), "mlp.c_fc.bias": (d_ff,),
                 "mlp.c_proj.weight": (d_ff, d), "mlp.c_proj.bias": (d,)}
        shapes.update({f"h.{i}.{name}": shape for name, shape in layer.items()})
    return {**shapes, "ln_f.weight": (d,), "ln_f.bias": (d,)}


checkpoint = gpt2_checkpoint_shapes(50257, 768, 12, 3072, 1024)
published = sum(int(np.prod(shape)) for shape in checkpoint.values())
ours = gpt2.num_parameters()
key_bias = 12 * 768
print(f"GPT-2 checkpoint: {len(checkpoint)} tensors, {published:,} parameters")
print(f"minitrans:        {len(list(gpt2.named_parameters()))} tensors, {ours:,} parameters")
print(f"difference {ours - published:+,} = - key biases 12 x 768 = {-key_bias:,}: "
      f"{-key_bias == ours - published}")

# %% [markdown]
# So the sum of the checkpoint's shapes is the published 124,439,808, and
# minitrans's model has **12 × 768 = 9,216 fewer**: it has no key bias.
# Lesson 7 showed why a key bias is useless: $b_K$ adds $q \cdot b_K$ to
# every score of query $q$, the same for every key, and softmax ignores a
# constant added to a row. GPT-2 carries one per layer, and its gradient is
# zero up to rounding (lesson 20 finds the same in PyTorch's attention).
#
# Everything else matches number for number, once `output_bias=False`:
# minitrans's default output projection keeps a bias $b$ of one number per
# token (the "Linear" before the softmax in Figure 1), 50,257 more, while
# GPT-2's output layer is the transposed embedding alone. GPT-2 keeps a
# token's overall frequency in its embedding row $e_v$ instead (the final
# LayerNorm's $\beta$, for one, adds $\beta \cdot e_v$ to every logit of
# token $v$). The checkpoint has 148 tensors and minitrans 184 because each
# layer here keeps $W_Q, W_K, W_V$ and two biases as five arrays where the
# checkpoint has two fused ones (3 more per layer, 36 in all).
#
# ### One forward pass
#
# A random prompt of 16 tokens through all twelve layers, in float32, on
# one CPU thread. The forward builds the causal mask itself (lesson 6); the
# logits are $(1, 16, 50257)$, a distribution over the whole vocabulary for
# every position:

# %%
gpt2.eval()
prompt = minitrans.to_device(np.random.default_rng(1).integers(1, 50257, size=(1, 16)))
gpt2.forward(prompt)  # a first pass touches every array once
times = []
for _ in range(3):
    start = time.perf_counter()
    logits = gpt2.forward(prompt)
    times.append(time.perf_counter() - start)
print(f"logits {logits.shape} {logits.dtype}; forward of 16 tokens: {min(times):.3f} s "
      f"(best of 3)")
multiply_adds = 16 * (12 * (4 * 768**2 + 2 * 768 * 3072) + 768 * 50257)
print(f"about {multiply_adds / 1e9:.1f} G multiply-adds, of which the output layer "
      f"{16 * 768 * 50257 / multiply_adds:.0%}: {2 * multiply_adds / min(times) / 1e9:.0f} GFLOP/s")

# %% [markdown]
# A fraction of a second for 16 tokens: running GPT-2 small is easy on a
# laptop (the Transformer Explainer of section 4 does it in a browser).
# With a vocabulary of 50,257 the output layer is a large share of the
# work for short inputs; the attention scores (16 × 16 per head) are
# negligible next to the matrix products.
#
# ### Memory for training it
#
# Training is another matter. `core/memory_budget.py` estimates what training
# with Adam takes: the parameters, their gradients, Adam's two moments, and
# what the forward keeps for the backward. For one sequence of 1,024 tokens
# and for GPT-2's own batch (512 sequences of 1,024 tokens, §2.3):

# %%
available = memory_budget.machine_memory()
in_words = memory_budget.format_bytes
print(f"the model's arrays:          {in_words(memory_budget.model_bytes(config, 4))}")
for batch in (1, 8, 512):
    needed = memory_budget.training_bytes(config, batch, 1024, itemsize=4)
    print(f"training, batch {batch:>3} x 1024: {in_words(needed):>9}"
          f"  ({needed / available:.1f} x this machine's {in_words(available)})")
flops_per_token = 6 * config.parameter_count()  # forward 2, backward 4 per parameter and token
speed = 2 * multiply_adds / min(times)  # the forward pass's FLOP/s measured above
print(f"training on 1 billion tokens at {speed / 1e9:.0f} GFLOP/s: "
      f"{flops_per_token * 1e9 / speed / 86400:,.0f} days")

# %% [markdown]
# Before any activation, training holds four copies of every parameter
# (the parameters, their gradients and Adam's two moments: 2 GB in
# float32); what the forward keeps for the backward grows with every
# token. One sequence of 1,024 tokens fits this machine; GPT-2's batch of
# 512 needs hundreds of gigabytes, more than any one accelerator of 2019
# held: it has to be split over many (lesson 21's data parallelism). Time
# is the harder limit: a training step costs about 6 operations per
# parameter and token (2 forward, 4 backward), so at the speed measured
# above one billion tokens would take this CPU months (the figure above).
# GPT-2 saw many billions. We will not train this model here, but a small one of
# the same shape, below.
#
# ### Loading GPT-2's released weights
#
# minitrans can run the real GPT-2 small with its published weights:
# `minitrans.pretrained.load_pretrained` reads a checkpoint in Hugging
# Face's layout into a model of exactly this configuration, splitting the
# fused `c_attn` into $W_Q$, $W_K$, $W_V$ and dropping the key bias on the
# way, and `minitrans.data.gpt2_tokenizer` reads GPT-2's byte-level BPE.
# Lesson 23 does both with a tiny GPT-2 (nothing is downloaded in this
# course) and checks the logits against `transformers`'.
#
# ## 3. What trained embeddings carry
#
# GPT-2's embedding is 50,257 rows of 768 numbers learned from text. What
# do such vectors hold? We can see it at a small scale: a model of GPT-2's
# shape (pre-norm, GELU, learned positions, tied embedding; the padding id
# of lesson 16, whose sentences are padded), $d_\text{model}
# = 64$, trained for 300 steps on lesson 16's toy English, then its word
# vectors compared with those of the same model before training. Training
# as in lesson 16:

# %%
rng = np.random.default_rng(0)
sentences = list(dict.fromkeys(toy_language.english(c)
                                 for c in toy_language.random_clauses(rng, 6000)))
held_out, train = sentences[:500], sentences[500:]
vocab = Vocab.build([s.split() for s in train])
# GPT-2's layers; the toy sentences are padded, so minitrans's default pad_id 0 stays
small = minitrans.ModelConfig(vocab_size=len(vocab), d_model=64, h=4, N=2, d_ff=256, max_len=16,
                              **{k: v for k, v in GPT2.items() if k in (
                                  "pre_norm", "tie_embeddings", "decoder_only", "positions",
                                  "activation", "dropout")})
untrained = minitrans.DecoderOnlyLM(small, rng=0)
lm = minitrans.DecoderOnlyLM(small, rng=0)  # the same start; this one is trained


def encode(texts):
    """Sentences -> ids (B, T + 1): <bos> + words + <eos>, padded with 0."""
    return pad([[BOS_ID] + vocab.encode(text.split()) + [EOS_ID] for text in texts])


optimizer = Adam(lm, betas=(0.9, 0.98), eps=1e-9)
loss_fn = LabelSmoothedCrossEntropy(0.0, pad_id=small.pad_id)
batch_rng = np.random.default_rng(1)
held_out_ids = minitrans.to_device(encode(held_out))
losses = {"untrained": float(loss_fn.forward(untrained.forward(held_out_ids[:, :-1]),
                                             held_out_ids[:, 1:]))}
for step in range(1, 301):
    ids = minitrans.to_device(encode([train[i]
                                      for i in batch_rng.integers(0, len(train), size=64)]))
    lm.zero_grad()
    loss_fn.forward(lm.forward(ids[:, :-1]), ids[:, 1:])
    lm.backward(loss_fn.backward())
    clip_grad_norm(lm, 1.0)
    optimizer.step(transformer_lr(step, small.d_model, warmup=100))
lm.eval()
losses["trained"] = float(loss_fn.forward(lm.forward(held_out_ids[:, :-1]), held_out_ids[:, 1:]))
floor = (len(held_out) * np.log(toy_language.NUM_SENTENCES)
         / sum(len(s.split()) + 1 for s in held_out))
print(f"{lm.num_parameters():,} parameters; held-out loss untrained {losses['untrained']:.3f}, "
      f"after 300 steps {losses['trained']:.3f} nats per token (floor {floor:.3f})")

# %% [markdown]
# The held-out loss ends within a few hundredths of a nat of the floor,
# as that of lesson 16's post-norm, ReLU, sinusoidal model did (1.784
# after the same 300 steps): the model has learnt the grammar. Now its
# embedding $W_E$, one row per token, and each word's nearest neighbours by
# cosine similarity (lesson 2), the special tokens left out:

# %%
WORD_CLASSES = {
    "determiner": [w for row in toy_language.DETERMINERS for w in row[:2]],
    "auxiliary": list(toy_language.ENGLISH_AUXILIARIES),
    "noun": [row[0] for row in toy_language.NOUNS],
    "plural noun": [row[1] for row in toy_language.NOUNS],
    "adjective": [row[0] for row in toy_language.ADJECTIVES],
    "verb": [row[0] for row in toy_language.VERBS],
    "verb -s": [row[1] for row in toy_language.VERBS],
    "past verb": [row[2] for row in toy_language.VERBS],
}
word_class = {word: name for name, words in WORD_CLASSES.items() for word in words}
words = [w for w in vocab.tokens if w in word_class]
ids_of_words = [vocab.tokens.index(w) for w in words]


def unit_rows(model):
    """The words' embedding rows (n_words, d_model), each scaled to length 1."""
    E = minitrans.to_numpy(model.embed.embedding.W_E)[ids_of_words].astype(np.float64)
    return E / np.linalg.norm(E, axis=1, keepdims=True)


def neighbours(E, word, k=4):
    similarity = E @ E[words.index(word)]  # cosine similarities with every word
    order = [i for i in np.argsort(-similarity) if words[i] != word][:k]
    return ", ".join(f"{words[i]} {similarity[i]:.2f}" for i in order)


E_trained, E_untrained = unit_rows(lm), unit_rows(untrained)
print(f"{len(words)} words in {len(WORD_CLASSES)} classes")
for word in ["dog", "dogs", "sees", "saw", "big", "the", "did"]:
    print(f"{word:<5} trained:   {neighbours(E_trained, word)}")
    print(f"{'':<5} untrained: {neighbours(E_untrained, word)}")

# %% [markdown]
# One measure for all words at once: the share of each word's three
# nearest neighbours that belong to its own class, against what random
# neighbours would give.

# %%
def same_class_share(E, k=3):
    similarity = E @ E.T
    np.fill_diagonal(similarity, -np.inf)  # a word is not its own neighbour
    nearest = np.argsort(-similarity, axis=1)[:, :k]
    return np.mean([[word_class[words[j]] == word_class[words[i]] for j in row]
                    for i, row in enumerate(nearest)])


classes = [word_class[w] for w in words]
chance = np.mean([(classes.count(c) - 1) / (len(words) - 1) for c in classes])
print(f"same class among the 3 nearest neighbours: trained {same_class_share(E_trained):.0%}, "
      f"untrained {same_class_share(E_untrained):.0%}, random neighbours {chance:.0%}")

# %% [markdown]
# And all 65 vectors at once, projected on their two principal components
# (the two directions along which they vary most, from the singular value
# decomposition of the centred rows), coloured by class:

# %%
def principal_plane(E):
    """The rows of E (n, d) projected on their first two principal components."""
    centred = E - E.mean(axis=0)
    _, singular, Vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ Vt[:2].T, singular[:2] ** 2 / np.sum(singular**2)


fig, axes = plt.subplots(1, 2, figsize=(12, 5.5))
colours = dict(zip(WORD_CLASSES, plt.cm.tab10.colors))
for ax, E, title in ((axes[0], E_untrained, "untrained"), (axes[1], E_trained, "after 300 steps")):
    points, share = principal_plane(E)
    for name in WORD_CLASSES:
        chosen = [i for i, w in enumerate(words) if word_class[w] == name]
        ax.scatter(points[chosen, 0], points[chosen, 1], color=colours[name], label=name, s=20)
    for i, word in enumerate(words):
        ax.annotate(word, points[i], fontsize=7, xytext=(2, 2), textcoords="offset points")
    ax.set_title(f"Word embeddings, {title} (PCA: {share[0]:.0%} + {share[1]:.0%} of the variance)",
                 fontsize=10)
axes[1].legend(fontsize=8, loc="best")
plt.show()

# %% [markdown]
# Untrained, the vectors are random: neighbours are nearly arbitrary (21%
# in the word's class, not far above the 13% of neighbours drawn at
# random) and the two principal components
# hold little of the variance. After 300 steps of next-token prediction
# the words have sorted themselves by grammatical role: nouns with nouns,
# plural nouns apart from singular ones, adjectives together, and the
# verbs by form. Nothing told the model what a noun is. The auxiliaries
# show what the grouping means: in the plane, `does` lands among the verbs
# in -s, `did` beside the past verbs and `do` towards the bare verbs,
# because each stands right after a subject of the kind those verbs
# follow. Two words get similar
# vectors when they are used alike: the same words can come after them,
# and, because the embedding is tied to the output matrix, they are
# predicted in the same places. The classes here are exactly what this
# grammar makes interchangeable; the meanings (dog against cat) it cannot
# tell apart, because it uses every noun the same way. In GPT-2, trained
# on real text, the same pressure sorts 50,257 vectors by grammar and
# meaning at once.
#
# ## 4. Where the Transformer Explainer fits
#
# The *Transformer Explainer* (Cho et al. 2024, *Transformer Explainer:
# Interactive Learning of Text-Generative Models*, from Georgia Tech's
# Polo Club) runs GPT-2 small itself in a web browser, on whatever text you
# type, and draws its computation from the tokens to the next-token
# probabilities; each part opens into a more detailed view. Its views and
# the lessons that build the same thing here (its interface changes over
# time; this follows the paper and the site as described there):
#
# | Transformer Explainer | what it shows | here |
# | --- | --- | --- |
# | embedding | the prompt split into GPT-2's tokens, each token's embedding and its learned position vector added | lessons [3](03_tokens_and_embeddings.ipynb), [4](04_positional_encoding.ipynb), section 3 above |
# | Q, K, V | each token's vector projected to queries, keys and values, split over 12 heads of 64 | lessons [5](05_scaled_dot_product_attention.ipynb), [7](07_multi_head_attention.ipynb) |
# | masked self-attention, per head | the scores $QK^\top$, scaled by $1/\sqrt{d_k}$, the causal mask, the softmax and the attention map of a chosen head | lessons [5](05_scaled_dot_product_attention.ipynb), [6](06_masks.ipynb), [7](07_multi_head_attention.ipynb) |
# | MLP | the feed-forward network, 768 → 3,072 → 768 with GELU | lesson [10](10_feed_forward_and_output.ipynb), section 1 above |
# | residual connections and layer norm | drawn around each block | lesson [9](09_residual_and_layer_norm.ipynb) |
# | output probabilities, with a temperature slider | the logits, the softmax over 50,257 tokens and the sampled next token; the temperature divides the logits (newer versions add top-k and top-p) | lessons [10](10_feed_forward_and_output.ipynb), [16](16_decoder_only_language_models.ipynb) |
#
# The temperature slider acts on the final probabilities only: it changes
# which token is sampled, not what any head attends to. What it does not
# show is everything this course spent most of its time on: **training**
# (the loss, the backward pass, gradients, Adam and the warm-up; GPT-2's
# weights arrive trained), the **gradient checks** that prove a backward
# right, batches and padding, the key/value cache that makes generation
# fast (lesson 15), and the encoder and cross-attention of the original
# Transformer (GPT-2 has none). It is a good place to watch the trained
# model at work; this course is where to see how it came to be.
#
# ## Exercise: the parameter count of a decoder-only model
#
# Write `my_parameter_count(vocab_size, d_model, h, N, d_ff, max_len, tied,
# learned)` returning, as an exact integer, the number of parameters of the
# model minitrans builds with `ModelConfig(vocab_size, d_model=d_model, h=h,
# N=N, d_ff=d_ff, max_len=max_len, decoder_only=True, pre_norm=True,
# tie_embeddings=tied, positions="learned" if learned else "sinusoidal")`.
# Count from the sizes, without building a model. Mind the key bias, the
# final LayerNorm, which tables are parameters and which are fixed, and
# whether `h` matters at all. The checker tries random small sizes, each
# combination of `tied` and `learned`, one head, $d_k = 1$, and GPT-2 small
# and XL at their real sizes (where a float32 answer is no longer exact).
# Its reference lists every tensor's name and shape, the way a checkpoint
# does, and adds them up. The skeleton returns 0, so the checker says "not
# yet". The solution is in `solutions/19_to_gpt2.py`.

# %%
from minitrans_course.exercises_gpt import check_decoder_only_parameter_count


def my_parameter_count(vocab_size, d_model, h, N, d_ff, max_len, tied, learned):
    # your code here
    return 0


check_decoder_only_parameter_count(my_parameter_count);

# %% [markdown]
# ## Summary
#
# * GPT-2 is the decoder of lesson 16 with a few different choices:
#   pre-norm with a final LayerNorm, GELU, learned positions of 1,024, a tied
#   output matrix, byte-level BPE with 50,257 tokens; its small model has
#   $d_\text{model} = 768$, 12 heads, 12 layers, $d_{ff} = 3072$.
# * Built with minitrans at that shape, with no output bias
#   (`output_bias=False`), no embedding scale (`scale_embedding=False`) and
#   no padding id (`pad_id=None`), it has 124,430,592 parameters: the
#   published 124,439,808 less one key bias per layer (9,216, which softmax
#   ignores).
# * Running it is cheap (a forward pass of 16 tokens in a fraction of a
#   second on one CPU thread); training it is not: the parameters, their
#   gradients and Adam's two moments are four copies of the model, and
#   GPT-2's batch of 512 sequences of 1,024 tokens needs hundreds of
#   gigabytes (677 GB by the estimate above).
# * Trained embeddings sort words by how they are used: after 300 steps on
#   toy English, nearest neighbours share a grammatical class far more often
#   than in the untrained control.
#
# ## Next
#
# One more lesson on the main path:
# [Lesson 22](22_todays_decoder.ipynb), today's decoder: what Llama and the
# models after it changed from GPT-2 (RMSNorm, rotary positions, SwiGLU,
# grouped-query attention), each built and gradient-checked, and the 2017
# block against today's on a toy task.

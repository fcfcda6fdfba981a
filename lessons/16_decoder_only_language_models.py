# %% [markdown]
# # Lesson 16: Decoder-only language models
#
# The Transformer of the paper is an encoder-decoder: the encoder reads the
# source sentence, the decoder writes the translation while it attends to
# the encoder's output. The study notes point out that most of today's large
# language models (GPT and its successors) keep only the right half of
# Figure 1: a stack of decoder layers with masked self-attention, no encoder
# and no cross-attention, trained to predict the next token of ordinary
# text. (Encoder-only models such as BERT keep the left half instead.)
#
# Nothing new has to be written for that: the parts of lessons 3 to 13 are
# rearranged. In this lesson:
#
# 1. `minitrans.DecoderOnlyLM`: the same embedding, masked self-attention,
#    feed-forward network, Add & Norm and output projection, minus the
#    encoder and the cross-attention; its parameters counted against the
#    encoder-decoder of the same sizes, and a gradient check;
# 2. next-token prediction: the inputs are `ids[:-1]`, the targets `ids[1:]`;
# 3. training one on a small corpus of English sentences, in seconds;
# 4. generating text with greedy decoding and with sampling (temperature,
#    top-k, top-p);
# 5. its attention map: lower triangular;
# 6. exercises: the inputs and targets of a batch, and top-k filtering.

# %% [markdown]
# As in lessons 14 and 15, one BLAS thread, asked for before NumPy loads,
# keeps training fast on a small shared CPU.

# %%
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one BLAS thread; set before NumPy loads

import time

import matplotlib.pyplot as plt
import numpy as np

import minitrans
from minitrans import decoding
from minitrans.data import BOS_ID, EOS_ID, Vocab, make_lm_batch, pad, toy_language
from minitrans.layers.loss import LabelSmoothedCrossEntropy
from minitrans.ops.softmax import softmax
from minitrans.training.optimisation.adam import Adam
from minitrans.training.optimisation.clipping import clip_grad_norm
from minitrans.training.optimisation.schedule import transformer_lr

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)

# %% [markdown]
# ## A language model
#
# A language model gives a probability to a whole sequence of tokens
# $x_1 \dots x_T$ by the chain rule, one next token at a time:
#
# $$P(x_1, \dots, x_T) = \prod_{t=1}^{T} p(x_t \mid x_0, \dots, x_{t-1}),
#   \qquad x_0 = \langle\text{bos}\rangle.$$
#
# This is what the paper's decoder already computes for the target sentence
# (§3.1: "the model is auto-regressive"), only conditioned on a source as
# well. Drop the source, and with it the encoder and the cross-attention,
# and what is left models text on its own. `DecoderOnlyLM` is, for ids
# $(B, T)$:
#
# $$\text{logits} =
#   \text{Decoder}_\text{no cross}\big(\text{InputEmbedding}(\text{ids})\big)\, W + b,
#   \qquad (B, T, V),$$
#
# where each of the $N$ layers is masked self-attention then the
# feed-forward network, each inside Add & Norm, and `logits[:, t]` predicts
# `ids[:, t + 1]`. The mask is the decoder's: causal and padding (lesson 6).
#
# We build one next to the encoder-decoder `Transformer` of the same sizes
# and count their parameters, part by part. The vocabulary of 69 tokens is
# the one we train on below: 65 English words and 4 special tokens.

# %%
sizes = dict(vocab_size=69, d_model=64, h=4, N=2, d_ff=256, dropout=0.0, max_len=16)
lm = minitrans.DecoderOnlyLM(minitrans.ModelConfig(**sizes, decoder_only=True), rng=0)
seq2seq = minitrans.Transformer(minitrans.ModelConfig(**sizes), rng=0)


def parameters_by_part(model):
    """Parameter counts grouped by the first part of their qualified name."""
    parts = {}
    for name, value, _ in model.named_parameters():
        part = name.split(".")[0]
        parts[part] = parts.get(part, 0) + int(value.size)
    return parts


for title, model in (("DecoderOnlyLM", lm), ("Transformer (encoder-decoder)", seq2seq)):
    parts = ", ".join(f"{part} {count:,}" for part, count in parameters_by_part(model).items())
    print(f"{title}: {model.num_parameters():,} parameters = {parts}")

# %% [markdown]
# The language model has one embedding instead of two, no encoder, and a
# smaller decoder. Inside one decoder layer, the difference is the missing
# cross-attention block:

# %%
def parameters_of_layer(layer):
    """Each sub-layer's parameters with those of its Add & Norm (`self_attn_norm`, ...)."""
    blocks = [(getattr(layer, name), getattr(layer, f"{name}_norm"), name)
              for name in ("self_attn", "cross_attn", "feed_forward")]
    return {name: sublayer.num_parameters() + add_norm.num_parameters()
            for sublayer, add_norm, name in blocks if sublayer is not None}


print("LM decoder layer:         ", parameters_of_layer(lm.decoder.layers[0]))
print("seq2seq decoder layer:    ", parameters_of_layer(seq2seq.decoder.layers[0]))
print("LM layer's cross_attn is", lm.decoder.layers[0].cross_attn)

d, d_ff = sizes["d_model"], sizes["d_ff"]
# W_Q, W_K, W_V, W_O; b_Q, b_V, b_O (no key bias); LayerNorm
attention_block = 4 * d * d + 3 * d + 2 * d
ffn_block = 2 * d * d_ff + d_ff + d + 2 * d  # W_1, W_2, b_1, b_2; LayerNorm
print(f"by formula: attention block 4d^2 + 5d = {attention_block:,}, "
      f"feed-forward block 2 d d_ff + d_ff + 3d = {ffn_block:,}")
difference = seq2seq.num_parameters() - lm.num_parameters()
seq2seq_parts = parameters_by_part(seq2seq)
print(f"difference {difference:,} = source embedding + encoder + {sizes['N']} cross-attention "
      "blocks = "
      f"{seq2seq_parts['src_embed'] + seq2seq_parts['encoder'] + sizes['N'] * attention_block:,}")

# %% [markdown]
# (The source embedding is $V \cdot d_\text{model} = 69 \cdot 64 = 4{,}416$.)
# An encoder layer and a decoder-only layer have exactly the same parts and
# sizes, self-attention and feed-forward; they differ only in the mask: the
# encoder lets every position see every other, the language model only the
# past.
#
# ## Its gradient
#
# Every layer was checked on its own, but the model wires them differently,
# so we check the whole model with its loss: `minitrans.gradcheck.tiny_model`
# builds a tiny `DecoderOnlyLM` (vocabulary 7, $d_\text{model} = 4$,
# dropout on) with padded inputs and targets, and `check_layer` compares the
# backward of loss and model with central differences, in float64, for
# every parameter:

# %%
from minitrans.gradcheck import check_layer, format_table
from minitrans.gradcheck import tiny_model

with minitrans.using(dtype="float64"):
    tiny_lm_with_loss, (tiny_inputs, tiny_targets) = tiny_model(decoder_only=True)
    print("inputs", minitrans.to_numpy(tiny_inputs).tolist(), "targets",
          minitrans.to_numpy(tiny_targets).tolist())
    results = check_layer(tiny_lm_with_loss, tiny_inputs, tiny_targets)
print(format_table(results))

# %% [markdown]
# Every tensor passes, and there is no `encoder` and no `cross_attn` among
# them.
#
# ## The text: a small grammar of English
#
# A model of 100,000 parameters trained for seconds cannot learn English,
# but it can learn a small piece of it. `minitrans.toy_language` (the
# source side of lesson 14's translation task) writes random sentences of a
# grammar with 10 nouns, 8 adjectives and 10 verbs: subject, verb, object,
# with singular and plural, present and past, and "does not" / "do not" /
# "did not". Every one of its 5,184,000 sentences is equally likely. We
# draw 6,000, hold out 500 and train on the rest, word by word.

# %%
rng = np.random.default_rng(0)
sentences = list(dict.fromkeys(toy_language.english(c)
                                 for c in toy_language.random_clauses(rng, 6000)))
# distinct sentences: none held out is trained on
held_out, train = sentences[:500], sentences[500:]
vocab = Vocab.build([s.split() for s in train])
print(f"{len(train):,} training and {len(held_out)} held-out sentences, vocabulary {len(vocab)} "
      f"(4 special tokens and {len(vocab) - 4} words), grammar of {toy_language.NUM_SENTENCES:,} "
      "sentences")
for sentence in train[:4]:
    print("  ", sentence)

# %% [markdown]
# ## Next-token prediction
#
# A training sequence is `<bos>`, the sentence, `<eos>`: ids $(B, T + 1)$
# after padding. The model reads all but the last token and is trained to
# predict all but the first, so position $t$ of the input is paired with
# token $t + 1$:
#
# $$\text{inputs} = \text{ids}[:, :-1], \qquad \text{targets} = \text{ids}[:, 1:], \qquad
#   L = -\frac{1}{n}\sum_{t} \log p(\text{targets}_t \mid \text{inputs}_{\le t}),$$
#
# averaged over the $n$ targets that are not padding. It is teacher forcing
# again (lesson 12), with the sentence playing the part of both source and
# target, and the causal mask is what stops position $t$ from reading the
# answer at $t + 1$. Padding fills the shorter sentence, and a target of
# `<pad>` is left out of the loss. `data.make_lm_batch` builds the same two
# arrays (it pads the inputs of a short row with `<pad>` where ours still
# has its `<eos>`, at positions whose target is `<pad>` and so never counts).

# %%
def encode(texts):
    """Sentences -> ids (B, T + 1): <bos> + words + <eos>, padded with 0."""
    return pad([[BOS_ID] + vocab.encode(text.split()) + [EOS_ID] for text in texts])


ids = encode(train[:2])
inputs, targets = ids[:, :-1], ids[:, 1:]
print(f"ids {ids.shape}, inputs {inputs.shape}, targets {targets.shape}")
for t in range(inputs.shape[1]):
    print(f"  t={t}: reads {vocab.tokens[inputs[0, t]]:<8} -> must predict "
          f"{vocab.tokens[targets[0, t]]}")

batch = make_lm_batch([vocab.encode(text.split()) for text in train[:2]])
tgt_in, tgt_out = minitrans.to_numpy(batch.tgt_in), minitrans.to_numpy(batch.tgt_out)
counted = targets != 0  # the positions the loss counts
print("make_lm_batch: same targets:", bool((tgt_out == targets).all()),
      "| same inputs wherever the target counts:", bool((tgt_in == inputs)[counted].all()))

# %% [markdown]
# ## Training
#
# The loop of lesson 13, written out: a batch of 64 random training
# sentences, forward, loss, backward, clip the gradient norm at 1, Adam at
# the warm-up schedule (here warm-up 100 steps). We use plain cross-entropy,
# without label smoothing, so that the held-out loss can be compared with
# the best possible one. 300 steps:

# %%
lm = minitrans.DecoderOnlyLM(minitrans.ModelConfig(**{**sizes, "vocab_size": len(vocab)},
                                                   decoder_only=True), rng=0)
optimizer = Adam(lm, betas=(0.9, 0.98), eps=1e-9)
# smoothing 0: plain cross-entropy
loss_fn = LabelSmoothedCrossEntropy(0.0, pad_id=lm.config.pad_id)
held_out_ids = minitrans.to_device(encode(held_out))
batch_rng = np.random.default_rng(1)
train_losses, held_out_curve = [], {"step": [], "loss": []}

start = time.perf_counter()
for step in range(1, 301):
    ids = minitrans.to_device(encode([train[i]
                                      for i in batch_rng.integers(0, len(train), size=64)]))
    lm.zero_grad()
    loss = float(loss_fn.forward(lm.forward(ids[:, :-1]), ids[:, 1:]))
    train_losses.append(loss)
    lm.backward(loss_fn.backward())
    clip_grad_norm(lm, 1.0)
    optimizer.step(transformer_lr(step, lm.config.d_model, warmup=100))
    if step % 25 == 0:
        lm.eval()  # (no dropout here anyway)
        held_out_loss = float(loss_fn.forward(lm.forward(held_out_ids[:, :-1]),
                                              held_out_ids[:, 1:]))
        lm.train()
        held_out_curve["step"].append(step)
        held_out_curve["loss"].append(held_out_loss)
print(f"300 steps in {time.perf_counter() - start:.1f} s; held-out loss "
      f"{held_out_curve['loss'][-1]:.3f} nats per token")

# %% [markdown]
# How good is that? The grammar picks each of its $S = 5{,}184{,}000$
# sentences with probability $1/S$, so even the perfect model gives a
# held-out sentence a log-probability of $-\log S$, and its loss per token
# is $\log S$ divided by the sentence's tokens (its words and `<eos>`).
# Averaged over the held-out tokens, that is the floor no model can beat:

# %%
held_out_tokens = sum(len(s.split()) + 1 for s in held_out)
floor = len(held_out) * np.log(toy_language.NUM_SENTENCES) / held_out_tokens
print(f"log S = {np.log(toy_language.NUM_SENTENCES):.2f} nats per sentence; floor {floor:.3f} nats "
      f"per token; uniform guess log V = {np.log(len(vocab)):.3f}")

fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(range(1, len(train_losses) + 1), train_losses, linewidth=1,
        label="training batch (64 sentences)")
ax.plot(held_out_curve["step"], held_out_curve["loss"], "o-", markersize=3,
        label="500 held-out sentences")
ax.axhline(floor, color="gray", linestyle=":", label="floor: the grammar's own entropy")
ax.set_title("Decoder-only LM on toy English: loss")
ax.set_xlabel("training step")
ax.set_ylabel("cross-entropy per token (nats)")
ax.legend()
plt.show()

# %% [markdown]
# The loss starts above $\log V$, the loss of a uniform guess over the
# vocabulary. After 300 steps (a few seconds) the held-out loss is within a
# few hundredths of a nat of the floor: the model is close to knowing the
# grammar. The loss of one training batch of 64 sentences is noisy and can
# dip below the floor by chance; the average over 500 held-out sentences
# hardly can.
#
# For comparison, the built-in `lm` task, `minitrans train lm`, teaches a
# decoder-only model of 400,400 parameters to complete two-digit sums such
# as `12+34=`; with seed 0 it needs 1,750 steps, about a minute on two
# cores, to answer 99.5% of 1,000 held-out sums exactly, too long for this
# notebook.
#
# ## What the model has learnt
#
# The model's prediction after a prompt is the softmax of the last
# position's logits. A few prompts:

# %%
lm.eval()


def next_words(prompt, k=6):
    """The k most probable next words after <bos> + prompt."""
    ids = minitrans.to_device(np.array([[BOS_ID] + vocab.encode(prompt.split())]))  # (1, T)
    probs = minitrans.to_numpy(softmax(lm.forward(ids)[:, -1]))[0]  # (V,)
    return "  ".join(f"{vocab.tokens[i]} {probs[i]:.2f}" for i in np.argsort(-probs)[:k])


for prompt in ["", "a", "the big dog", "the big dogs", "the dog did not"]:
    print(f"{prompt or '(nothing)':<16} -> {next_words(prompt)}")

# %% [markdown]
# At the start of a sentence, `the` (used for one and for many) is about
# twice as likely as `a` or `some`, as in the grammar; after `a` come the
# eight adjectives, each about 1/9 likely (the remaining ninth is shared by
# the ten nouns, which may follow at once). After "the big dog" the verbs offered are
# singular (`finds`, `helps`, `fears`) or past (`saw`), and the negation
# takes `does`; after "the big dogs" they are plural (`help`) or past, and
# the negation takes `do`. After "did not" only base forms follow. The model
# has learnt subject-verb agreement from examples, with nothing but
# next-token prediction.
#
# ## Generating text
#
# `decoding.generate(lm, prompt, max_new_tokens, ...)` continues a prompt
# $(B, T_0)$, which must start with `<bos>` and contain no padding. It feeds
# the prompt through `lm.step`, filling the key/value cache (lesson 15),
# then produces one token per step until every row has written `<eos>`.
# `strategy="greedy"` takes the most probable token each time:

# %%
for prompt in ["", "the big dogs", "a clever fox did not"]:
    prompt_ids = minitrans.to_device(np.array([[BOS_ID] + vocab.encode(prompt.split())]))
    new = decoding.generate(lm, prompt_ids, max_new_tokens=10)  # (1, L), L <= 10
    print(f"{prompt:>22} | {' '.join(vocab.decode(minitrans.to_numpy(new[0])))}")

# %% [markdown]
# Before sampling, the two filters on the model's own next-token distribution
# after "the big dog": its 12 most probable words (the softmax is taken over
# these 12), then what is left after `top_k_filter(k)` and `top_p_filter(p)`
# of `minitrans.decoding.sampling`. Move the sliders (they move in the page,
# or in JupyterLab in a trusted notebook; the picture under the figure shows
# k = 1, 6 and 12 at p = 1):

# %%
from IPython.display import display
from minitrans_course.interactive_figures import sampling_filters_figure

ids = minitrans.to_device(np.array([[BOS_ID] + vocab.encode("the big dog".split())]))  # (1, T)
last_logits = minitrans.to_numpy(lm.forward(ids)[0, -1])  # (V,)
top = np.argsort(-last_logits)[:12]  # the 12 most probable words
filters_figure = sampling_filters_figure(last_logits[top], [vocab.tokens[i] for i in top])
display(filters_figure)
filters_figure.static(pyplot=True)
plt.show()

# %% [markdown]
# Greedy decoding gives one sentence per prompt, always the same.
# `strategy="sample"` draws each token instead, after the steps of lesson 10:
# divide the logits by the temperature $\tau$, keep the `top_k` largest,
# softmax, keep the smallest set of tokens whose probability reaches
# `top_p`, renormalise, draw. To judge the samples we need a referee: a
# sentence is grammatical if it parses as noun phrase, verb phrase (agreeing
# with the subject), noun phrase, using the word lists of `toy_language`.

# %%
NOUN_IS_PLURAL = {singular: False for singular, _, _ in toy_language.NOUNS}
NOUN_IS_PLURAL.update({plural: True for _, plural, _ in toy_language.NOUNS})
ADJECTIVES = {english for english, _ in toy_language.ADJECTIVES}


def noun_phrase(words):
    """(plural, remaining words) if words start with a noun phrase, else None."""
    if len(words) > 2 and words[1] in ADJECTIVES:
        words = words[:1] + words[2:]  # drop the adjective
    if len(words) < 2 or words[1] not in NOUN_IS_PLURAL:
        return None
    plural = NOUN_IS_PLURAL[words[1]]
    allowed = ("the", "some") if plural else ("the", "a")
    return (plural, words[2:]) if words[0] in allowed else None


def grammatical(sentence):
    subject = noun_phrase(sentence.split())
    if subject is None:
        return False
    plural, rest = subject
    for base, third_person, past, _ in toy_language.VERBS:
        for verb in ([base if plural else third_person], [past], ["did", "not", base],
                     ["do" if plural else "does", "not", base]):
            if rest[:len(verb)] == verb:
                obj = noun_phrase(rest[len(verb):])
                if obj is not None and obj[1] == []:
                    return True
    return False


print("every training sentence passes:", all(grammatical(s) for s in train))
for bad in ["the dog see a cat", "a dogs sees the cat", "the dogs does not see a cat",
            "the dog sees"]:
    print(f"  {bad!r}: {grammatical(bad)}")

# %% [markdown]
# Now 200 samples for each setting, all starting from `<bos>` alone, with
# the same seed. For each: the share of grammatical sentences, how many
# different sentences and different words (of the 65) they contain, and how
# many of the sentences also occur in the training set.

# %%
start_ids = minitrans.to_device(np.full((200, 1), BOS_ID))  # (200, 1): <bos> only
train_set = set(train)
settings = [("greedy", dict(strategy="greedy")),
            ("temperature 0.5", dict(strategy="sample", temperature=0.5)),
            ("temperature 1", dict(strategy="sample")),
            ("temperature 2", dict(strategy="sample", temperature=2.0)),
            ("top-k 3", dict(strategy="sample", top_k=3)),
            ("top-p 0.9", dict(strategy="sample", top_p=0.9)),
            ("temperature 2, top-p 0.9", dict(strategy="sample", temperature=2.0, top_p=0.9))]
for name, options in settings:
    out = minitrans.to_numpy(decoding.generate(lm, start_ids, 15, rng=0, **options))
    texts = [" ".join(vocab.decode(row)) for row in out]
    share = np.mean([grammatical(t) for t in texts])
    words = len({w for t in texts for w in t.split()} & set(vocab.tokens[4:]))  # English words only
    seen = sum(t in train_set for t in texts)
    print(f"{name:<25} grammatical {share:6.1%}  distinct sentences {len(set(texts)):3d}  words "
          f"used {words:2d}  in training set {seen}")
    print(f"{'':<25} e.g. {texts[0]!r}, {texts[1]!r}")

# %% [markdown]
# * **Greedy** writes one sentence 200 times.
# * **Temperature 1** samples from the model's own distribution: 200
#   different sentences, hardly any of them seen in training (the grammar
#   has five million), more than nine in ten grammatical. The others come from the small
#   probability that the model, after 300 steps, still gives wrong words.
# * **Temperature 0.5** sharpens the distribution: those unlikely words
#   almost vanish and every sample here is grammatical, at the price of
#   using fewer different words.
# * **Temperature 2** flattens it: wrong words become likely and most
#   samples break the grammar.
# * **Top-k** and **top-p** cut off the tail of unlikely words instead of
#   reshaping the whole distribution: all their samples here are
#   grammatical and still varied, and top-p rescues a good part of
#   temperature 2. With $k = 3$ only the three likeliest words can ever
#   come next (three of the eight adjectives, for instance), so far fewer
#   different words appear.
#
# ## The attention of a language model
#
# In a decoder-only model every attention map is masked self-attention:
# query position $t$ may look at keys $0 \dots t$ only. After a forward,
# `lm.attention_maps()` returns the weights by layer name, $(B, h, T, T)$.
# Here are those of the last layer for one held-out sentence, averaged over
# the heads:

# %%
sentence = held_out[0]
ids = minitrans.to_device(np.array([[BOS_ID] + vocab.encode(sentence.split())]))  # (1, T)
lm.forward(ids)
maps = lm.attention_maps()
print(list(maps))
weights = minitrans.to_numpy(maps["decoder.layers.1.self_attn.attention"])[0]  # (h, T, T)
future = np.triu(np.ones(weights.shape[1:], dtype=bool), k=1)  # (T, T): True above the diagonal
print("weights", weights.shape, "(h, T, T) | largest weight above the diagonal:",
      weights[:, future].max())

tokens = ["<bos>"] + sentence.split()
fig, ax = plt.subplots(figsize=(6, 5))
image = ax.imshow(weights.mean(axis=0), cmap="viridis", vmin=0.0, vmax=1.0)
ax.set_xticks(range(len(tokens)), tokens, rotation=45)
ax.set_yticks(range(len(tokens)), [f"{token} ->" for token in tokens])
ax.set_title(f"Causal self-attention, last layer, mean of {lm.config.h} heads", fontsize=10)
ax.set_xlabel("key: earlier token")
ax.set_ylabel("query: token read, predicting the next")
fig.colorbar(image, ax=ax, label="attention weight")
plt.show()

# %% [markdown]
# Everything above the diagonal is exactly 0: no position sees the future.
# Row $t$ is where the model looked while predicting token $t + 1$. The
# first row can only attend to `<bos>`, so its weight there is 1. The other
# rows spread their weight over a few earlier words that the model has
# found useful, often not the nearest one. The row of the subject noun,
# which must predict the verb, puts half its weight on the noun itself and
# the other half on the determiner and the adjective before it.

# %% [markdown]
# ## Exercises: the targets, and top-k
#
# * `my_targets(sequences, bos_id, eos_id, pad_id)`: `sequences` is a list of
#   $B$ lists of token ids, of any lengths (one may be empty), without
#   `<bos>` or `<eos>`. Return `(inputs, targets)`, two int arrays
#   $(B, T + 1)$ with $T$ the longest list, as `data.make_lm_batch` builds
#   them: each row is `<bos>`, the ids, `<eos>`; cut it first (all but the
#   last token, all but the first), then pad on the right with `pad_id`.
#   A short row's inputs therefore end in `<pad>` (the `ids[:, :-1]` of the
#   section on next-token prediction leaves its `<eos>` there, harmless for
#   the loss; the checker wants `<pad>`, as `make_lm_batch`).
# * `my_top_k(probs, k)`: `probs` $(B, V)$. Keep the $k$ largest
#   probabilities of each row, set the others to 0, and divide by the kept
#   total: what `softmax(top_k_filter(logits, k))` gives. Exactly $k$ are
#   kept, even with ties, which go to the lower token id (a stable sort);
#   with $k \geq V$ every token stays. The checker tries rows sorted
#   ascending, $k = 1$, $k = V$, $k > V$, a row of ties and float32.

# %%
from minitrans_course.exercises_language_models import check_next_token_targets, check_top_k_filter


def my_targets(sequences, bos_id, eos_id, pad_id):
    # your code here
    width = max(len(ids) for ids in sequences) + 1
    return (np.zeros((len(sequences), width), dtype=int),
            np.zeros((len(sequences), width), dtype=int))


def my_top_k(probs, k):
    # your code here
    return np.zeros_like(probs)


# %%
check_next_token_targets(my_targets)
check_top_k_filter(my_top_k);

# %% [markdown]
# ## Summary
#
# * A decoder-only language model is the Transformer's decoder without
#   cross-attention, and without an encoder: embedding, $N$ layers of masked
#   self-attention and feed-forward network, output projection. That is the
#   shape of GPT and most large language models.
# * It has the parts of an encoder layer, with a causal mask; with the same
#   sizes it has fewer than half the parameters of the encoder-decoder here.
# * It is trained by next-token prediction: inputs `ids[:, :-1]`, targets
#   `ids[:, 1:]`, the same teacher forcing as the decoder's.
# * On a small grammar it gets close to the best possible loss in seconds
#   and learns agreement between words several positions apart.
# * Greedy decoding repeats one sentence; sampling trades correctness for
#   variety through the temperature, and top-k and top-p cut the unlikely
#   tail.
#
# ## Next
#
# [Lesson 17](17_dropout_initialisation_and_gelu.ipynb), dropout,
# initialisation and GELU: the scale of the random numbers a model starts
# from, what dropout does to a small model's held-out loss, and the
# activation that GPT-2 uses instead of ReLU.

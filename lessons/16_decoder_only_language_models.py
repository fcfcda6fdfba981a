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
# 6. your own GPT: a character-level model of this course's own prose, as
#    `minitrans train text` trains it, by nanoGPT's recipe, whose choices
#    are set against the paper's; its loss in bits per character, and
#    samples at four temperatures;
# 7. exercises: the inputs and targets of a batch, and top-k filtering.

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
from minitrans.training.optimisation.schedule import cosine_lr, transformer_lr

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
# ## Your own GPT
#
# Readers who come from nanoGPT know its character-level Tiny Shakespeare
# run: a text of about a million characters, the last tenth held out, a
# small GPT trained on random windows of it, on a CPU 1.88 nats per
# character on the held-out text after 2,000 steps (on an A100, with a
# larger model, 1.4697). `minitrans train text --data FILE` is that run,
# with that recipe as its defaults. This part takes it apart, step by
# step and through the library, on a text the repository holds: the prose
# of this course, every Markdown cell of every lesson, this one included.
#
# ### The data: characters, token files, windows
#
# The text first, gathered into one file: `prepare_text` reads a path, as
# the command line does.

# %%
import pathlib
import tempfile

from minitrans_course.course_prose import lesson_prose

prose = lesson_prose(".")  # the Markdown cells of every lesson in this folder
workdir = tempfile.TemporaryDirectory()  # the token files and the run's checkpoints
prose_path = pathlib.Path(workdir.name) / "prose.txt"
prose_path.write_text(prose, encoding="utf-8")
print(f"{len(prose):,} characters, {len(set(prose))} distinct; it starts:")
print(prose[:160])

# %% [markdown]
# `data.text_corpus.prepare_text(path, folder, block_size)` does nanoGPT's
# `prepare.py` and more. It reads the text in chunks (a text may be larger
# than memory), makes the vocabulary of its characters, the four special
# tokens first, then the characters from the most frequent down; writes
# the first 90% of the characters as ids to `train.npy` and the last 10% to
# `valid.npy`; and maps both back as memory-mapped arrays, which read from
# the disk only the windows a batch asks for.

# %%
from minitrans.data.text_corpus import TextWindows, every_window, prepare_text

BLOCK = 64  # characters a window holds, nanoGPT's CPU block_size
corpus = prepare_text(prose_path, pathlib.Path(workdir.name) / "tokens", BLOCK)
decode = corpus.tokenizer.decode  # ids -> text (a CharacterTable)
# (the description names the file; its temporary folder is left out here)
print(corpus.description.replace(f"{workdir.name}{os.sep}", ""))
print(f"vocabulary {len(corpus.vocab)}: {corpus.vocab.tokens[:4]} then "
      f"{''.join(corpus.vocab.tokens[4:40])!r} ...")
print(f"train {type(corpus.train).__name__} of {len(corpus.train):,} ids, "
      f"valid {len(corpus.valid):,}; the first ids {corpus.train[:12].tolist()} = "
      f"{decode(corpus.train[:12])!r}")
print("the held-out part is the text's last tenth:",
      decode(corpus.valid[:500]) == prose[len(corpus.train):len(corpus.train) + 500])

# %% [markdown]
# The held-out tenth is not a random tenth: it is the end of the course,
# lessons 22 and 23 (today's decoders and pretrained weights), whose words
# the first 90% uses less. Held-out numbers below are therefore a little
# worse than on text like the training text (nanoGPT's held-out tenth is
# the end of its text too).
#
# A batch is `batch_size` windows, each starting at a random place `s` of
# the training ids. The model reads `x = ids[s:s+64]` and must predict
# `y = ids[s+1:s+65]`: the same characters shifted by one. So a window
# is 64 predictions at once, each with the characters before it as its
# context (from none to 63), and there is no padding, no `<bos>` and no
# `<eos>`: a window may start in the middle of a word. `TextWindows` draws
# them (`every_window` reads the held-out text in order instead, each
# character predicted once, for evaluations):

# %%
windows = TextWindows(corpus.train, BLOCK, batch_size=12, rng=0)
batch = windows.batch()
x, y = minitrans.to_numpy(batch.tgt_in), minitrans.to_numpy(batch.tgt_out)  # (12, 64) each
print(f"x {x.shape}, y {y.shape}; y is x shifted by one:", bool((x[:, 1:] == y[:, :-1]).all()))
print("x[0]:", repr(decode(x[0])))
print("y[0]:", repr(decode(y[0])))
held_out_windows = sum(b.tgt_in.shape[0] for b in every_window(corpus.valid, BLOCK, 32))
print(f"the held-out text holds {held_out_windows} full windows of {BLOCK}")

# %% [markdown]
# ### What a model must beat
#
# A loss in nats per character becomes **bits per character** when divided
# by $\ln 2$: $-\log_2 p$ of each held-out character, averaged. It is what
# a compressor built on the model (an arithmetic coder) would spend per
# character. Two yardsticks, computed on the same text:
#
# * a uniform guess over the vocabulary: $\log_2 V$ bits;
# * the **unigram model**: each character's frequency in the training
#   text, ignoring all context. Its entropy on the training text, and its
#   cross-entropy on the held-out text, with one added to every count so
#   that a character never seen in training still gets a probability.

# %%
train_ids, valid_ids = np.asarray(corpus.train), np.asarray(corpus.valid)
counts = np.bincount(train_ids, minlength=len(corpus.vocab))
p = counts[counts > 0] / counts.sum()
unigram_entropy = -(p * np.log2(p)).sum()
smoothed = (counts + 1) / (counts.sum() + len(counts))  # add-one: no probability is 0
unigram_held_out = -np.log2(smoothed[valid_ids]).mean()
print(f"uniform over {len(corpus.vocab)} tokens: {np.log2(len(corpus.vocab)):.2f} bits/char")
print(f"unigram: entropy {unigram_entropy:.3f} bits/char on the training text, "
      f"{unigram_held_out:.3f} on the held-out text")

# %% [markdown]
# ### The recipe, against the paper's
#
# The model and its training are nanoGPT's (GPT-2's architecture), which
# differ from the 2017 paper's in almost every choice:
#
# | | the paper (2017) | GPT-2 and nanoGPT: `train text` | why |
# | --- | --- | --- | --- |
# | Add & Norm | post-norm: LayerNorm(x + F(x)) | pre-norm: x + F(LayerNorm(x)), one LayerNorm at the top | the residual path carries the gradient unchanged to the first layer, so deep stacks train without a long warm-up (lessons 9 and 18) |
# | activation | ReLU | GELU | smooth, with a gradient for negative inputs too (lesson 17) |
# | positions | sinusoidal, fixed | a learned table, one row per position | the paper found the two equal (Table 3, row E) and kept sinusoids for lengths beyond training; a GPT never reads beyond its block |
# | output matrix | tied to the embedding (§3.4) | tied too | one table of V × d_model fewer; lesson 12 |
# | embedding scale | × √d_model | none | with weights of std 0.02 the token and position tables are added at the same scale |
# | biases | b₁ and b₂ in the feed-forward network (eq. 2); minitrans's attention has them too (lesson 7) | none in the linear layers (LayerNorm keeps its shift β) | fewer parameters, a little faster; PaLM reports steadier training of large models without them |
# | optimiser | Adam, no weight decay | AdamW, decay 0.1 on the matrices and tables only | decay keeps weights small; pulling a LayerNorm gain towards 0 or a bias towards 0 has no such use |
# | β₂, ε | 0.98, 1e-9 | 0.99, 1e-8 | smaller batches, noisier gradients: a longer average of their squares |
# | schedule | warm-up 4,000 steps, then 1/√step | warm-up 100 steps, then a cosine down to 1e-4 at the last step | the run's length is known; its last steps are taken at a small rate |
# | initial weights | unstated (minitrans: Xavier) | N(0, 0.02²), residual outputs ÷ √(2N) | the residual stream keeps its size whatever the depth (below) |
# | dropout, label smoothing | 0.1, 0.1 | 0, 0 | a few epochs of a small model hardly over-fit; the loss stays a true cross-entropy |
#
# `training.text_run` holds these choices: `GPT_ARCHITECTURE` the model's,
# `SIZES` two sizes (nanoGPT's CPU model of width 128 and 4 layers, and a
# small one for a small text), `TEXT_DEFAULTS` the training's. Here the
# small one (width 64, 2 layers), to train in seconds:

# %%
import dataclasses

from minitrans.training import text_run
from minitrans.training.optimisation.flat_state import is_decayed

print("architecture:", text_run.GPT_ARCHITECTURE)
print("training:", text_run.TEXT_DEFAULTS["train"])
gpt_config = text_run.text_model_config(len(corpus.vocab), BLOCK, len(corpus.train),
                                        text_run.SIZES["small"])
gpt = minitrans.DecoderOnlyLM(gpt_config, rng=0)
with_biases = minitrans.DecoderOnlyLM(dataclasses.replace(gpt_config, bias=True), rng=0)
print(f"{gpt.num_parameters():,} parameters ({with_biases.num_parameters():,} with biases)")
decayed = [name for name, value, _ in gpt.named_parameters() if is_decayed(name, value, "matrices")]
kept = [name for name, value, _ in gpt.named_parameters()
        if not is_decayed(name, value, "matrices")]
print(f"decayed: {len(decayed)} matrices and tables, e.g. {decayed[:3]}")
print(f"not decayed: {len(kept)} vectors, e.g. {kept[:3]}")

# %% [markdown]
# β₂ averages the squared gradients over about $1/(1 - \beta_2)$ steps:
# 50 at the paper's 0.98, 100 at 0.99. The paper's batches held about
# 25,000 source and 25,000 target tokens; nanoGPT's CPU batch holds
# $12 \times 64 = 768$ characters, whose gradient is far noisier, and the
# longer average keeps the size of Adam's step steadier.
#
# The two schedules over a run of 1,000 steps, the paper's scaled to the
# same peak so that the shapes can be compared:

# %%
STEPS = 1000  # the run below: nanoGPT's CPU run has 2,000
steps = np.arange(1, STEPS + 1)
cosine = [cosine_lr(s, 1e-3, 1e-4, 100, STEPS) for s in steps]
paper = np.array([transformer_lr(s, 64, warmup=100) for s in steps])
paper *= 1e-3 / paper.max()
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(steps, cosine, label="cosine_lr: warm-up 100, cosine to 1e-4")
ax.plot(steps, paper, "--", label="the paper's (transformer_lr), same peak")
ax.set_xlabel("step")
ax.set_ylabel("learning rate")
ax.legend()
plt.show()
print(f"at the last step: cosine {cosine[-1]:.1e}, the paper's {paper[-1]:.1e} "
      f"(peak x sqrt(warm-up / step) = {1e-3 * np.sqrt(100 / STEPS):.1e})")

# %% [markdown]
# ### GPT-2's initial weights, and the residual stream
#
# A pre-norm layer adds its two sub-layers' outputs to the stream,
# $x \leftarrow x + \text{Attn}(\text{LN}(x))$, then
# $x \leftarrow x + \text{FFN}(\text{LN}(x))$: after $N$ layers it holds the
# embedding plus $2N$ outputs. Each sub-layer reads its input through a
# LayerNorm, so it writes about the same amount whatever the stream holds,
# and at the start these outputs are nearly independent: their variances
# add, and the stream's variance grows with depth. GPT-2 draws the last
# matrix of each sub-layer (attention's $W_O$, the feed-forward's $W_2$)
# with a standard deviation $\sqrt{2N}$ times smaller, which divides each
# output's variance by $2N$ and leaves the sum the same for any $N$:
# $2N \cdot \sigma^2 / (2N) = \sigma^2$.
#
# `ModelConfig(init="gpt")` draws these weights. Multiplying those two
# matrices by $\sqrt{2N}$ afterwards undoes the scaling; the stream's
# variance after each layer, for random text, with and without it:

# %%
from minitrans.model.init_schemes import residual_outputs
from minitrans.ops.masks import decoder_mask


def stream_variances(layers, scaled, d_model=128):
    """Var of the residual stream after the embedding and after each layer
    of a freshly drawn GPT of ``layers`` layers (init="gpt"), for random ids."""
    config = minitrans.ModelConfig(vocab_size=100, d_model=d_model, h=4, N=layers,
                                   d_ff=4 * d_model, max_len=32, **text_run.GPT_ARCHITECTURE)
    model = minitrans.DecoderOnlyLM(config, rng=0)
    if not scaled:
        for _, module in model.named_modules():
            if id(module) in residual_outputs(model):  # attention's W_O, the FFN's W_2
                module.params["W"][...] *= np.sqrt(2 * layers)
    ids = minitrans.to_device(np.random.default_rng(1).integers(4, 100, size=(4, 32)))
    mask = decoder_mask(ids, config.pad_id)  # (4, 32, 32): causal
    x = model.embed.forward(ids)  # (4, 32, d_model): token + position
    variances = [float(x.var())]
    for layer in model.decoder.layers:
        x = layer.forward(x, self_mask=mask)
        variances.append(float(x.var()))
    return variances


fig, ax = plt.subplots(figsize=(6, 4))
for layers, colour in ((6, "C0"), (12, "C1"), (24, "C2")):
    for scaled, style in ((True, "-"), (False, "--")):
        variances = stream_variances(layers, scaled)
        label = f"N = {layers}, " + ("÷ √(2N)" if scaled else "without")
        ax.plot(np.arange(layers + 1) / layers, variances, style, color=colour, label=label)
        print(f"{label:<16} variance: embedding {variances[0]:.4f}, top {variances[-1]:.4f}, "
              f"the embedding's share {variances[0] / variances[-1]:.0%}")
ax.set_xlabel("share of the layers passed, l / N")
ax.set_ylabel("variance of the residual stream")
ax.set_yscale("log")
ax.set_title("GPT-2's initial weights, d_model = 128, random ids")
ax.legend(ncol=2, fontsize=8)
plt.show()

# %% [markdown]
# (The horizontal axis is the share of the stack passed, so that stacks of
# every depth end at 1; the vertical one is logarithmic.) Without the
# factor the variance climbs by about the same step at every layer, and a
# model of 24 layers ends with a stream four times that of one of 6. With
# it, every depth ends at about the same variance.
#
# The final LayerNorm rescales the stream before the output either way, so
# what does the size matter? Two things, both set by the depth without the
# scaling. The embedding of the text itself is a third of the top's
# variance with it, whatever $N$, and a few percent or less without it:
# the input is buried under the random sub-layers' sum, and the output
# projection (tied to that same embedding) reads it through that sum. And
# every LayerNorm's backward divides by the standard deviation of its
# input, so a larger stream hands smaller gradients to the sub-layers' own
# weights: a deep model would start with smaller steps than a shallow one.
#
# ### Training
#
# `text_run.new_text_trainer(config, sizes)` is what `minitrans train text`
# calls: it makes the token files in the run's folder, builds the GPT and
# returns a `TextTrainer`, the Trainer of lesson 14 with the recipe above
# (`training.text_recipe.GPTRecipe`). nanoGPT's CPU defaults, except the
# small model and 1,000 steps instead of 2,000; every 100 steps it
# measures the whole held-out text and saves a checkpoint. The fast kernels
# (lesson 1), as `minitrans train` uses them, for the 1,000 steps:

# %%
train_config = text_run.text_train_config(data=str(prose_path), steps=STEPS, eval_every=100,
                                          eval_windows=held_out_windows,
                                          out_dir=str(pathlib.Path(workdir.name) / "run"))
log = []  # the lines the trainer writes: training losses and evaluations
trainer = text_run.new_text_trainer(train_config, text_run.SIZES["small"], progress=False,
                                    log=log.append)
start = time.perf_counter()
with minitrans.using(kernels="fast"):  # 1,000 steps: the fast kernels (lesson 1)
    trainer.fit()
print(f"{STEPS} steps in {time.perf_counter() - start:.0f} s; {trainer.model.num_parameters():,} "
      f"parameters, batches of {train_config.batch_size} x {BLOCK} characters")
held_out_lines = [line for line in log if "held-out" in line]  # one per evaluation
for line in held_out_lines[::3]:  # steps 100, 400, 700, 1000: the loss and a sample
    print(line)

# %%
bits = 1 / np.log(2)  # nats -> bits
evaluations = trainer.evaluations
curve = np.convolve(trainer.history["loss"], np.ones(25) / 25, mode="valid")  # mean of 25
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(np.arange(25, STEPS + 1), curve * bits, linewidth=1,
        label="training batches (mean of 25)")
ax.plot([e["step"] for e in evaluations], [e["bits_per_character"] for e in evaluations], "o-",
        markersize=3, label="held-out text")
ax.axhline(unigram_held_out, color="gray", linestyle=":", label="unigram model, held out")
ax.axhline(1.88 * bits, color="gray", linestyle="--",
           label="nanoGPT, Tiny Shakespeare, CPU (another text)")
ax.set_ylim(0, 7)
ax.set_xlabel("training step")
ax.set_ylabel("bits per character")
ax.set_title("A GPT of the course's prose")
ax.legend()
plt.show()
best = trainer.best_evaluation()
print(f"held-out: {best['loss']:.3f} nats = {best['bits_per_character']:.3f} bits per character "
      f"at step {best['step']}; unigram {unigram_held_out:.3f} bits")

# %% [markdown]
# ### Samples
#
# `decoding.generate` continues a prompt, here without an end token
# (`eos_id=None`, a text has none) and with at most 64 characters in all,
# the model's block. Three samples at each temperature, from the trained
# weights (`trainer.model`):

# %%
prompt = "The attention "
prompt_ids = minitrans.to_device(np.tile(corpus.tokenizer.encode(prompt).astype(np.int64),
                                         (3, 1)))  # (3, 14): three rows of the same prompt
for temperature in (0.5, 0.8, 1.0, 1.5):
    new = decoding.generate(trainer.model, prompt_ids, BLOCK - len(prompt), eos_id=None,
                            strategy="sample", temperature=temperature, rng=0)
    print(f"temperature {temperature}:")
    for row in minitrans.to_numpy(new):
        print("   ", repr(prompt + decode(row)))

# %% [markdown]
# At 0.5 the model keeps to its likeliest characters: the commonest short
# words (`the`, `of`, `and`) again and again, between word-like strings.
# At 0.8 and 1.0 it samples nearer its own distribution: more varied
# strings, spaces, line breaks and Markdown (stars, backticks, dollars) in
# plausible places, the shape of the course's prose more than its sense.
# At 1.5 the rare characters come in: formula signs, digits, the Chinese
# of the notes that lesson 0 quotes. A model of 113,000 parameters that
# has read the training text not quite three times ($1{,}000 \times 768$
# characters) knows spelling and the commonest words, not yet grammar.
#
# ### What the number means
#
# Bits per character measure how well a model predicts, and how well it
# would compress: stored as UTF-8 the prose takes 8 bits for most
# characters, a coder that knows only the unigram frequencies needs about
# the unigram's cross-entropy, and one driven by the trained model about
# its held-out bits per character. A general-purpose compressor makes a
# fair comparison: `lzma` may read the training text first, and what the
# held-out part then adds to its output is the held-out text's cost:

# %%
import lzma

train_text, held_out_text = prose[:len(corpus.train)], prose[len(corpus.train):]
alone = len(lzma.compress(train_text.encode()))
together = len(lzma.compress((train_text + held_out_text).encode()))
lzma_bits = 8 * (together - alone) / len(held_out_text)
for name, value in (("uniform guess", np.log2(len(corpus.vocab))),
                    ("unigram", unigram_held_out), ("lzma, after the training text", lzma_bits),
                    ("the trained GPT", best["bits_per_character"])):
    print(f"{name:<30} {value:5.2f} bits per held-out character  "
          f"(perplexity 2^bits = {2 ** value:5.1f})")

# %% [markdown]
# The GPT beats the unigram model by more than a bit per character:
# that is what the 63 characters before each one are worth to it after
# 1,000 steps. `2 ** bits` is the perplexity per character (lesson 18): the
# number of equally likely characters the model is, on average, as unsure
# as.
#
# `lzma` does better than our GPT, and the reason is instructive. It looks
# back over the whole training text and copies any string it has seen
# before, and this course repeats itself: names such as `DecoderOnlyLM`,
# formulas, whole phrases. A string of twenty characters copied from far
# back costs it a few bytes. Our GPT sees only the 63 characters before,
# has 113,000 parameters and trained for some seconds: it has learnt
# spelling and short words, not the text's long repeats. A larger model,
# trained longer and with a longer block, closes that gap, and it is the
# held-out number that tells. nanoGPT's 1.88 nats on Tiny Shakespeare are
# 2.71 bits per character, its 1.4697 on the A100 2.12 bits: another text,
# and larger models, batches or runs, so the numbers are not comparable to
# ours, only of the same kind. To go further from the command line:
#
# ```bash
# minitrans train text --data prose.txt --steps 5000 --out runs/prose
# minitrans generate --checkpoint runs/prose/best.npz "The attention "
# ```

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
# * A GPT of any text: its characters as the vocabulary, the last tenth
#   held out, random windows with targets shifted by one, and nanoGPT's
#   recipe (pre-norm, GELU, learned positions, no biases, AdamW on the
#   matrices, a cosine schedule, GPT-2's initial weights scaled by
#   $1/\sqrt{2N}$, which keep the residual stream's variance whatever the
#   depth); its held-out loss in bits per character, against the unigram
#   model's.
#
# ## Next
#
# [Lesson 17](17_dropout_initialisation_and_gelu.ipynb), dropout,
# initialisation and GELU: the scale of the random numbers a model starts
# from, what dropout does to a small model's held-out loss, and the
# activation that GPT-2 uses instead of ReLU.

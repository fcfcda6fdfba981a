# %% [markdown]
# # Lesson 3: Tokens and embeddings
#
# A Transformer never sees text. The text is cut into **tokens**, each token
# is replaced by an integer **id** from a fixed vocabulary, and each id picks
# a learned vector from an **embedding** table (§3.4 of the paper). Those
# vectors are what attention compares.
#
# In this lesson:
#
# 1. three ways to cut text into tokens: characters, words and sub-words;
# 2. byte-pair encoding (the paper's sub-words, §5.1), ten-odd merges by hand;
# 3. `minitrans.data.Tokenizer` and `Vocab`: text to ids and back;
# 4. the embedding table, `minitrans.Embedding`: a lookup forward, a
#    scatter-add backward, and a gradient check;
# 5. why the embeddings are multiplied by $\sqrt{d_\text{model}}$;
# 6. exercises: one BPE merge, and the embedding's backward, written by you.

# %%
import collections
import math

import matplotlib.pyplot as plt
import numpy as np

import minitrans
from minitrans.data import Tokenizer, Vocab

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)

# A tiny corpus for the whole lesson.
corpus = [
    "the slower runner ran slowly",
    "the faster runner runs faster",
    "runners are running slower than walkers",
    "the walker walks slowly and the runner runs",
    "a fast walker is slower than a slow runner",
]

# %% [markdown]
# **You are here**: the two embeddings at the bottom of Figure 1, where token
# ids become vectors of $d_\text{model}$ numbers. The drawing is the paper's
# base model (Table 3), made from its `ModelConfig`.

# %%
from minitrans_course.diagrams import draw_architecture

paper_config = minitrans.ModelConfig.preset("base", vocab_size=37000)
_, ax = plt.subplots(figsize=(9, 10))
draw_architecture(paper_config, highlight="embedding", ax=ax)
plt.show()

# %% [markdown]
# ## Characters, words or something in between
#
# The simplest choices are characters and whole words. Each has a cost:
#
# * **characters**: a tiny vocabulary that can spell any word, but long
#   sequences, and attention's cost grows with the square of the length; the
#   model must also learn spelling before meaning.
# * **words**: short sequences, but a huge vocabulary (every form of every
#   word, every name), and a word never seen in training has no id at all.
#
# On our five sentences, a word-level sequence is about five times shorter:

# %%
for level in ("char", "word"):
    tokenizer = Tokenizer(level)
    pieces = [tokenizer.split(sentence) for sentence in corpus]
    print(f"{level:5s}: {sum(map(len, pieces)) / len(pieces):5.1f} tokens per sentence, "
          f"first sentence -> {pieces[0][:8]}")

# %% [markdown]
# The vocabularies are both small here, but they grow very differently with
# more text. For a larger English text, without downloading anything, we use
# minitrans's own documentation: every docstring of the package, lower-cased,
# letters only. As we read further into it, the number of distinct words
# keeps growing (new words keep turning up), while the characters stop at the
# alphabet:

# %%
import importlib
import inspect
import pkgutil
import re

docstrings = []
for info in pkgutil.iter_modules(minitrans.__path__):
    if info.name.startswith("_"):
        continue
    module = importlib.import_module(f"minitrans.{info.name}")
    docstrings.append(inspect.getdoc(module) or "")
    for _, member in inspect.getmembers(module,
                                        lambda m: inspect.isclass(m) or inspect.isfunction(m)):
        if member.__module__ == module.__name__ and inspect.getdoc(member):
            docstrings.append(inspect.getdoc(member))
text_words = re.findall(r"[a-z]+", " ".join(docstrings).lower())    # the text as a list of words

seen_words, seen_chars, new_words, new_chars = set(), set(), [], []
for word in text_words:
    seen_words.add(word)
    seen_chars.update(word)
    new_words.append(len(seen_words))
    new_chars.append(len(seen_chars))
print(f"{len(text_words)} words, {len(seen_words)} distinct words, {len(seen_chars)} distinct "
      f"characters, {sum(map(len, text_words)) / len(text_words):.1f} characters per word")

fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(new_words, label="word vocabulary")
ax.plot(new_chars, label="character vocabulary")
ax.set_xlabel("words of text read")
ax.set_ylabel("distinct tokens seen")
ax.set_title("Vocabulary size as the text grows")
ax.legend()
plt.show()

# %% [markdown]
# **Sub-words** sit in between: frequent words stay whole, rare words are
# spelled from frequent pieces ("slow" + "er"). The paper uses byte-pair
# encoding with a vocabulary of about 37,000 tokens shared by English and
# German, and 32,000 word pieces for English-French (§5.1).
#
# ## Byte-pair encoding, by hand
#
# Byte-pair encoding (BPE; Sennrich et al., 2016) *learns* its sub-words from
# a corpus:
#
# 1. Spell every word as characters, with an end-of-word marker `</w>` (so
#    that "er" at the end of "slower" differs from "er" inside "runners").
# 2. Count every pair of adjacent symbols, weighted by how often the word
#    occurs.
# 3. Merge the most frequent pair into one new symbol, everywhere.
# 4. Repeat 2 and 3 until the vocabulary has the size you want.
#
# The list of merges, in order, *is* the tokeniser. Plain Python is enough:

# %%
word_counts = collections.Counter(word for sentence in corpus for word in sentence.split())
spelling = {word: tuple(word) + ("</w>",) for word in word_counts}   # word -> its symbols


def count_pairs(spelling):
    """How often each pair of adjacent symbols occurs in the corpus."""
    pairs = collections.Counter()
    for word, symbols in spelling.items():
        for left, right in zip(symbols, symbols[1:]):
            pairs[left, right] += word_counts[word]
    return pairs


def merge(symbols, pair):
    """Replace every occurrence of the adjacent pair by one joined symbol."""
    merged, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            merged.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            merged.append(symbols[i])
            i += 1
    return tuple(merged)


def corpus_length(spelling):
    """Total number of symbols needed to write the whole corpus."""
    return sum(len(symbols) * word_counts[word] for word, symbols in spelling.items())


vocabulary = sorted({symbol for symbols in spelling.values() for symbol in symbols})
print(f"start: {len(vocabulary)} symbols {vocabulary}")
print(f"the corpus is {corpus_length(spelling)} symbols long\n")

merges, vocab_sizes, lengths = [], [len(vocabulary)], [corpus_length(spelling)]
for step in range(1, 13):
    pairs = count_pairs(spelling)
    # most frequent; ties alphabetical
    best, count = min(pairs.items(), key=lambda item: (-item[1], item[0]))
    merges.append(best)
    spelling = {word: merge(symbols, best) for word, symbols in spelling.items()}
    vocabulary.append(best[0] + best[1])
    vocab_sizes.append(len(vocabulary))
    lengths.append(corpus_length(spelling))
    print(f"merge {step:2d}: {best[0]!r:7s} + {best[1]!r:7s} -> {best[0] + best[1]!r:9s} "
          f"(seen {count:2d} times)  vocabulary {len(vocabulary)}, corpus {lengths[-1]} symbols")

# %% [markdown]
# Each merge adds one symbol to the vocabulary and shortens the corpus by as
# many symbols as the pair occurred. Pieces that carry meaning appear on
# their own: "er</w>" (a word-final "er"), "run", "runn", "slow".

# %%
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(range(len(lengths)), lengths, "o-", label="corpus length (symbols)")
ax.plot(range(len(vocab_sizes)), vocab_sizes, "s-", label="vocabulary size")
ax.set_xlabel("number of merges")
ax.set_ylabel("count")
ax.set_title("BPE: each merge grows the vocabulary, shortens the text")
ax.legend()
plt.show()

# %% [markdown]
# To tokenise a new word, spell it as characters and apply the learned merges
# in the order they were learned. Words never seen in training still get
# tokens, from pieces that were:

# %%
def bpe_tokenise(word, merges):
    symbols = tuple(word) + ("</w>",)
    for pair in merges:
        symbols = merge(symbols, pair)
    return list(symbols)


for word in ["slower", "slowest", "runners", "sprinter"]:
    seen = "seen" if word in word_counts else "new "
    print(f"{word:9s} ({seen}) -> {bpe_tokenise(word, merges)}")

# %% [markdown]
# Real tokenisers learn tens of thousands of merges from millions of
# sentences, and many start from the 256 possible bytes rather than from
# characters, so that no text is ever unknown. minitrans learns them too:
# `minitrans.data.learn_subwords(texts, num_merges)` gives a `Tokenizer("bpe")`, with the
# merges of `minitrans/data/bpe.py`; most toy tasks of this course use the
# character and word levels.
#
# ## From tokens to ids: `Tokenizer` and `Vocab`
#
# `Tokenizer("word")` splits on whitespace, `Tokenizer("char")` into
# characters; `join` undoes `split`. `Vocab.build` counts the tokens of a
# corpus and numbers them, most frequent first. Four special tokens always
# come first, with fixed ids: `<pad>` = 0 (fills short sequences of a batch),
# `<bos>` = 1 and `<eos>` = 2 (begin and end of a sentence), `<unk>` = 3 (any
# token missing from the vocabulary).

# %%
words = Tokenizer("word")
vocab = Vocab.build([words.split(sentence) for sentence in corpus])
print("vocabulary size:", len(vocab))
print("first ids:", {token: i for i, token in enumerate(vocab.tokens[:10])})

sentence = "the slow runner walks faster than the sprinter"
ids = vocab.encode(words.split(sentence))
print("\nids:      ", ids)
print("decoded:  ", words.join(vocab.decode(ids)))

# %% [markdown]
# "sprinter" never occurs in the corpus, so it became id 3, `<unk>`: a
# word-level vocabulary loses it. A character-level vocabulary has no such
# problem, at the price of longer sequences:

# %%
chars = Tokenizer("char")
char_vocab = Vocab.build([chars.split(sentence) for sentence in corpus])
char_ids = char_vocab.encode(chars.split("sprinter"))
print("character vocabulary size:", len(char_vocab))
print("'sprinter' ->", char_ids, "->", repr(chars.join(char_vocab.decode(char_ids))))

# %% [markdown]
# (The letter "p" is not in our small corpus, so even here it is `<unk>`;
# with byte-level tokens that cannot happen.)
#
# ## The embedding: a trainable lookup table
#
# An embedding is a matrix $W_E$ of shape $(V, d_\text{model})$, one row of
# $d_\text{model}$ learned numbers per token of a vocabulary of size $V$. For
# ids of shape $(B, T)$ the forward looks up one row per id, and minitrans
# multiplies it by $\sqrt{d_\text{model}}$ as the paper does (§3.4; the next
# section explains why):
#
# $$y_{b,t} = \sqrt{d_\text{model}}\; W_E[\,\text{ids}_{b,t}\,], \qquad
# (B, T) \to (B, T, d_\text{model}).$$
#
# A lookup is a matrix product in disguise: with $X$ the one-hot matrix of the
# ids, of shape $(T, V)$, $X W_E$ picks the same rows. The lookup is simply
# much cheaper than multiplying by a matrix of zeros.

# %%
d_model = 8
embedding = minitrans.Embedding(len(vocab), d_model, rng=0)
print("W_E:", embedding.params["W_E"].shape, "= (vocab_size, d_model)")

ids = minitrans.from_host(
    np.array([vocab.encode(words.split("the runner runs and the walker walks"))]))  # (1, 7)
y = embedding.forward(ids)
print("ids:", ids.shape, "->", "y:", y.shape)

W_E = minitrans.to_numpy(embedding.params["W_E"])
ids_host = minitrans.to_numpy(ids)
one_hot = np.eye(len(vocab))[ids_host[0]]                   # (7, V)
print("y == sqrt(d_model) * W_E[ids]:   ",
      np.allclose(minitrans.to_numpy(y)[0], math.sqrt(d_model) * W_E[ids_host[0]]))
print("y == sqrt(d_model) * one_hot @ W_E:",
      np.allclose(minitrans.to_numpy(y)[0], math.sqrt(d_model) * one_hot @ W_E))

# %% [markdown]
# ### The backward: a scatter-add
#
# Only the looked-up rows took part in the forward, so only they get a
# gradient. Row $v$ of $\partial L / \partial W_E$ collects the upstream
# gradient of **every** position where token $v$ appears:
#
# $$\frac{\partial L}{\partial W_E[v]} = \sqrt{d_\text{model}}
#   \sum_{(b,t):\ \text{ids}_{b,t} = v} \frac{\partial L}{\partial y_{b,t}} .$$
#
# (In one-hot form this is $X^\top \frac{\partial L}{\partial y}$.) Our
# sentence has "the" twice, at positions 0 and 4, so its row gets the sum of
# two gradients. The ids are integers and get no gradient: `backward`
# returns `None`.

# %%
rng = np.random.default_rng(0)
dy = rng.standard_normal(y.shape)                          # (1, 7, d_model) upstream gradient
embedding.zero_grad()
returned = embedding.backward(minitrans.from_host(dy))
grad = minitrans.to_numpy(embedding.grads["W_E"])

the = vocab.encode(["the"])[0]
print("backward returned:", returned)
print("positions of 'the':", np.flatnonzero(ids_host[0] == the))
expected_row = math.sqrt(d_model) * (dy[0, 0] + dy[0, 4])
print("row of 'the' == sqrt(d_model) * (dy[0] + dy[4]):", np.allclose(grad[the], expected_row))
print("equals sqrt(d_model) * one_hot.T @ dy:",
      np.allclose(grad, math.sqrt(d_model) * one_hot.T @ dy[0]))
print("rows with a nonzero gradient:", np.flatnonzero(np.abs(grad).sum(axis=1)).tolist(),
      "= the ids used:", sorted(set(ids_host[0].tolist())))

# %% [markdown]
# A classic bug hides here. NumPy's `grad[ids] += rows` does **not** add up
# repeated ids: it reads all rows, adds, and writes back, so for a repeated id
# the last write wins and the other contributions are lost. `np.add.at`
# (`xp.add.at` in minitrans, also on CuPy) accumulates them. That one line
# is `add_rows_at_reference` in `minitrans/layers/embedding.py`; the layer
# runs its fast twin `add_rows_at_fast` by default, the one-hot product
# above for a small vocabulary and `add.at` on the flattened table for a
# large one, the same sums, several times faster (`python
# benchmarks/kernels.py`).

# %%
buggy = np.zeros_like(grad)
buggy[ids_host[0]] += math.sqrt(d_model) * dy[0]           # fancy-index +=: repeated ids overwrite
print("fancy-index += gets the row of 'the' right:", np.allclose(buggy[the], grad[the]))
print("  it kept only the last occurrence:", np.allclose(buggy[the], math.sqrt(d_model) * dy[0, 4]))

# %%
fig, ax = plt.subplots(figsize=(6, 4))
limit = np.abs(grad).max()
image = ax.imshow(grad, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto")
ax.set_yticks(range(len(vocab)), vocab.tokens, fontsize=7)
ax.set_xlabel("feature (0 .. d_model - 1)")
ax.set_ylabel("token (row of W_E)")
ax.set_title("Gradient of W_E for one sentence: only its tokens' rows")
fig.colorbar(image, ax=ax, label="dL/dW_E")
plt.show()

# %% [markdown]
# ## Why multiply by $\sqrt{d_\text{model}}$?
#
# The paper says only that "in the embedding layers, we multiply those
# weights by $\sqrt{d_\text{model}}$" (§3.4). Here is the usual reading. The
# embedding is *added* to the positional encoding of lesson 4, whose entries
# are sines and cosines in $[-1, 1]$, with mean square $\tfrac12$ (each
# $\sin^2 + \cos^2$ pair sums to 1). minitrans initialises $W_E$ from
# $\mathcal{N}(0, 1/d_\text{model})$, a common choice and a convenient one
# when $W_E$ is shared with the output projection (§3.4): a unit-variance
# hidden vector times a row of $W_E$ then gives logits of variance about 1.
# Each row has length about 1 in total. Without the scale, the token's vector would be a small
# perturbation of the position's vector, whose length is
# $\sqrt{d_\text{model}/2}$. With it, each entry has variance 1 and the two
# signals have comparable size.
#
# We measure this at the paper's size, $d_\text{model} = 512$:

# %%
from minitrans.layers.positional import sinusoidal_table

d_model = 512
big = minitrans.Embedding(1000, d_model, rng=0)
unscaled = minitrans.to_numpy(big.params["W_E"])                                  # (1000, 512)
scaled = minitrans.to_numpy(big.forward(minitrans.from_host(np.arange(1000))))    # (1000, 512)
pe = minitrans.to_numpy(sinusoidal_table(1000, d_model))                          # (1000, 512)

for name, table in (("W_E (unscaled)", unscaled), ("sqrt(d_model) * W_E", scaled),
                    ("positional encoding", pe)):
    print(f"{name:22s} mean square of entries {np.mean(table ** 2):.4f}   "
          f"typical row length {np.linalg.norm(table, axis=1).mean():6.2f}")

# %%
fig, ax = plt.subplots(figsize=(6, 4))
bins = np.linspace(-4, 4, 161)
ax.hist(unscaled.ravel(), bins=bins, density=True, histtype="step", linewidth=2,
        label="W_E (unscaled)")
ax.hist(scaled.ravel(), bins=bins, density=True, histtype="step", linewidth=2,
        label=r"$\sqrt{d_{model}}\,W_E$")
ax.hist(pe.ravel(), bins=bins, density=True, histtype="step", linewidth=2,
        label="positional encoding")
ax.set_yscale("log")
ax.set_xlabel("value of an entry")
ax.set_ylabel("density (log scale)")
ax.set_title(r"Entries at $d_{model} = 512$, with and without the scale")
ax.legend()
plt.show()

# %% [markdown]
# Unscaled, the embedding entries are squeezed into a narrow spike (standard
# deviation $1/\sqrt{512} \approx 0.044$) while the positional encoding fills
# $[-1, 1]$; scaled, the embedding entries have standard deviation 1 and
# cover the PE's range and more.
#
# ## Gradient check
#
# The embedding is a layer with a hand-written backward, so we check it. The
# ids repeat token 1 (in the first sequence) to exercise the
# accumulation; only $W_E$ is checked, as ids have no gradient.

# %%
from minitrans.gradcheck import check_layer, format_table
from minitrans.gradcheck import randomise_params

with minitrans.using(dtype="float64"):
    layer64 = minitrans.Embedding(7, 4, rng=0)                         # V = 7, d_model = 4
    randomise_params(layer64, np.random.default_rng(0))
    # (B=2, T=3), token 1 three times
    ids64 = minitrans.from_host(np.array([[1, 2, 1], [3, 1, 0]]))
    print(format_table(check_layer(layer64, ids64)))

# %% [markdown]
# ## Exercises: one BPE merge, and the embedding's backward
#
# **One merge.** Write `my_bpe_merge(words, counts)`: `words` is a list of
# words, each a tuple of symbols such as `("l", "o", "w</w>")`, and
# `counts[i]` is how often word `i` occurs. Return `(pair, merged)`: the
# adjacent pair with the highest count (each word weighted by its count), and
# the list of words with that pair merged into one symbol, left to right.
# Two details decide the answer:
#
# * a pair is counted at every place it occurs, so `("a", "a", "a")` holds
#   `("a", "a")` twice, but merging it gives `("aa", "a")`;
# * among pairs of equal count, take the one that sorts **last** as Python
#   compares tuples of strings, `max` over `(count, pair)`. That is the rule
#   of minitrans's `learn_merges` (`minitrans/data/bpe.py`) and of the
#   authors' `subword-nmt`; the loop above took the first instead, which only
#   changes which of two equally good merges comes first.
#
# The checker tries a word of one symbol, a pair overlapping itself, a tie,
# and random words, against a counting loop of its own.

# %%
from minitrans_course.exercises_embedding import check_bpe_merge, check_embedding_backward


def my_bpe_merge(words, counts):
    # your code here
    return ("", ""), list(words)


check_bpe_merge(my_bpe_merge);

# %% [markdown]
# **The embedding's backward.** Write `my_embedding_backward(ids, dout,
# vocab_size)` for the forward $y = \sqrt{d_\text{model}}\, W_E[\text{ids}]$:
# `ids` is $(B, T)$, `dout` is $(B, T, d_\text{model})$; return
# $\partial L / \partial W_E$, of shape $(V, d_\text{model})$. Repeated ids
# must add up (`np.add.at`, not `+=`), and `<pad>` (id 0) is a token like any
# other: minitrans's `Embedding` has no special padding row, so its row gets
# the sum of `dout` at the padding positions (in the model, the masks and the
# loss make `dout` zero there). The checker tries repeated ids, padding, a batch
# of one, float32 and $d_\text{model} = 16$. The solutions are in
# `solutions/03_tokens_and_embeddings.py`.

# %%
def my_embedding_backward(ids, dout, vocab_size):
    # your code here
    return np.zeros((vocab_size, dout.shape[-1]))


check_embedding_backward(my_embedding_backward);

# %% [markdown]
# ## Summary
#
# * Characters give short vocabularies and long sequences, words the
#   opposite plus unknown words; sub-words (BPE) learn the middle ground by
#   repeatedly merging the most frequent adjacent pair.
# * `Tokenizer` splits text, `Vocab` maps tokens to ids with `<pad>`,
#   `<bos>`, `<eos>`, `<unk>` at 0 to 3; unseen tokens become `<unk>`.
# * An embedding is a $(V, d_\text{model})$ table; the forward is a row lookup
#   (a one-hot product), the backward a scatter-add in which a repeated token
#   accumulates the gradients of all its positions (`np.add.at`, not `+=`).
# * The $\sqrt{d_\text{model}}$ scale turns entries of variance
#   $1/d_\text{model}$ into entries of variance 1, the same size as the
#   positional encodings they are added to.
#
# ## Next
#
# [Lesson 4](04_positional_encoding.ipynb), positional encoding: how the model
# learns where each token is.

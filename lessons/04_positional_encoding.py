# %% [markdown]
# # Lesson 4: Positional encoding
#
# Attention compares every token with every other token, but nothing in it
# says *where* a token is. "dog bites man" and "man bites dog" would look the
# same to it. The paper fixes this by adding to each token's embedding a
# vector that depends only on its position: the sinusoidal **positional
# encoding** (§3.5).
#
# In this lesson:
#
# 1. why self-attention alone ignores order (it is *permutation equivariant*);
# 2. the formula, a picture of it, and its wavelengths;
# 3. why sines and cosines: shifting by $k$ positions is a rotation, the same
#    linear map at every position, and dot products depend only on the
#    distance $k$;
# 4. positions beyond the training length, and `minitrans.PositionalEncoding`
#    with its `max_len`;
# 5. a gradient check, and an exercise: build the table yourself.
#
# This lesson checks identities to about $10^{-12}$, so it works in float64
# throughout.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np

import minitrans
from minitrans.data import Tokenizer, Vocab
from minitrans.layers.positional import sinusoidal_table

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)

minitrans.set_dtype("float64")
print("backend:", minitrans.core.backend.backend_name(), "| default dtype:", minitrans.get_dtype())

# %% [markdown]
# **You are here**: the positional encoding, added to the embeddings before
# the first layer of each stack. The drawing is the paper's base model
# (Table 3), made from its `ModelConfig`.

# %%
from minitrans_course.diagrams import draw_architecture

paper_config = minitrans.ModelConfig.preset("base", vocab_size=37000)
_, ax = plt.subplots(figsize=(9, 10))
draw_architecture(paper_config, highlight="positional", ax=ax)
plt.show()

# %% [markdown]
# ## Attention alone has no sense of order
#
# Take the embeddings of "dog bites man" and of "man bites dog" and pass each
# through one self-attention layer, `minitrans.MultiHeadAttention` (lesson 7
# opens it up; here it is just a layer from $(B, T, d_\text{model})$ to
# $(B, T, d_\text{model})$).

# %%
d_model = 16
words = Tokenizer("word")
vocab = Vocab.build([["dog", "bites", "man"]])
embedding = minitrans.Embedding(len(vocab), d_model, rng=0)
attention = minitrans.MultiHeadAttention(d_model, h=2, rng=1)


def encode(sentence):
    ids = minitrans.from_host(np.array([vocab.encode(words.split(sentence))]))  # (1, 3)
    return embedding.forward(ids)                                              # (1, 3, d_model)


out_a = minitrans.to_numpy(attention.forward(encode("dog bites man")))[0]   # (3, d_model)
out_b = minitrans.to_numpy(attention.forward(encode("man bites dog")))[0]
for word, i, j in (("dog", 0, 2), ("bites", 1, 1), ("man", 2, 0)):
    print(f"output for {word!r:8s}: same vector in both sentences? "
          f"{np.allclose(out_a[i], out_b[j])}")

# %% [markdown]
# Each word gets the same output vector in both sentences, to rounding: the layer
# cannot tell who bit whom. This holds for any input and any reordering.
# Write a permutation of the $T$ positions as a $(T, T)$ permutation matrix
# $P$. Then for self-attention
#
# $$\text{SelfAttention}(P X) = P\, \text{SelfAttention}(X):$$
#
# permuting the queries permutes the output rows, and permuting the keys and
# values together only reorders the terms of each weighted sum
# $\sum_j \alpha_{ij} v_j$, which does not change it. Such a layer is called
# **permutation equivariant**. The feed-forward network and layer norm act on
# each position separately, so a whole Transformer encoder without position
# information is equivariant too: a bag of vectors.

# %%
rng = np.random.default_rng(0)
x = rng.standard_normal((1, 6, d_model))       # (B, T, d_model)
perm = rng.permutation(6)                       # a reordering of the 6 positions
print("permutation:", perm)

out = minitrans.to_numpy(attention.forward(minitrans.from_host(x)))
out_of_permuted = minitrans.to_numpy(attention.forward(minitrans.from_host(x[:, perm])))
print("max |attn(x[perm]) - attn(x)[perm]|          :",
      f"{np.abs(out_of_permuted - out[:, perm]).max():.1e}")

# %% [markdown]
# Now add a vector that depends on the position, as the model does, before
# the attention. The output of the reordered sequence is no longer the
# reordered output: the layer now sees order.

# %%
positional = minitrans.PositionalEncoding(d_model, max_len=100)
out = minitrans.to_numpy(attention.forward(positional.forward(minitrans.from_host(x))))
out_of_permuted = minitrans.to_numpy(
    attention.forward(positional.forward(minitrans.from_host(x[:, perm]))))
print("with PE: max |attn(x[perm] + PE) - attn(x + PE)[perm]|:",
      f"{np.abs(out_of_permuted - out[:, perm]).max():.2f}",
      f"(outputs are of size ~{np.abs(out).max():.1f})")

# %% [markdown]
# ## The formula (§3.5)
#
# For position $pos = 0, 1, 2, \dots$ and feature pair $i = 0, 1, \dots,
# d_\text{model}/2 - 1$:
#
# $$PE_{(pos,\,2i)} = \sin\!\left(\frac{pos}{10000^{2i/d_\text{model}}}\right), \qquad
# PE_{(pos,\,2i+1)} = \cos\!\left(\frac{pos}{10000^{2i/d_\text{model}}}\right).$$
#
# Both members of a pair use the **same** exponent $2i/d_\text{model}$. Some
# study notes write $10000^{(2i+1)/d_\text{model}}$ in the cosine; that is a
# typo, and it would break the rotation property below, which needs the sine
# and cosine of one pair to share one frequency
# $\omega_i = 10000^{-2i/d_\text{model}}$. Each pair is then a point
# $(\sin \omega_i pos, \cos \omega_i pos)$ going round the unit circle as
# $pos$ grows, fast for small $i$ and slowly for large $i$. The table for
# positions $0 \dots L-1$ has shape $(L, d_\text{model})$; the encoding is
# added to the embeddings, so it has the same width $d_\text{model}$.
#
# `minitrans.layers.positional.sinusoidal_table(max_len, d_model)` computes it; a few
# entries against the formula:

# %%
table = minitrans.to_numpy(sinusoidal_table(100, 64))   # (positions, d_model)
print("shape:", table.shape)
print("PE[0, :6] =", table[0, :6], "(sin 0 = 0, cos 0 = 1)")
pos, i = 7, 3
omega = 10000 ** (-2 * i / 64)
print(f"PE[{pos}, {2 * i}] = {table[pos, 2 * i]:.6f}   sin({pos} * omega_{i}) = "
      f"{math.sin(pos * omega):.6f}")
print(f"PE[{pos}, {2 * i + 1}] = {table[pos, 2 * i + 1]:.6f}   cos({pos} * omega_{i}) = "
      f"{math.cos(pos * omega):.6f}")

# %%
fig, ax = plt.subplots(figsize=(6, 4))
image = ax.imshow(table, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
ax.set_xlabel("feature j (even: sin, odd: cos)")
ax.set_ylabel("position pos")
ax.set_title(r"Positional encoding, $d_{model} = 64$")
fig.colorbar(image, ax=ax, label="PE(pos, j)")
plt.show()

# %% [markdown]
# Read it column by column: the first columns flip between $-1$ and $1$ every
# few positions, the last ones barely change over 100 positions (the sines
# stay near 0, the cosines near 1). Each row, a
# position, is a different pattern of these waves, like the digits of a
# counter whose digits turn at different speeds, but smooth.
#
# ### Wavelengths from $2\pi$ to $10000 \cdot 2\pi$
#
# Pair $i$ repeats after $\lambda_i = 2\pi / \omega_i = 2\pi \cdot
# 10000^{2i/d_\text{model}}$ positions. The exponent $2i/d_\text{model}$
# runs from 0 up to $(d_\text{model} - 2)/d_\text{model}$, so the wavelengths
# form a geometric progression from $2\pi$ up to
# $10000^{(d_\text{model}-2)/d_\text{model}} \cdot 2\pi$. The paper's "from
# $2\pi$ to $10000 \cdot 2\pi$" is the limit for large $d_\text{model}$: the
# longest wavelength approaches it as $d_\text{model}$ grows.

# %%
d_model = 64
pairs = np.arange(d_model // 2)
wavelength = 2 * np.pi * 10000 ** (2 * pairs / d_model)
print(f"shortest: {wavelength[0]:.2f} positions (2 pi = {2 * np.pi:.2f})")
for size in (64, 512, 4096):
    print(f"longest for d_model = {size:4d}: {2 * np.pi * 10000 ** ((size - 2) / size):6.0f} "
          f"positions (10000 * 2 pi = {10000 * 2 * np.pi:.0f})")

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
for j in (0, 8, 20, 40):
    left.plot(table[:, j], ".-" if j == 0 else "-", markersize=3, label=f"feature {j}")
left.set_xlabel("position pos")
left.set_ylabel("PE(pos, j)")
left.set_title("A few columns of the table")
left.legend(loc="lower left", fontsize=8)
right.semilogy(pairs, wavelength, "o", markersize=4)
right.set_xlabel("pair index i (features 2i, 2i+1)")
right.set_ylabel("wavelength (positions)")
right.set_title(r"Wavelengths ($d_{model} = 64$): a geometric progression")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## A shift by $k$ positions is a rotation
#
# The paper chose sinusoids because "for any fixed offset $k$, $PE_{pos+k}$
# can be represented as a linear function of $PE_{pos}$". The angle-addition
# formulas say how. For one pair, with $\theta = \omega_i pos$ and
# $\phi = \omega_i k$:
#
# $$\big(\sin(\theta + \phi),\ \cos(\theta + \phi)\big) =
# \big(\sin\theta,\ \cos\theta\big)
# \begin{pmatrix} \cos\phi & -\sin\phi \\ \sin\phi & \cos\phi \end{pmatrix}.$$
#
# The $2 \times 2$ matrix is a rotation by $\phi$, and it depends on $k$ but
# **not** on $pos$. Put one such block per pair on the diagonal of a
# $(d_\text{model}, d_\text{model})$ matrix $M_k$; then, for row vectors (as
# minitrans writes $xW$),
#
# $$PE_{pos+k} = PE_{pos}\, M_k \quad \text{for every } pos.$$
#
# We build $M_k$ and check it at every position of a 1000-row table:

# %%
def shift_matrix(k, d_model):
    """Block-diagonal M_k with PE[pos + k] = PE[pos] @ M_k (d_model even)."""
    M = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        phi = k * 10000 ** (-2 * i / d_model)
        M[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[math.cos(phi), -math.sin(phi)],
                                               [math.sin(phi), math.cos(phi)]]
    return M


long_table = minitrans.to_numpy(sinusoidal_table(1000, d_model))   # (1000, 64)
for k in (1, 5, 50, 300):
    M_k = shift_matrix(k, d_model)
    predicted = long_table[:-k] @ M_k                                 # rows pos = 0 .. 999 - k
    print(f"k = {k:3d}: max |PE[pos + k] - PE[pos] M_k| over {len(predicted)} positions = "
          f"{np.abs(long_table[k:] - predicted).max():.1e}")

# %%
M_3 = shift_matrix(3, 16)
fig, ax = plt.subplots(figsize=(5, 4))
image = ax.imshow(M_3, cmap="RdBu_r", vmin=-1, vmax=1)
ax.set_xlabel("output feature")
ax.set_ylabel("input feature")
ax.set_title(r"$M_3$ for $d_{model} = 16$: one rotation per pair")
fig.colorbar(image, ax=ax, label="entry of $M_3$")
plt.show()

# %% [markdown]
# The blocks at the top left turn by large angles (fast pairs), those at the
# bottom right by almost nothing (their $2 \times 2$ block is close to the
# identity). $M_k$ is orthogonal, and $M_{-k} = M_k^\top$: a shift back is
# the inverse rotation. Since a layer applies linear maps to its inputs, this
# gives the model an easy way to relate a position to the one $k$ places
# away, whatever the absolute positions.
#
# ## Dot products depend only on the distance
#
# For the same reason, the dot product of two encodings depends only on how
# far apart they are:
#
# $$PE_{pos} \cdot PE_{pos+k} = \sum_i \big[\sin\omega_i pos \, \sin\omega_i(pos+k)
# + \cos\omega_i pos \, \cos\omega_i(pos+k)\big] = \sum_{i} \cos(\omega_i k).$$
#
# So the $(L, L)$ matrix of all dot products, $PE\,PE^\top$, is constant
# along each diagonal:

# %%
gram = table @ table.T                                   # (100, 100): PE[p] . PE[q]
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
image = left.imshow(gram, cmap="viridis")
left.set_xlabel("position q")
left.set_ylabel("position p")
left.set_title(r"$PE_p \cdot PE_q$ ($d_{model} = 64$)")
fig.colorbar(image, ax=left, label="dot product")

offsets = np.arange(0, 60)
for start in (0, 20, 40):
    right.plot(offsets, [table[start] @ table[start + k] for k in offsets], label=f"pos = {start}")
theory = [np.cos(10000 ** (-2 * pairs / 64) * k).sum() for k in offsets]
right.plot(offsets, theory, "k:", linewidth=2, label=r"$\sum_i \cos(\omega_i k)$")
right.set_xlabel("offset k")
right.set_ylabel(r"$PE_{pos} \cdot PE_{pos+k}$")
right.set_title("The same curve from every position")
right.legend(fontsize=8)
plt.tight_layout()
plt.show()

spread = max(np.ptp([table[p] @ table[p + k] for p in range(100 - k)]) for k in range(60))
print(f"largest spread of PE[pos] . PE[pos + k] over pos, for any k < 60: {spread:.1e}")

# %% [markdown]
# The three measured curves and the formula lie on top of each other. The
# largest value, $d_\text{model}/2 = 32$, is at $k = 0$, and the dot
# product falls off with distance (not monotonically). Because
# $\cos(\omega_i k) = \cos(-\omega_i k)$, this similarity is the same a
# distance $k$ ahead and behind: the dot product alone measures distance,
# not direction. The rotation $M_k$ above does know the direction.
#
# How does the curve depend on $d_\text{model}$? Move the slider (it moves in
# the page, or in JupyterLab in a trusted notebook; the picture under it is
# the same figure at three sizes): with more pairs, hence more and longer
# wavelengths, the similarity falls faster from $k = 0$ and stays low for
# longer. The values are divided by $d_\text{model}/2$, so $k = 0$ gives 1.

# %%
from IPython.display import display
from minitrans_course.interactive_figures import positional_offsets_figure

offsets_figure = positional_offsets_figure()
display(offsets_figure)
offsets_figure.static(pyplot=True)
plt.show()

# %% [markdown]
#
# ## Longer sequences than in training
#
# The formula gives a vector for any position, even one never seen in
# training; the paper hoped this "may allow the model to extrapolate to
# sequence lengths longer than the ones encountered during training" (§3.5),
# and found that learned position embeddings gave nearly identical results
# (Table 3, row E). Whether a trained model really generalises to longer
# sequences is an empirical question, but the encodings themselves are
# consistent: a longer table starts with the shorter one, and every position
# gets a different vector.

# %%
short = minitrans.to_numpy(sinusoidal_table(100, 64))
longer = minitrans.to_numpy(sinusoidal_table(5000, 64))
print("table(5000)[:100] == table(100):", np.array_equal(longer[:100], short))

first = longer[:2000]                                   # (2000, 64)
squared = (first ** 2).sum(axis=1)
distances = np.sqrt(np.maximum(squared[:, None] + squared[None, :] - 2 * first @ first.T, 0))
np.fill_diagonal(distances, np.inf)
print("smallest distance between two different positions among the first 2000: "
      f"{distances.min():.3f}")

# %% [markdown]
# `minitrans.PositionalEncoding(d_model, max_len)` computes the table once,
# for positions $0 \dots \texttt{max_len} - 1$ (default 5000), and keeps it as
# a buffer (a constant array that moves with the layer, not a parameter). Its
# forward adds row $t$ of the table to position $t$ of every sequence:
#
# $$y_{b,t} = x_{b,t} + PE_{\,\text{offset} + t},
#   \qquad (B, T, d_\text{model}) \to (B, T, d_\text{model}),$$
#
# where `offset` (default 0) is for decoding one token at a time: the token
# at position 7 gets row 7 even when it is the only one passed in. A
# sequence that runs past `max_len` is a clear error, not a silent wrap or a
# broadcasting failure; build the layer with a larger `max_len` if you need
# longer sequences.

# %%
layer = minitrans.PositionalEncoding(64, max_len=50)
print("buffers:", {name: value.shape for name, value in layer.buffers.items()}, "| parameters:",
      layer.params)

x = minitrans.from_host(np.zeros((2, 10, 64)))                      # (B, T, d_model)
y = minitrans.to_numpy(layer.forward(x))
print("zeros + PE gives the table's rows:", np.array_equal(y[1], short[:10]))
one_token = minitrans.to_numpy(layer.forward(minitrans.from_host(np.zeros((1, 1, 64))), offset=7))
print("offset=7 adds row 7:", np.array_equal(one_token[0, 0], short[7]))

try:
    layer.forward(minitrans.from_host(np.zeros((1, 60, 64))))
except ValueError as error:
    print("ValueError:", error)

# %% [markdown]
# ## Gradient check
#
# Adding a constant does not change a derivative, so the backward passes the
# gradient through unchanged: $\partial L/\partial x = \partial L/\partial y$.
# There are no parameters to learn. The check uses an odd $d_\text{model} = 5$,
# whose last feature is a sine without a cosine partner.

# %%
from minitrans.gradcheck import check_layer, format_table

with minitrans.using(dtype="float64"):
    layer64 = minitrans.PositionalEncoding(5, max_len=8)
    # (B, T, d_model)
    x64 = minitrans.from_host(np.random.default_rng(0).standard_normal((2, 3, 5)))
    print(format_table(check_layer(layer64, x64)))

# %% [markdown]
# ## Exercise: build the table
#
# Write `my_positional_encoding(max_len, d_model)`, returning the
# $(\texttt{max_len}, d_\text{model})$ NumPy array of the formula above. The
# checker tries several sizes, among them an **odd** $d_\text{model}$ (for 17,
# features $0, 2, \dots, 16$ are sines and $1, 3, \dots, 15$ cosines, so the
# last feature is a sine with no partner), against a table it fills entry by
# entry with `math.sin` and `math.cos`. The solution is in
# `solutions/04_positional_encoding.py`.
#
# <details><summary>Hint (it may give the solution away: try first)</summary>
#
# `np.arange(max_len)[:, None]` gives a column of positions; for feature $j$
# the exponent uses $2i = j - (j \bmod 2)$.
#
# </details>

# %%
from minitrans_course.exercises import check_positional_encoding


def my_positional_encoding(max_len, d_model):
    # your code here
    return np.zeros((max_len, d_model))


# %%
result = check_positional_encoding(my_positional_encoding)

# %% [markdown]
# ## Summary
#
# * Self-attention is permutation equivariant: without position information,
#   a Transformer sees a bag of vectors.
# * The sinusoidal encoding gives pair $i$ the frequency
#   $\omega_i = 10000^{-2i/d_\text{model}}$, with the same exponent for the sine
#   and the cosine; the wavelengths run geometrically from $2\pi$ to almost
#   $10000 \cdot 2\pi$.
# * A shift by $k$ is a rotation of every pair, the same linear map $M_k$ at
#   every position; the dot product $PE_{pos} \cdot PE_{pos+k}$ depends only
#   on $k$.
# * The formula defines every position, but `PositionalEncoding` stores
#   `max_len` rows and refuses longer sequences with a clear error; its
#   backward passes the gradient through.
#
# ## Next
#
# [Lesson 5](05_scaled_dot_product_attention.ipynb), scaled dot-product
# attention: queries, keys and values.

# %% [markdown]
# # Lesson 2: Softmax, similarity and the $\sqrt{d_k}$ in attention
#
# Attention (§3.2.1 of the paper) is built from two small ideas: compare a
# query with every key by a **dot product**, and turn the comparison scores
# into weights that are positive and sum to one with a **softmax**:
#
# $$\text{Attention}(Q, K, V) = \text{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V.$$
#
# This lesson looks at those two ideas on their own, before lesson 5 puts them
# together. In this lesson:
#
# 1. softmax, and why every implementation subtracts the maximum first;
# 2. dot product versus cosine similarity, on small vectors;
# 3. why the scores are divided by $\sqrt{d_k}$: we *measure* how the dot
#    product of random vectors grows with $d_k$, and what that does to the
#    softmax and its gradient;
# 4. an exercise: write softmax yourself.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np

import minitrans
from minitrans.ops.softmax import softmax, softmax_backward

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)

print("backend:", minitrans.core.backend.backend_name(), "| default dtype:", minitrans.get_dtype())

# %% [markdown]
# ## Softmax
#
# Softmax maps a vector of $n$ real scores ("logits") $z$ to a probability
# distribution over the $n$ entries:
#
# $$\text{softmax}(z)_i = \frac{e^{z_i}}{\sum_{j=1}^{n} e^{z_j}}.$$
#
# Every output is positive and they sum to one. The exponential keeps the
# order of the scores and stretches their differences: a score one unit higher
# gets $e \approx 2.7$ times the weight. In minitrans, `softmax(z)` works on
# the **last axis** of an array of any shape, so scores of shape
# $(B, T_q, T_k)$ become, row by row, $T_q$ distributions over the $T_k$ keys.

# %%
z = np.array([2.0, 1.0, 0.0, -1.0])
p = softmax(z)
print("z         =", z)
print("softmax(z) =", p.round(4), "| sum =", p.sum())
print("ratio of the first two weights:", p[0] / p[1], "= e^1 =", math.e)

# %% [markdown]
# ### Why subtract the maximum
#
# Written literally, the formula fails on large scores. A float64 number cannot
# exceed about $1.8 \times 10^{308}$, and $e^{710}$ already does, so
# $e^{1000}$ becomes `inf`, and `inf / inf` is `nan` (not a number). Very
# negative scores fail the other way: $e^{-1000}$ rounds to 0, and $0/0$ is
# `nan` too. (NumPy warns about both; we silence the warnings to print the
# results.)

# %%
def naive_softmax(z):
    e = np.exp(z)
    return e / e.sum()


large = np.array([1000.0, 999.0, 998.0])
with np.errstate(over="ignore", invalid="ignore", under="ignore"):
    print("exp(z)               =", np.exp(large))
    print("naive softmax(z)     =", naive_softmax(large))
    print("naive softmax(-z)    =", naive_softmax(-large))

# %% [markdown]
# The cure is an identity: adding the same constant $c$ to every score does not
# change the softmax, because $e^{c}$ cancels between numerator and
# denominator:
#
# $$\frac{e^{z_i - c}}{\sum_j e^{z_j - c}} = \frac{e^{-c}\,e^{z_i}}{e^{-c}\sum_j e^{z_j}}
#   = \text{softmax}(z)_i .$$
#
# With $c = \max_j z_j$ the largest exponent is $e^0 = 1$, so nothing
# overflows, and the denominator is at least 1, so nothing divides by zero.
# `minitrans.ops.softmax.softmax` does exactly this, in two lines that read
# as the equation (its reference version; the attention layers run a fast
# one beside it, `softmax_in_place`, met in lesson 5). The scores
# $[1000, 999, 998]$ behave like $[0, -1, -2]$:

# %%
print("stable softmax(z)    =", softmax(large).round(4))
print("stable softmax(-z)   =", softmax(-large).round(4))
print("softmax([0, -1, -2]) =", softmax(np.array([0.0, -1.0, -2.0])).round(4))

# %% [markdown]
# ### How softmax passes gradients back
#
# Later lessons need the derivative of softmax. With $y = \text{softmax}(z)$,
#
# $$\frac{\partial y_i}{\partial z_j} = y_i(\delta_{ij} - y_j),
# \qquad\text{so the Jacobian is } J = \operatorname{diag}(y) - y y^\top,$$
#
# and for an upstream gradient $\partial L/\partial y$ the backward is
# $\partial L/\partial z_i =$
# $y_i\left(\partial L/\partial y_i - \sum_j y_j\, \partial L/\partial y_j\right)$,
# which is `minitrans.ops.softmax.softmax_backward(y, dy)`, one line:
# `y * (dy - (dy * y).sum(axis, keepdims=True))` (attention's backward runs
# `softmax_backward_in_place` beside it, the same numbers written over `dy`).
# Keep one consequence in
# mind for later: if $y$ is close to one-hot (one $y_i \approx 1$, the rest
# $\approx 0$), every entry $y_i(\delta_{ij} - y_j)$ is close to 0, and almost
# no gradient reaches the scores.
#
# A quick numerical check of this formula, with the central differences of
# lesson 1 (float64, random upstream gradient):

# %%
from minitrans.gradcheck import numeric_gradient, relative_error

rng = np.random.default_rng(0)
z = rng.standard_normal((3, 5))      # 3 rows of 5 scores
dy = rng.standard_normal((3, 5))     # upstream gradient dL/dy


def loss():
    return float((softmax(z) * dy).sum())


analytic = softmax_backward(softmax(z), dy)
numeric = numeric_gradient(loss, z)
print("relative error of softmax_backward:", f"{relative_error(analytic, numeric):.1e}")

# %% [markdown]
# ## Comparing vectors: dot product and cosine similarity
#
# Attention needs a number that says how well a query $q$ matches a key $k$,
# both vectors of $d_k$ numbers. Two common choices:
#
# $$q \cdot k = \sum_{i=1}^{d_k} q_i k_i = \lVert q\rVert\,\lVert k\rVert \cos\theta,
# \qquad \cos\theta = \frac{q \cdot k}{\lVert q\rVert\,\lVert k\rVert} \in [-1, 1],$$
#
# where $\theta$ is the angle between them. Cosine similarity only looks at the
# direction; the dot product also grows with the lengths. A worked example with
# $a = (1, 2, 2)$, whose length is 3:

# %%
def cosine(u, v):
    return float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))


a = np.array([1.0, 2.0, 2.0])
others = {
    "b = 2a (same direction, longer)": 2 * a,
    "c = (2, -2, 1) (perpendicular)": np.array([2.0, -2.0, 1.0]),
    "d = -a (opposite)": -a,
    "e = (3, 0, 0)": np.array([3.0, 0.0, 0.0]),
}
print(f"{'vector':34s} {'a . v':>7s} {'cos':>7s}")
for name, v in others.items():
    print(f"{name:34s} {a @ v:7.2f} {cosine(a, v):7.3f}")

# %% [markdown]
# Doubling $b$ again would double $a \cdot b$ and leave the cosine at 1.
# The Transformer uses the plain dot product: it is one matrix product for all
# pairs at once, and the lengths of the learned queries and keys are free to
# carry meaning too (a query can become "sharper" by growing). For $T_q$
# queries and $T_k$ keys stacked as rows, $Q$ of shape $(T_q, d_k)$ and $K$ of
# shape $(T_k, d_k)$, all the scores are
#
# $$S = QK^\top, \quad (T_q, d_k)(d_k, T_k) \to (T_q, T_k),$$
#
# and a softmax over each row turns them into attention weights:

# %%
Q = np.array([[1.0, 2.0, 2.0],        # 2 queries, d_k = 3
              [0.0, 1.0, -1.0]])
K = np.array([[2.0, 4.0, 4.0],        # 3 keys
              [2.0, -2.0, 1.0],
              [0.0, 0.0, 1.0]])
S = Q @ K.T
print("scores S = Q K^T, shape", S.shape, "\n", S)
print("weights softmax(S), each row sums to 1:\n", softmax(S).round(4))

# %% [markdown]
# The first query's scores are $[18, 0, 2]$: a gap of 16 gives the first key
# all the weight, to four decimals. Large scores make the softmax behave like
# a hard "pick the maximum". That is the problem of the next section.
#
# ## Why attention divides by $\sqrt{d_k}$
#
# The paper (§3.2.1 and its footnote 4) argues: suppose the components of $q$
# and $k$ are independent random numbers with mean 0 and variance 1. Each
# product $q_i k_i$ then has mean 0 and variance
# $E[q_i^2]\,E[k_i^2] = 1$, and the variance of a sum of independent terms is
# the sum of their variances:
#
# $$\operatorname{Var}(q \cdot k) = \sum_{i=1}^{d_k} \operatorname{Var}(q_i k_i) = d_k .$$
#
# So the typical score grows like $\sqrt{d_k}$: about 8 for the paper's
# $d_k = 64$, 32 for $d_k = 1024$. Dividing by $\sqrt{d_k}$ brings the
# variance back to 1 whatever the size. Rather than trust the algebra, we
# measure it: for each $d_k$ from 4 to 1024, 10,000 random pairs $(q, k)$.

# %%
rng = np.random.default_rng(0)
sizes = [4, 8, 16, 32, 64, 128, 256, 512, 1024]
raw_var, scaled_var = [], []
for d_k in sizes:
    q = rng.standard_normal((10_000, d_k))    # 10,000 queries, unit-variance components
    k = rng.standard_normal((10_000, d_k))    # 10,000 keys
    dots = (q * k).sum(axis=1)                # (10000,): one dot product per pair
    raw_var.append(dots.var())
    scaled_var.append((dots / math.sqrt(d_k)).var())
    print(f"d_k = {d_k:5d}: Var(q.k) = {raw_var[-1]:7.1f}   Var(q.k / sqrt(d_k)) = "
          f"{scaled_var[-1]:.3f}")

# %%
fig, ax = plt.subplots(figsize=(6, 4))
ax.loglog(sizes, raw_var, "o-", label=r"measured Var$(q\cdot k)$")
ax.loglog(sizes, sizes, "k--", linewidth=1, label=r"$d_k$ (theory)")
ax.loglog(sizes, scaled_var, "s-", label=r"measured Var$(q\cdot k/\sqrt{d_k})$")
ax.set_xscale("log", base=2)
ax.set_xlabel(r"$d_k$ (components of $q$ and $k$)")
ax.set_ylabel("variance of the score")
ax.set_title("Dot products of random vectors: variance grows like $d_k$")
ax.legend()
plt.show()

# %% [markdown]
# The measured variance lies on the line $\operatorname{Var} = d_k$, and after
# the division it stays at 1 for every size.
#
# ### What large scores do to the softmax
#
# Why would a large variance hurt? Multiply a fixed set of scores by a growing
# factor, as a growing $d_k$ does: the softmax moves from nearly uniform to
# nearly one-hot.

# %%
scores = np.array([1.0, 0.5, 0.0, -0.3, -1.0])
factors = [1, 4, 16]
fig, ax = plt.subplots(figsize=(6, 4))
width = 0.25
for n, factor in enumerate(factors):
    ax.bar(np.arange(len(scores)) + (n - 1) * width, softmax(factor * scores), width,
           label=f"softmax({factor} x scores)")
ax.set_xticks(range(len(scores)), [f"key {j}\n({s:+.1f})" for j, s in enumerate(scores)])
ax.set_xlabel("key (its score)")
ax.set_ylabel("attention weight")
ax.set_title("The same scores, multiplied: softmax turns one-hot")
ax.legend()
plt.show()

# %% [markdown]
# Dividing the scores by a *temperature* $T$ is the same as multiplying them
# by $1/T$: move the slider below (a figure drawn in the page; in JupyterLab
# it moves only in a trusted notebook, one you ran yourself) and watch the
# same five logits go from one-hot ($T = 0.1$) to nearly uniform ($T = 10$).
# The picture under it is the same figure at three temperatures, for viewers
# that do not run scripts.

# %%
from IPython.display import display
from minitrans_course.interactive_figures import scaled_scores_figure, softmax_temperature_figure

temperature_figure = softmax_temperature_figure([2.0, 1.0, 0.5, 0.0, -1.0])
display(temperature_figure)
temperature_figure.static(pyplot=True)
plt.show()

# %% [markdown]
# A one-hot softmax is bad for learning, because its Jacobian
# $\operatorname{diag}(y) - yy^\top$ is then nearly zero (see above): the
# gradient that should tell $W_Q$ and $W_K$ how to change the scores
# vanishes. The paper puts it as "pushing the softmax function into regions
# where it has extremely small gradients".
#
# We measure both effects for one query against $T_k = 10$ random keys, 2,000
# times per $d_k$, with and without the division by $\sqrt{d_k}$: the largest
# attention weight of each row, and the size of the softmax's Jacobian (its
# Frobenius norm $\lVert J\rVert_F$, built column by column with
# `softmax_backward`). We report the median over the 2,000 rows.

# %%
def jacobian_norm(P):
    """Frobenius norm of diag(p) - p p^T for each row p of P (N, T) -> (N,)."""
    T = P.shape[-1]
    # (N, T, T): J applied to each unit vector
    columns = softmax_backward(P[:, None, :], np.eye(T)[None])
    return np.sqrt((columns ** 2).sum(axis=(1, 2)))


rng = np.random.default_rng(1)
T_k, rows = 10, 2000
results = {"without 1/sqrt(d_k)": ([], []), "with 1/sqrt(d_k)": ([], [])}
for d_k in sizes:
    q = rng.standard_normal((rows, 1, d_k))      # (rows, 1, d_k): one query per row
    K = rng.standard_normal((rows, T_k, d_k))    # (rows, T_k, d_k)
    S = (q @ K.swapaxes(1, 2))[:, 0, :]          # (rows, T_k) raw scores
    for name, scores_used in (("without 1/sqrt(d_k)", S), ("with 1/sqrt(d_k)", S / math.sqrt(d_k))):
        P = softmax(scores_used)
        results[name][0].append(np.median(P.max(axis=1)))
        results[name][1].append(np.median(jacobian_norm(P)))

print(f"{'d_k':>5s} | {'largest weight':>29s} | {'Jacobian norm':>27s}")
print(f"{'':5s} | {'without':>14s} {'with':>14s} | {'without':>13s} {'with':>13s}")
for n, d_k in enumerate(sizes):
    without, with_ = results["without 1/sqrt(d_k)"], results["with 1/sqrt(d_k)"]
    print(f"{d_k:5d} | {without[0][n]:14.4f} {with_[0][n]:14.4f} | {without[1][n]:13.2e} "
          f"{with_[1][n]:13.2e}")
shrink = without[1][0] / without[1][-1]  # the unscaled Jacobian, d_k = 4 against 1024
print(f"\nwithout the scaling the Jacobian norm shrinks {shrink:,.0f}-fold from d_k = 4 to "
      f"1024: {np.log10(shrink):.1f} orders of magnitude")

# %%
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
for name, (largest, grad) in results.items():
    left.plot(sizes, largest, "o-", label=name)
    right.plot(sizes, grad, "o-", label=name)
left.set_xscale("log", base=2)
right.set_xscale("log", base=2)
right.set_yscale("log")
left.set_xlabel("$d_k$")
left.set_ylabel("median largest attention weight")
left.set_title("Softmax saturates without the scaling")
left.legend()
right.set_xlabel("$d_k$")
right.set_ylabel(r"median Jacobian norm $\|J\|_F$")
right.set_title("...and its gradient vanishes")
right.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# The same experiment as a slider over $d_k$: the sorted weights of a query
# over 8 keys, averaged over 500 queries, without (blue) and with (orange)
# the division by $\sqrt{d_k}$.

# %%
scale_figure = scaled_scores_figure()
display(scale_figure)
scale_figure.static(pyplot=True)
plt.show()

# %% [markdown]
# Without the scaling, the median row puts about 95% of its weight on a
# single key at the paper's $d_k = 64$, and more than 99.8% from $d_k = 256$
# on, while the softmax's Jacobian shrinks about 47,000-fold between
# $d_k = 4$ and $d_k = 1024$: 4.7 orders of magnitude, between four and five.
# With the scaling, both stay about where they are at $d_k = 4$, whatever
# the size. (Why not just use a small $d_k$? The paper
# notes that additive attention beats unscaled dot-product attention for
# large $d_k$, and suspects exactly this saturation; the scale keeps the fast
# matrix-product form and fixes it.)
#
# `minitrans.ScaledDotProductAttention` applies the factor inside its forward.
# Its attention weights are the softmax of the scaled scores: with the
# reference kernels this course runs, the very numbers of `softmax` (the
# fast ones, lesson 5, agree to float32 rounding); shapes $(B, T_q, d_k)$
# for $Q$, $(B, T_k, d_k)$ for $K$ and $V$:

# %%
rng = np.random.default_rng(2)
Q = minitrans.from_host(rng.standard_normal((1, 3, 64)))   # (B, T_q, d_k)
K = minitrans.from_host(rng.standard_normal((1, 5, 64)))   # (B, T_k, d_k)
V = minitrans.from_host(rng.standard_normal((1, 5, 64)))   # (B, T_k, d_v)
attention = minitrans.ScaledDotProductAttention()
attention.forward(Q, K, V)
by_hand = softmax(Q @ K.swapaxes(-1, -2) / math.sqrt(64))
print("weights:", attention.attention_weights.shape,
      "| max difference from softmax(QK^T / 8):",
      float(np.abs(attention.attention_weights - by_hand).max()))

# %% [markdown]
# ## Exercise: write softmax
#
# Write `my_softmax(z)` for an array `z` of shape $(B, V)$ (or $(B, T, V)$): a
# softmax over the last axis, stable for logits as large as 1000. The checker
# tries several cases (random sizes, a batch of one, a 3-D batch, logits that
# reach 1000, float32) against a softmax it computes row by row with
# `math.exp`, and names the first case that fails.
# (`z.max(axis=-1, keepdims=True)` keeps the axis, so the subtraction
# broadcasts row by row.) The skeleton below returns zeros, so the checker
# says "not yet"; replace its body. The solution is in
# `solutions/02_softmax_and_similarity.py`.

# %%
from minitrans_course.exercises import check_softmax


def my_softmax(z):
    # your code here
    return np.zeros_like(z)


# %%
result = check_softmax(my_softmax)

# %% [markdown]
# ## Summary
#
# * Softmax turns scores into positive weights that sum to one; subtracting
#   the row maximum first changes nothing mathematically and avoids `inf`
#   and `nan`.
# * The softmax Jacobian is $\operatorname{diag}(y) - yy^\top$: close to zero
#   when the output is nearly one-hot.
# * The dot product $q \cdot k = \lVert q\rVert\lVert k\rVert\cos\theta$ grows
#   with the vectors' lengths; cosine similarity does not. Attention uses the
#   dot product, for all pairs at once as $QK^\top$.
# * For vectors with independent unit-variance components,
#   $\operatorname{Var}(q \cdot k) = d_k$, as measured. Unscaled, large $d_k$
#   saturates the softmax and starves it of gradient; dividing by
#   $\sqrt{d_k}$ keeps the scores at unit variance.
#
# ## Next
#
# [Lesson 3](03_tokens_and_embeddings.ipynb), tokens and embeddings: how text
# becomes the vectors that attention compares.

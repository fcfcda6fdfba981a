# %% [markdown]
# # Lesson 10: The feed-forward network and the output layer
#
# Two remaining pieces of the paper's Figure 1. Inside every encoder and
# decoder layer, after attention, sits a small two-layer network applied to
# each position on its own: the **position-wise feed-forward network** (§3.3).
# At the very top of the decoder, a linear map and a softmax turn each
# position's vector into a probability for every word of the vocabulary
# (§3.4); training compares them with the right next word by a cross-entropy
# with **label smoothing** (§5.4), and generating text picks a word from them
# by a **decoding strategy**.
#
# In this lesson:
#
# 1. the feed-forward network, what "position-wise" means, and its gradient check;
# 2. logits, log-softmax and cross-entropy;
# 3. label smoothing, its target distribution and its loss;
# 4. greedy decoding, top-k, top-p (nucleus) sampling and temperature on one
#    next-token distribution;
# 5. exercises: write top-p filtering, the feed-forward network's backward and
#    the loss's gradient yourself.

# %%
import matplotlib.pyplot as plt
import numpy as np

import minitrans
from minitrans import (
    FeedForward,
    LabelSmoothedCrossEntropy,
    LogSoftmax,
    MultiHeadAttention,
    OutputProjection,
)
from minitrans.decoding import apply_temperature, draw, top_k_filter, top_p_filter
from minitrans.ops.softmax import softmax

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)

# %% [markdown]
# **You are here**: the feed-forward network of every layer, and the linear
# map and softmax at the top of the decoder. The drawing is the paper's base
# model (Table 3), made from its `ModelConfig`.

# %%
from minitrans_course.diagrams import draw_architecture

paper_config = minitrans.ModelConfig.preset("base", vocab_size=37000)
_, ax = plt.subplots(figsize=(9, 10))
draw_architecture(paper_config, highlight=("feed_forward", "output"), ax=ax)
plt.show()

# %% [markdown]
# ## The position-wise feed-forward network
#
# §3.3 defines it as two linear maps with a ReLU between them:
#
# $$\text{FFN}(x) = \max(0,\; x W_1 + b_1)\, W_2 + b_2,$$
#
# with $W_1$ of shape $(d_\text{model}, d_\text{ff})$, $b_1$ $(d_\text{ff},)$,
# $W_2$ $(d_\text{ff}, d_\text{model})$ and $b_2$ $(d_\text{model},)$. The
# paper's base model has $d_\text{model} = 512$ and $d_\text{ff} = 2048$: the
# hidden layer is **four times wider** than the model. The shapes go
#
# $$(B, T, d_\text{model}) \xrightarrow{\;W_1,\, b_1,\, \text{ReLU}\;} (B, T, d_\text{ff})
# \xrightarrow{\;W_2,\, b_2\;} (B, T, d_\text{model}).$$
#
# In code it reads as that line: `FeedForward` holds two `Linear` layers
# (lesson 1), named after the paper's weights, and its forward is
# `self.W_2.forward(relu(self.W_1.forward(x)))`. Its parameters are called
# `W_1.W` ($W_1$), `W_1.b` ($b_1$), `W_2.W` and `W_2.b`.
#
# Small as it looks, it holds two thirds of an encoder layer's parameters:
# twice as many as the multi-head attention beside it.

# %%
print("FeedForward(512, 2048):        ", f"{FeedForward(512, 2048, rng=0).num_parameters():,}",
      "parameters")
print("MultiHeadAttention(512, h=8):  ", f"{MultiHeadAttention(512, 8, rng=0).num_parameters():,}",
      "parameters")

# %% [markdown]
# ### "Position-wise"
#
# The same $W_1, b_1, W_2, b_2$ are applied to every position, and each
# position's output depends on that position's input only: no information
# moves between positions here (that is attention's job). The paper notes that
# this is a convolution with kernel size 1. (The weights do differ from layer
# to layer.)
#
# Two checks with a toy `FeedForward(d_model=8, d_ff=32)` on a $(2, 5, 8)$
# batch: one position run on its own gives the same output row as in the
# batch, and shuffling the positions shuffles the output rows in the same way.

# %%
rng = np.random.default_rng(0)
d_model, d_ff = 8, 32
ffn = FeedForward(d_model, d_ff, rng=0)
x = minitrans.from_host(rng.standard_normal((2, 5, d_model)))   # (B, T, d_model)
y = ffn.forward(x)                                                # (B, T, d_model)

alone = ffn.forward(x[1:2, 3:4])        # sentence 2, position 4 alone: (1, 1, d_model)
print("one position alone vs in the batch, max difference:",
      float(np.abs(minitrans.to_numpy(alone[0, 0] - y[1, 3])).max()))

shuffle = np.array([4, 2, 0, 3, 1])
y_shuffled = ffn.forward(x[:, shuffle])
print("shuffled input -> shuffled output, max difference:",
      float(np.abs(minitrans.to_numpy(y_shuffled - y[:, shuffle])).max()))

# %% [markdown]
# The first difference is float32 rounding, about $10^{-7}$: a single row goes
# through a different code path of the matrix library, which adds the same
# terms in another order. The shuffle gives exactly the same rows.
#
# What does the hidden layer look like? `forward` keeps the ReLU output
# $\max(0, xW_1 + b_1)$, shape $(B, T, d_\text{ff})$, for the backward,
# which needs to know where the ReLU let the gradient through. With random
# weights about half of the units are zero at each position, a different half
# at each:

# %%
ffn.forward(x)
hidden = minitrans.to_numpy(ffn.cache).reshape(-1, d_ff)   # (B, T, d_ff) -> (B*T, d_ff) = (10, 32)
print("hidden:", hidden.shape, "| fraction of zeros:", round(float((hidden == 0).mean()), 2))

fig, ax = plt.subplots(figsize=(7, 3))
image = ax.imshow(hidden, cmap="magma", aspect="auto")
ax.set_xlabel("hidden unit (d_ff = 32)")
ax.set_ylabel("position (b, t), flattened")
ax.set_title("ReLU activations of the FFN's hidden layer (random weights)")
fig.colorbar(image, ax=ax, label="max(0, x W1 + b1)")
plt.show()

# %% [markdown]
# ### Gradient check
#
# The backward of the FFN is the backward of its two `Linear` layers, in
# reverse order, with the ReLU's gradient between them, $\frac{\partial L}{\partial a} =
# \frac{\partial L}{\partial r} \odot [a > 0]$ for $a = xW_1 + b_1$, $r =
# \max(0, a)$. The ReLU has a kink at 0, where central differences would be
# wrong; `check_layer` detects it and shrinks its step.

# %%
from minitrans.gradcheck import check_layer, format_table
from minitrans.gradcheck import randomise_params

with minitrans.using(dtype="float64"):
    check_rng = np.random.default_rng(0)
    ffn64 = randomise_params(FeedForward(4, 16, rng=0), check_rng)
    x64 = minitrans.from_host(check_rng.standard_normal((2, 3, 4)))
    print(format_table(check_layer(ffn64, x64)))

# %% [markdown]
# ## From vectors to words: logits, log-softmax, cross-entropy
#
# The decoder's last output $y$, shape $(B, T, d_\text{model})$, holds one
# vector per target position. The paper (§3.4) turns it into a distribution
# over the $V$ words of the vocabulary with "the usual learned linear
# transformation and softmax function":
#
# $$\text{logits} = y\,W + b, \quad W: (d_\text{model}, V),\; b: (V,),
# \qquad p = \operatorname{softmax}(\text{logits}) \text{ over the last axis}.$$
#
# The logits are $(B, T, V)$: a score for every word at every position. (The
# paper shares $W$ with the embedding table, $W = W_E^\top$; `OutputProjection`
# does that with `tied_to=embedding`. It is the same affine map as `Linear`,
# computed by the same two functions, `affine_forward` and `add_affine_grads`
# of `minitrans/layers/linear.py`; tied, its weight gradient $dW$ is added
# into the embedding table's gradient as $dW^\top$, where it sums with the
# gradients of the two embedding lookups.) Training maximises the probability of
# the right next word $y_t$: the **cross-entropy**, averaged over the $N$
# target positions,
#
# $$L = -\frac{1}{N}\sum_{t} \log p_{t, y_t}.$$
#
# Taking the log of a softmax directly loses precision, so minitrans computes
# $\log p = z - \log\sum_v e^{z_v}$ with the log-sum-exp trick (`LogSoftmax`),
# and `LabelSmoothedCrossEntropy` computes the loss straight from the logits.
# With smoothing 0 it is the plain cross-entropy above:

# %%
V = 7
projection = OutputProjection(d_model, V, rng=0)
decoder_out = minitrans.from_host(rng.standard_normal((2, 3, d_model)))  # (B, T, d_model)
logits = projection.forward(decoder_out)                                    # (B, T, V)
log_probs = minitrans.to_numpy(LogSoftmax().forward(logits))                # (B, T, V)
targets = np.array([[3, 4, 2], [5, 6, 2]])                                  # (B, T) next-word ids
print("logits:", logits.shape, "| rows of exp(log p) sum to 1:",
      np.allclose(np.exp(log_probs).sum(-1), 1.0, atol=1e-6))

by_hand = -np.take_along_axis(log_probs, targets[..., None], axis=-1).mean()
plain_loss = LabelSmoothedCrossEntropy(label_smoothing=0.0).forward(
    logits, minitrans.to_device(targets))
print(f"mean -log p of the targets: {by_hand:.6f} | LabelSmoothedCrossEntropy(0.0): "
      f"{float(plain_loss):.6f}")

# %% [markdown]
# ## Label smoothing
#
# The one-hot target asks for $p_{y_t} = 1$, which softmax reaches only as the
# logits go to infinity; the model is pushed to be ever more confident. §5.4
# trains instead with label smoothing of value $\epsilon_{ls} = 0.1$
# (Szegedy et al., 2016): the target distribution is
#
# $$q_v = (1 - \epsilon_{ls})\,[v = y_t] + \frac{\epsilon_{ls}}{V},$$
#
# a little probability $\epsilon_{ls}/V$ for every word and the rest on the
# right one, and the loss at position $t$ is the cross-entropy with $q$:
#
# $$\ell_t = -\sum_{v} q_v \log p_v = (1 - \epsilon_{ls})\,(-\log p_{y_t})
# + \epsilon_{ls} \cdot \frac{1}{V}\sum_v (-\log p_v).$$
#
# The paper reports that this "hurts perplexity, as the model learns to be
# more unsure, but improves accuracy and BLEU score". For a vocabulary of 8
# words and the right word 3:

# %%
V_small, eps_ls, right = 8, 0.1, 3
one_hot = np.eye(V_small)[right]
q = (1 - eps_ls) * one_hot + eps_ls / V_small
print("q:", np.round(q, 4), "| sum:", q.sum())

fig, ax = plt.subplots(figsize=(6, 3.5))
positions = np.arange(V_small)
ax.bar(positions - 0.2, one_hot, width=0.4, label="one-hot target")
ax.bar(positions + 0.2, q, width=0.4, label=f"smoothed, eps = {eps_ls}")
ax.annotate(f"{eps_ls / V_small} each", xy=(6.2, eps_ls / V_small), xytext=(5.3, 0.25),
            arrowprops={"arrowstyle": "->"})
ax.set_xticks(positions)
ax.set_xlabel("word id v")
ax.set_ylabel("target probability q_v")
ax.set_title(f"Label smoothing, V = {V_small}, right word = {right}")
ax.legend()
plt.show()

# %% [markdown]
# The target now puts $0.9 + 0.1/8 = 0.9125$ on word 3 and $0.0125$ on every
# other word. What does that change? Below, the loss of a single position as a
# function of the probability $p$ the model gives the right word (the rest
# spread evenly over the other 7 words). Without smoothing the loss falls all
# the way to 0 as $p \to 1$. With smoothing it has a minimum at $p = q_{y_t} =
# 0.9125$ and rises again: being more confident than that is penalised.

# %%
p_grid = np.linspace(0.3, 0.999, 300)
curves = {}
for eps in (0.0, 0.1):
    loss_fn = LabelSmoothedCrossEntropy(label_smoothing=eps)
    values = []
    for p_right in p_grid:
        p_vec = np.full(V_small, (1 - p_right) / (V_small - 1))
        p_vec[right] = p_right
        # logits = log p, so that softmax(logits) = p
        values.append(float(loss_fn.forward(minitrans.from_host(np.log(p_vec)[None]),
                                            minitrans.to_device(np.array([right])))))
    curves[eps] = np.array(values)

best = p_grid[np.argmin(curves[0.1])]
print(f"smoothed loss is smallest at p = {best:.4f} (q of the right word = {q[right]:.4f})")

fig, ax = plt.subplots(figsize=(6, 3.8))
ax.plot(p_grid, curves[0.0], label="no smoothing")
ax.plot(p_grid, curves[0.1], label="label smoothing 0.1")
ax.axvline(q[right], color="gray", linestyle="--", linewidth=0.8, label="p = 0.9125")
ax.set_xlabel("probability of the right word, p")
ax.set_ylabel("loss of one position")
ax.set_title("Label smoothing rewards p = 0.9125, not p = 1")
ax.legend()
plt.show()

# %% [markdown]
# ### The loss in minitrans, padding ignored
#
# `LabelSmoothedCrossEntropy(0.1, pad_id=PAD)` averages $\ell_t$ over the
# positions whose target is not padding: padded positions of short sentences
# contribute nothing, and $N$ counts the real targets only. We check it
# against $-\sum_v q_v \log p_v$ computed by hand, then check that changing the
# logits at a padded position changes neither the loss nor anything but a
# zero in the gradient. The gradient has a short form: at each real position,
#
# $$\frac{\partial L}{\partial \text{logits}_t} = \frac{p_t - q_t}{N}.$$
#
# Both equations are the reference versions in `minitrans/layers/loss.py`,
# printed below: `smoothed_cross_entropy_reference` forms $\log p$ and $q$
# and sums $-q \log p$; `smoothed_cross_entropy_backward_reference` is
# $(p - q)$ times each position's weight, $1/N$ or 0 at padding. The layer
# runs their fast twins by default (`..._fast` beside them), which form
# neither $q$ nor the $(B, T, V)$ array of $\log p$: with a vocabulary of
# 8000 these are the largest arrays of a step.

# %%
import inspect

from minitrans.layers.loss import (
    smoothed_cross_entropy_backward_reference,
    smoothed_cross_entropy_reference,
)

print(inspect.getsource(smoothed_cross_entropy_reference))
print(inspect.getsource(smoothed_cross_entropy_backward_reference))

# %%
PAD = 0
targets = np.array([[3, 4, 2], [5, 2, PAD]])           # the second sentence is one word shorter
smoothed_loss = LabelSmoothedCrossEntropy(label_smoothing=0.1, pad_id=PAD)
loss = float(smoothed_loss.forward(logits, minitrans.to_device(targets)))

q_all = 0.9 * np.eye(V)[targets] + 0.1 / V             # (B, T, V)
per_position = -(q_all * log_probs).sum(-1)             # (B, T)
real = targets != PAD
print(f"loss: minitrans {loss:.6f} | by hand {per_position[real].mean():.6f} (mean over "
      f"{real.sum()} real targets)")

dlogits = minitrans.to_numpy(smoothed_loss.backward())
p_all = np.exp(log_probs)
print("gradient == (p - q) / N at real positions:",
      np.allclose(dlogits[real], (p_all - q_all)[real] / real.sum(), atol=1e-6))
print("largest |gradient| at the padded position:", float(np.abs(dlogits[1, 2]).max()))

changed = minitrans.to_numpy(logits).copy()
changed[1, 2] = 50.0                                     # nonsense logits at the padded position
print("loss with changed padded logits:",
      "%.6f" % float(smoothed_loss.forward(minitrans.from_host(changed),
                                           minitrans.to_device(targets))))

# %% [markdown]
# ### Gradient checks of the output layer and the loss
#
# The projection $(B, T, d_\text{model}) \to (B, T, V)$, and the loss with
# smoothing 0.1 and a padded target. The targets are integers, so only the
# logits get a gradient.

# %%
with minitrans.using(dtype="float64"):
    check_rng = np.random.default_rng(0)
    projection64 = randomise_params(OutputProjection(4, V, rng=0), check_rng)
    results = check_layer(projection64, minitrans.from_host(check_rng.standard_normal((2, 3, 4))))
    results += check_layer(LabelSmoothedCrossEntropy(0.1, pad_id=PAD),
                           minitrans.from_host(check_rng.standard_normal((2, 3, V))),
                           minitrans.to_device(targets),
                           label="LabelSmoothedCrossEntropy")
    print(format_table(results))

# %% [markdown]
# ## Choosing the next word
#
# At generation time the model gives, at each step, one distribution over the
# vocabulary for the next word, and a **decoding strategy** picks one word,
# which is fed back in. On one made-up distribution (the next word after
# "the cat sat on the"):
#
# * **greedy**: take the most probable word, $\arg\max_v p_v$. Deterministic,
#   the same word every time.
# * **sampling**: draw a word at random from $p$. Varied, but the many
#   unlikely words together can have a real chance of being drawn.
# * **top-k**: keep the $k$ largest logits, set the others to $-\infty$, so
#   that the softmax renormalises over the $k$ kept words.
# * **top-p (nucleus)** (Holtzman et al., 2020): sort the words by
#   probability, keep the smallest set whose total probability reaches $p$,
#   zero the others and divide by the kept total. Unlike top-k, the number of
#   words kept adapts: few when the model is sure, many when it is not.
# * **temperature** $\tau$: sample from $\operatorname{softmax}(z/\tau)$.
#   $\tau < 1$ sharpens the distribution ($\tau \to 0$ is greedy), $\tau > 1$
#   flattens it.
#
# In minitrans these are `apply_temperature(logits, t)`, `top_k_filter(logits, k)`
# (on logits) and `top_p_filter(probs, p)` (on probabilities), each on a
# $(B, V)$ array; `decoding.sample` chains them in that order before drawing.
# (The paper itself translated with beam search, §6.1, a later lesson.)

# %%
words = ["mat", "floor", "sofa", "roof", "table", "dog", "moon", "idea"]
# (B=1, V=8)
next_logits = minitrans.from_host(np.array([[3.0, 2.4, 2.0, 1.4, 1.0, 0.2, -0.5, -1.5]]))
probs = softmax(next_logits)

greedy_word = words[int(np.argmax(minitrans.to_numpy(next_logits)))]
top_k_probs = softmax(top_k_filter(next_logits, 3))        # -inf logits become probability 0
top_p_probs = top_p_filter(probs, 0.9)

for name, dist in [("p", probs), ("top-k, k=3", top_k_probs), ("top-p, p=0.9", top_p_probs)]:
    print(f"{name:13s}", np.round(minitrans.to_numpy(dist)[0], 3))
print("greedy picks:", greedy_word)

# %%
fig, axes = plt.subplots(1, 3, figsize=(11, 3.4), sharey=True, layout="constrained")
panels = [(probs, "softmax(logits): full distribution"), (top_k_probs, "after top-k, k = 3"),
          (top_p_probs, "after top-p, p = 0.9")]
for ax, (dist, title) in zip(axes, panels):
    values = minitrans.to_numpy(dist)[0]
    ax.bar(words, values, color=["tab:red" if w == greedy_word else "tab:blue" for w in words])
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("next word")
    ax.tick_params(axis="x", rotation=60)
axes[0].set_ylabel("probability")
fig.suptitle('Next word after "the cat sat on the" (red: the greedy choice)')
plt.show()

# %% [markdown]
# ### The worked example of top-p
#
# With probabilities $[0.5, 0.3, 0.15, 0.05]$ (already sorted) and $p = 0.9$:
# the probability mass *before* each word is $[0, 0.5, 0.8, 0.95]$, and a word
# is kept while the mass before it is below $p$. So the first three are kept
# (together $0.95 \ge 0.9$), the fourth is dropped, and the kept ones are
# divided by $0.95$:

# %%
worked = top_p_filter(minitrans.from_host(np.array([[0.5, 0.3, 0.15, 0.05]])), 0.9)
print("top-p(0.9) of [0.5, 0.3, 0.15, 0.05] =", np.round(minitrans.to_numpy(worked)[0], 3))

# %% [markdown]
# Sampling draws from the filtered distribution: below, 2,000 draws with
# `decoding.draw` (seeded) from the top-p distribution above. The frequencies
# follow the renormalised probabilities, and the filtered-out words never
# appear.

# %%
rows = minitrans.from_host(np.repeat(minitrans.to_numpy(top_p_probs), 2000, axis=0))   # (2000, V)
drawn = minitrans.to_numpy(draw(rows, minitrans.core.backend.device_rng(0)))
frequency = np.bincount(drawn, minlength=len(words)) / len(drawn)
for word, f, p_kept in zip(words, frequency, minitrans.to_numpy(top_p_probs)[0]):
    print(f"{word:6s} drawn {f:.3f}   probability {p_kept:.3f}")

# %% [markdown]
# ### Temperature
#
# Dividing the logits by $\tau$ before the softmax changes how peaked the
# distribution is without changing the order of the words:

# %%
temperatures = (0.5, 1.0, 2.0)
fig, axes = plt.subplots(1, 3, figsize=(11, 3.4), sharey=True, layout="constrained")
for ax, tau in zip(axes, temperatures):
    values = minitrans.to_numpy(softmax(apply_temperature(next_logits, tau)))[0]
    ax.bar(words, values, color="tab:green")
    ax.set_title(f"temperature {tau}: largest p = {values.max():.2f}", fontsize=10)
    ax.set_xlabel("next word")
    ax.tick_params(axis="x", rotation=60)
axes[0].set_ylabel("probability")
fig.suptitle("softmax(logits / temperature)")
plt.show()

# %% [markdown]
# ## Exercise: top-p filtering
#
# Write `my_top_p(probs, p)` for probabilities of shape $(B, V)$, each row
# summing to 1: in each row keep the most probable words while the mass of
# the words *before* them (in descending order) is below $p$, set the others
# to 0, and renormalise the row. `np.argsort`, `np.cumsum` and
# `np.take_along_axis` (or a loop over rows) will do. The checker tries random
# rows, float32, a batch of one, a row whose top word alone holds $p$, and
# $p = 1$, against a nucleus it builds row by row with a sorted loop.

# %%
from minitrans_course.exercises import check_top_p


def my_top_p(probs, p):
    # your code here
    return np.zeros_like(probs)


# %%
check_top_p(my_top_p);

# %% [markdown]
# ## Exercises: the feed-forward backward, and the loss's gradient
#
# **The feed-forward network's backward.** Write
# `my_feedforward_backward(x, W1, b1, W2, b2, dy)` for
# $y = \max(0, xW_1 + b_1)W_2 + b_2$: `x` and `dy` are $(N, d)$ or
# $(B, T, d)$, `W1` is $(d, d_\text{ff})$ and `W2` $(d_\text{ff}, d)$. Return
# `(dx, dW1, db1, dW2, db2)`, each the shape of what it is the gradient of.
# Recompute $a = xW_1 + b_1$ rather than storing it; the ReLU passes the
# gradient where $a > 0$ and not where $a = 0$ exactly (minitrans's choice,
# and PyTorch's). The parameter gradients sum over every position, whatever
# the leading axes. The checker compares with each row's explicit Jacobian,
# on $(N, d)$ and $(B, T, d)$ inputs, a batch of one, float32, and one case
# of small integers in which a unit sits exactly at 0 before the ReLU (the
# random cases keep every $a$ at least $10^{-3}$ from that kink).

# %%
from minitrans_course.exercises_output import check_feedforward_backward, check_loss_backward


def my_feedforward_backward(x, W1, b1, W2, b2, dy):
    # your code here
    return (np.zeros_like(x), np.zeros_like(W1), np.zeros_like(b1),
            np.zeros_like(W2), np.zeros_like(b2))


check_feedforward_backward(my_feedforward_backward);

# %% [markdown]
# **The loss's gradient.** Write `my_loss_backward(logits, targets, pad_id,
# eps)`: `logits` is $(B, T, V)$, `targets` $(B, T)$; return
# $\partial\,\text{loss} / \partial\,\text{logits}$, $(B, T, V)$, for
# minitrans's `LabelSmoothedCrossEntropy(eps, pad_id)` above: the target
# distribution is $q = (1 - \epsilon)\,\text{one-hot} + \epsilon / V$ (every
# word gets $\epsilon / V$, `<pad>` too), and the loss is the mean over the
# $N$ targets that are not `pad_id`, so a row whose target is padding gets a
# zero gradient and every other row
# $(\text{softmax}(z) - q) / N$, as above. The checker compares with central
# differences of a loss it writes with loops, on padding, $\epsilon = 0$, a
# batch of one, a batch with a single real target, larger logits, a `pad_id`
# other than 0, and float32. The solutions are in
# `solutions/10_feed_forward_and_output.py`.

# %%
def my_loss_backward(logits, targets, pad_id, eps):
    # your code here
    return np.zeros_like(logits)


check_loss_backward(my_loss_backward);

# %% [markdown]
# ## Summary
#
# * $\text{FFN}(x) = \max(0, xW_1 + b_1)W_2 + b_2$, Linear -> ReLU -> Linear,
#   maps each position on its own, with the same weights at every position,
#   through a hidden layer of $d_\text{ff} = 4\,d_\text{model}$ units.
# * The output layer, one more affine map $yW + b$, turns
#   $(B, T, d_\text{model})$ into logits $(B, T, V)$; log-softmax and
#   cross-entropy score them against the next word.
# * Label smoothing trains towards $q = (1 - \epsilon)\,\text{one-hot} +
#   \epsilon / V$, so the loss is smallest at a confident but not certain
#   prediction; padded targets are left out of the mean.
# * Greedy takes the most probable word; top-k and top-p cut the unlikely tail
#   and renormalise; temperature sharpens or flattens before sampling.
#
# ## Next
#
# [Lesson 11](11_backprop_and_gradient_checking.ipynb), backpropagation by
# hand and gradient checking: where the backwards of these layers come from,
# and how a check catches a wrong one.

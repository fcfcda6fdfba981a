# %% [markdown]
# # Lesson 9: Residual connections and layer normalisation
#
# Every attention block and every feed-forward network of the Transformer sits
# inside the same wrapper, drawn as "Add & Norm" in the paper's Figure 1. The
# paper says it in one line (§3.1): the output of each sub-layer is
#
# $$\text{LayerNorm}(x + \text{Sublayer}(x)),$$
#
# and §5.4 adds that dropout is applied to the sub-layer's output before the
# addition. Two ideas are packed in there: the **residual connection**
# $x + F(x)$ (He et al., 2016) and **layer normalisation** (Ba, Kiros and
# Hinton, 2016). minitrans implements the wrapper as `AddNorm`: it holds the
# layer norm and the dropout, and is handed the sub-layer $F$ at each call,
# `add_norm.forward(x, F)`. The sub-layer itself sits beside it in the encoder
# or decoder layer: `layer.self_attn` is the attention, `layer.self_attn_norm`
# its Add & Norm.
#
# In this lesson:
#
# 1. the residual connection and its gradient, $\frac{\partial L}{\partial x} =
#    \frac{\partial L}{\partial y}\left(I + \frac{\partial F}{\partial x}\right)$,
#    checked numerically;
# 2. layer normalisation over the feature axis, and its parameters $\gamma$, $\beta$;
# 3. layer norm against batch norm: which axis is normalised, and why
#    sequences want layer norm;
# 4. post-norm (the paper) and pre-norm;
# 5. gradient checks, and an exercise: write layer norm yourself.

# %%
import matplotlib.pyplot as plt
import numpy as np

import minitrans
from minitrans import AddNorm, FeedForward, LayerNorm

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)

# %% [markdown]
# **You are here**: the Add & Norm boxes and the residual paths around every
# sub-layer; below it, the path of one token through an encoder layer, with
# the size of its vector at each step. The drawing is the paper's base model
# (Table 3), made from its `ModelConfig`.

# %%
from minitrans_course.diagrams import draw_architecture

paper_config = minitrans.ModelConfig.preset("base", vocab_size=37000)
_, ax = plt.subplots(figsize=(9, 10))
draw_architecture(paper_config, highlight="add_norm", ax=ax)
plt.show()

# %%
from minitrans_course.diagram_flows import draw_token_path

_, ax = plt.subplots(figsize=(12, 4.5))
draw_token_path(paper_config, ax=ax)
plt.show()

# %% [markdown]
# ## The residual connection
#
# A residual connection adds a block's input to its output:
#
# $$y = x + F(x), \qquad x, y \in \mathbb{R}^{d_\text{model}} \text{ at each position}.$$
#
# The block $F$ only has to learn a *change* to $x$, and, more importantly for
# training, the chain rule gives the Jacobian $\frac{\partial y}{\partial x} =
# I + \frac{\partial F}{\partial x}$, so the backward pass of the block is
#
# $$\frac{\partial L}{\partial x}
# = \frac{\partial L}{\partial y}\left(I + \frac{\partial F}{\partial x}\right)
# = \underbrace{\frac{\partial L}{\partial y}}_{\text{straight through}}
# + \underbrace{\frac{\partial L}{\partial y}\frac{\partial F}{\partial x}}_{\text{through } F}.$$
#
# (Gradients are row vectors here, as in the code: `dx` has the shape of `x`.)
# The first term reaches $x$ untouched, however small or badly conditioned
# $\frac{\partial F}{\partial x}$ is; a stack of $N$ such blocks has a path from
# the loss to the input on which the gradient is never multiplied by anything.
# The residual also forces every sub-layer to output $d_\text{model}$ features
# (§3.1: "all sub-layers in the model, as well as the embedding layers, produce
# outputs of dimension $d_\text{model} = 512$").
#
# `AddNorm` with `pre_norm=True` and `dropout=0` computes exactly
# $y = x + F(x)$ with $F(x) = \text{FFN}(\text{LayerNorm}(x))$ (pre-norm is
# explained below). So we can check the identity numerically: build the
# Jacobian of the whole connection and the Jacobian of $F$ alone by central
# differences, column by column, for one position with $d_\text{model} = 6$,
# and subtract.

# %%
d = 6
with minitrans.using(dtype="float64"):
    ffn = FeedForward(d, 4 * d, rng=0)
    residual = AddNorm(d, dropout=0.0, pre_norm=True)
    x0 = np.random.default_rng(0).standard_normal((1, 1, d))  # one position: (B=1, T=1, d)

    def whole(v):  # y = x + F(x)
        return minitrans.to_numpy(residual.forward(minitrans.from_host(v), ffn))

    def branch(v):  # F(x) = FFN(LayerNorm(x)), the same layers, called on their own
        return minitrans.to_numpy(ffn.forward(residual.layer_norm.forward(minitrans.from_host(v))))

    def numeric_jacobian(f, v, step=1e-5):
        J = np.zeros((d, d))  # J[i, k] = d f_i / d v_k
        for k in range(d):
            e = np.zeros_like(v)
            e[..., k] = step
            J[:, k] = ((f(v + e) - f(v - e)) / (2 * step)).ravel()
        return J

    J_y, J_F = numeric_jacobian(whole, x0), numeric_jacobian(branch, x0)

print("dy/dx - dF/dx =")
print(np.round(J_y - J_F, 6))
print("largest deviation from the identity:", float(np.abs(J_y - J_F - np.eye(d)).max()))

# %%
fig, axes = plt.subplots(1, 3, figsize=(10, 3.2), layout="constrained")
limit = np.abs(J_y).max()
for ax, (matrix, title) in zip(axes, [(J_y, "dy/dx (whole connection)"),
                                      (J_F, "dF/dx (the branch alone)"),
                                      (J_y - J_F, "difference = identity")]):
    image = ax.imshow(matrix, cmap="RdBu_r", vmin=-limit, vmax=limit)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("input feature k")
    ax.set_ylabel("output feature i")
fig.colorbar(image, ax=axes, label="d(output i) / d(input k)")
fig.suptitle("Numerical Jacobians of a residual block, one position, d_model = 6")
plt.show()

# %% [markdown]
# The backward does the same thing without building any Jacobian: it returns
# the upstream gradient plus whatever the branch sends back. We compare the
# connection's `backward` with the branch's pieces run on their own, on a
# whole batch $(B, T, d) = (2, 3, 6)$:

# %%
with minitrans.using(dtype="float64"):
    rng = np.random.default_rng(1)
    x = minitrans.from_host(rng.standard_normal((2, 3, d)))
    dy = minitrans.from_host(rng.standard_normal((2, 3, d)))

    residual.forward(x, ffn)
    dx = residual.backward(dy)  # dL/dx through the connection (it calls ffn.backward)

    ffn.forward(residual.layer_norm.forward(x))
    dx_branch = residual.layer_norm.backward(ffn.backward(dy))  # dL/dy dF/dx

print("max |dx - (dy + dx_branch)| =",
      float(np.abs(minitrans.to_numpy(dx - (dy + dx_branch))).max()))

# %% [markdown]
# ## Layer normalisation
#
# Layer norm normalises each position's vector of $d_\text{model}$ features
# on its own. For one position $x \in \mathbb{R}^{d}$,
#
# $$\mu = \frac{1}{d}\sum_{i=1}^{d} x_i, \qquad
# \sigma^2 = \frac{1}{d}\sum_{i=1}^{d} (x_i - \mu)^2, \qquad
# \text{LN}(x)_i = \gamma_i \, \frac{x_i - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta_i .$$
#
# $\epsilon$ (here $10^{-5}$) avoids a division by zero. $\gamma$ (gain) and
# $\beta$ (bias) are learned vectors of shape $(d_\text{model},)$, starting at 1
# and 0. Input and output have the same shape, $(B, T, d_\text{model})$; the
# statistics are taken over the last axis only, so there are $B \cdot T$ means
# and variances.
#
# Below, an input whose features have very different scales and offsets. With
# $\gamma = 1$, $\beta = 0$, every position comes out with mean 0 and variance
# 1 (exactly $\sigma^2 / (\sigma^2 + \epsilon)$, which is 1 to float32
# precision here).
#
# In minitrans these three equations are `layer_norm_reference`, in
# `minitrans/layers/layernorm.py`, line for line, and the version this
# course runs (`minitrans.use(kernels="reference")`, lesson 1). Outside the
# course the layer runs its fast twin `layer_norm_fast` by default (the
# same numbers with two arrays of shape $(B, T, d)$ instead of six, and the
# sums as matrix products; lesson 12).

# %%
import inspect

from minitrans.layers.layernorm import layer_norm_reference

print(inspect.getsource(layer_norm_reference))

# %%
rng = np.random.default_rng(0)
B, T, d = 4, 5, 6
feature_scale = np.array([0.5, 1.0, 2.0, 4.0, 8.0, 16.0])
feature_offset = np.array([-5.0, 0.0, 3.0, 10.0, -20.0, 40.0])
x_host = rng.standard_normal((B, T, d)) * feature_scale + feature_offset   # (B, T, d)

norm = LayerNorm(d)
y_ln = minitrans.to_numpy(norm.forward(minitrans.from_host(x_host)))
print("input : per-position means range", np.round(x_host.mean(-1).min(), 2), "to",
      np.round(x_host.mean(-1).max(), 2))
print("output: largest |mean| over the", B * T, "positions:", float(np.abs(y_ln.mean(-1)).max()))
print("output: variances between", float(y_ln.var(-1).min()), "and", float(y_ln.var(-1).max()))

# %% [markdown]
# Normalising takes away the freedom of a position to have any mean and
# scale; $\gamma$ and $\beta$ give the model a learned scale and offset per
# feature instead. With $\gamma = 2$ and $\beta = 3$ everywhere, each position
# has mean 3 and standard deviation 2:

# %%
norm.params["gamma"] = minitrans.from_host(np.full(d, 2.0))
norm.params["beta"] = minitrans.from_host(np.full(d, 3.0))
y_scaled = minitrans.to_numpy(norm.forward(minitrans.from_host(x_host)))
print("means:", np.round(y_scaled.mean(-1)[0], 4), "| standard deviations:",
      np.round(y_scaled.std(-1)[0], 4))

# %% [markdown]
# ## Layer norm against batch norm
#
# Batch normalisation (Ioffe and Szegedy, 2015), the usual norm of image
# networks, takes the statistics the other way: for **one feature**, over the
# **batch** (and, for sequences, over all positions of the batch). Layer norm
# takes them for **one position**, over its **features**. On the same
# $(B, T, d) = (4, 5, 6)$ array:
#
# | | statistics over | how many means | afterwards mean 0, variance 1 |
# | --- | --- | --- | --- |
# | layer norm | the $d$ features of one position | $B \cdot T = 20$ | each **position** |
# | batch norm | the $B \cdot T$ positions, for one feature | $d = 6$ | each **feature** |
#
# minitrans has no batch norm (the Transformer does not use one), so we
# compute it in two lines of NumPy for the comparison.

# %%
def batch_norm(x, eps=1e-5):
    """Batch norm of (B, T, d) without gamma and beta: statistics per feature over (B, T)."""
    mu = x.mean(axis=(0, 1), keepdims=True)   # (1, 1, d)
    var = x.var(axis=(0, 1), keepdims=True)
    return (x - mu) / np.sqrt(var + eps)


y_bn = batch_norm(x_host)
norm = LayerNorm(d)  # back to gamma = 1, beta = 0
y_ln = minitrans.to_numpy(norm.forward(minitrans.from_host(x_host)))
print("layer norm: position means within", np.abs(y_ln.mean(-1)).max(), "of 0; feature means",
      np.round(y_ln.mean((0, 1)), 2))
print("batch norm: feature means within", np.abs(y_bn.mean((0, 1))).max(),
      "of 0; position means range",
      np.round(y_bn.mean(-1).min(), 2), "to", np.round(y_bn.mean(-1).max(), 2))

# %%
fig, axes = plt.subplots(2, 2, figsize=(9, 5.5), layout="constrained")
for row, (y_norm, name) in enumerate([(y_ln, "layer norm"), (y_bn, "batch norm")]):
    groups = [
        (y_norm.reshape(B * T, d), "position", "position (b, t), flattened"),  # rows: positions
        (y_norm.reshape(B * T, d).T, "feature", "feature i"),                  # rows: features
    ]
    for col, (rows, what, xlabel) in enumerate(groups):
        ax = axes[row, col]
        ax.bar(range(len(rows)), rows.mean(axis=1), color="tab:blue", label="mean")
        ax.plot(range(len(rows)), rows.std(axis=1), "o", color="tab:orange", markersize=4,
                label="standard deviation")
        ax.axhline(0.0, color="black", linewidth=0.8)
        ax.set_title(f"{name}: statistics of each {what}", fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("value after the norm")
        ax.set_ylim(-1.5, 2.6)
        ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
axes[0, 0].legend(loc="upper right", fontsize=8)
fig.suptitle("Which axis is normalised: layer norm gives every position mean 0 and std 1,\nbatch "
             "norm every feature")
plt.show()

# %% [markdown]
# Bars are means, dots standard deviations. Layer norm makes every position
# (top left) mean 0 and standard deviation 1 but leaves the features unequal
# (top right); batch norm does the opposite (bottom row).
#
# Why layer norm for sequences? Its output at a position depends on that
# position's vector alone, so:
#
# * **Other sentences in the batch do not matter**, nor does padding: with
#   batch norm the statistics mix in the other sentences and every `<pad>`
#   position, so the same sentence is normalised differently in different
#   batches.
# * **Batch size 1 and one position at a time work.** When translating, the
#   decoder processes one new position per step, often for one sentence.
#   Batch norm's variance over a single value is 0: the output is 0 whatever
#   the input. (In practice batch norm switches to running averages of its
#   training statistics at evaluation time, so it computes different things in
#   training and in use.) Layer norm computes the same thing in both.
#
# Both claims, checked: one sentence of 5 positions, normalised alone, then in
# a batch with 3 other sentences, then padded to 8 positions with zero vectors.

# %%
sentence = x_host[:1]                                            # (1, 5, d)
padded = np.concatenate([sentence, np.zeros((1, 3, d))], axis=1)  # (1, 8, d), 3 pad positions

def layer_norm(v):
    return minitrans.to_numpy(LayerNorm(d).forward(minitrans.from_host(v)))

for name, fn in [("layer norm", layer_norm), ("batch norm", batch_norm)]:
    alone = fn(sentence)[0]
    in_batch = fn(x_host)[0]
    with_pads = fn(padded)[0, :5]
    print(f"{name}: change from batch partners {np.abs(in_batch - alone).max():8.4f}, "
          f"from padding {np.abs(with_pads - alone).max():8.4f}")

one_position = x_host[:1, :1]                                    # B = 1, T = 1
print("\none position, batch norm:", np.round(batch_norm(one_position).ravel(), 3))
print("one position, layer norm:", np.round(layer_norm(one_position).ravel(), 3))

# %% [markdown]
# Layer norm gives the sentence exactly the same numbers in all three cases;
# batch norm changes them by up to about 2, and maps a lone position to zeros.
#
# ## Post-norm and pre-norm
#
# The paper puts the norm **after** the addition (post-norm), with residual
# dropout on the sub-layer's output (§5.4):
#
# $$\text{post-norm:}\quad y = \text{LayerNorm}\big(x + \text{Dropout}(F(x))\big).$$
#
# Many later models (GPT-2 among them; analysed by Xiong et al., 2020) put it
# **before** the sub-layer, inside the branch (pre-norm):
#
# $$\text{pre-norm:}\quad y = x + \text{Dropout}\big(F(\text{LayerNorm}(x))\big).$$
#
# In pre-norm the residual path is a pure identity, so the gradient identity
# above holds exactly: the straight-through term reaches the first layer of a
# deep stack unchanged. In post-norm the addition is followed by a norm, and
# the backward is $\frac{\partial L}{\partial x} = \frac{\partial L}{\partial s}
# \left(I + \frac{\partial F}{\partial x}\right)$ with $s = x + F(x)$ and
# $\frac{\partial L}{\partial s} = \frac{\partial L}{\partial y}
# \frac{\partial\, \text{LN}}{\partial s}$: every layer's norm sits on the
# gradient's path. Pre-norm trains deep stacks more easily, often without the
# learning-rate warm-up; post-norm is what the paper used. minitrans has both
# (`pre_norm=True` in `AddNorm` or `ModelConfig`).
#
# One visible difference: a post-norm stack's output is always normalised,
# while a pre-norm stack's residual stream $x$ is never normalised and grows as
# blocks add to it. That is why a pre-norm encoder or decoder ends with one
# more `LayerNorm` (minitrans adds `final_norm`). Below, 24 feed-forward
# blocks with random initial weights, both ways, and the root-mean-square of
# the residual stream after each block.

# %%
def stream_rms(pre_norm, depth=24, d_model=32, seed=0):
    layer_rng = np.random.default_rng(seed)
    blocks = [(FeedForward(d_model, 4 * d_model, rng=layer_rng),
               AddNorm(d_model, dropout=0.0, pre_norm=pre_norm)) for _ in range(depth)]
    h = minitrans.from_host(layer_rng.standard_normal((4, 10, d_model)))   # (B, T, d_model)
    rms = [float(np.sqrt((minitrans.to_numpy(h) ** 2).mean()))]
    for ffn_block, add_norm in blocks:
        h = add_norm.forward(h, ffn_block)
        rms.append(float(np.sqrt((minitrans.to_numpy(h) ** 2).mean())))
    return rms


post_rms, pre_rms = stream_rms(pre_norm=False), stream_rms(pre_norm=True)
print("post-norm RMS after blocks 0, 8, 16, 24:", np.round(post_rms[::8], 2))
print("pre-norm  RMS after blocks 0, 8, 16, 24:", np.round(pre_rms[::8], 2))

fig, ax = plt.subplots(figsize=(6, 3.8))
ax.plot(post_rms, "o-", markersize=3, label="post-norm (paper): LN(x + F(x))")
ax.plot(pre_rms, "s-", markersize=3, label="pre-norm: x + F(LN(x))")
ax.set_xlabel("number of blocks applied")
ax.set_ylabel("RMS of the residual stream")
ax.set_title("Residual stream through 24 random FFN blocks")
ax.legend()
plt.show()

# %% [markdown]
# ## Gradient checks
#
# First `LayerNorm` alone, with randomised $\gamma$ and $\beta$ (at 1 and 0 a
# backward that mixed them up could pass), then an `AddNorm` and the
# feed-forward network it wraps, checked together as one layer
# (`SublayerWithAddNorm`): post-norm with dropout 0.2 (the check reuses
# the same dropout mask at every evaluation) and pre-norm. The backward of
# layer norm has to account for $\mu$ and $\sigma$ depending on every $x_i$:
#
# $$\frac{\partial L}{\partial x} = \frac{1}{\sqrt{\sigma^2 + \epsilon}}
# \left(g - \operatorname{mean}(g) - \hat{x}\, \operatorname{mean}(g \odot \hat{x})\right),
# \qquad g = \frac{\partial L}{\partial y} \odot \gamma,\quad
# \hat{x} = \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}},$$
#
# with the means over the feature axis (lesson 11 derives it). In code,
# `layer_norm_backward_reference` (its fast twin, `layer_norm_backward_fast`,
# builds $dx$ in place):

# %%
from minitrans.layers.layernorm import layer_norm_backward_reference

print(inspect.getsource(layer_norm_backward_reference))

# %%
from minitrans.gradcheck import check_layer, format_table
from minitrans.gradcheck import SublayerWithAddNorm, randomise_params

with minitrans.using(dtype="float64"):
    check_rng = np.random.default_rng(0)

    def random_input():
        return minitrans.from_host(check_rng.standard_normal((2, 3, 4)))   # (B, T, d_model=4)

    layers = [
        ("LayerNorm", LayerNorm(4)),
        ("Add & Norm, post-norm, dropout 0.2",
         SublayerWithAddNorm(FeedForward(4, 16, rng=0), AddNorm(4, dropout=0.2, rng=1))),
        ("Add & Norm, pre-norm",
         SublayerWithAddNorm(FeedForward(4, 16, rng=0), AddNorm(4, dropout=0.0, pre_norm=True))),
    ]
    results = []
    for label, layer in layers:
        results += check_layer(randomise_params(layer, check_rng), random_input(), label=label)
    print(format_table(results))
    print("all pass:", all(r.passed for r in results))

# %% [markdown]
# ## Exercise: layer norm forward
#
# Write `my_layernorm(x, gamma, beta, eps)` for an input of any shape
# $(\dots, d)$: the mean and the (biased, divide-by-$d$) variance over the last
# axis, then $\gamma \odot \hat{x} + \beta$. Use plain NumPy. The checker
# tries 3-D and 2-D inputs, a batch of one, a constant row (variance 0),
# float32, against statistics it computes row by row with `math.fsum`.

# %%
from minitrans_course.exercises import check_layernorm


def my_layernorm(x, gamma, beta, eps):
    # your code here
    return np.zeros_like(x)


# %%
check_layernorm(my_layernorm);

# %% [markdown]
# ## Summary
#
# * A residual connection $y = x + F(x)$ has the Jacobian $I + \partial F /
#   \partial x$: the backward adds the upstream gradient to what the branch
#   sends back, so a gradient always reaches $x$.
# * Layer norm normalises each position over its $d_\text{model}$ features
#   (mean 0, variance 1), then scales by $\gamma$ and shifts by $\beta$.
# * Batch norm normalises each feature over the batch; layer norm does not
#   depend on the batch, the padding or the length, which suits variable-length
#   sequences and one-token-at-a-time decoding.
# * The paper uses post-norm, $\text{LayerNorm}(x + \text{Dropout}(F(x)))$;
#   pre-norm, $x + \text{Dropout}(F(\text{LayerNorm}(x)))$, keeps the residual
#   path a pure identity and needs a final norm at the end of a stack.
#
# ## Next
#
# [Lesson 10](10_feed_forward_and_output.ipynb), the feed-forward network and
# the output layer.

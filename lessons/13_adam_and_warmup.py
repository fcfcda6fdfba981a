# %% [markdown]
# # Lesson 13: Adam and the warm-up schedule
#
# The model computes gradients; an optimiser turns them into parameter
# updates. The paper trains with Adam and a learning rate that first rises,
# then decays (§5.3). This lesson takes both apart.
#
# In this lesson:
#
# 1. the Adam update, and one step of `minitrans.Adam` recomputed by hand;
# 2. why Adam corrects the bias of its moment estimates;
# 3. SGD against Adam on a badly scaled quadratic;
# 4. AdamW's decoupled weight decay, in a sentence;
# 5. the paper's learning-rate schedule, for several warm-ups and model widths;
# 6. why warm up at all: Adam's estimates are noisy at first;
# 7. gradient clipping by the global norm;
# 8. exercises: an Adam step, the schedule and clipping, written yourself.

# %%
import matplotlib.pyplot as plt
import numpy as np

import minitrans
from minitrans.training.optimisation.clipping import global_grad_norm

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)

np.set_printoptions(precision=6, suppress=True)

# %% [markdown]
# ## 1. The Adam update
#
# Adam (Kingma and Ba, 2015) keeps two running averages for every parameter
# $w$, both of the same shape as $w$ and both starting at zero: $m$, of the
# gradient $g$, and $v$, of its square. At step $t = 1, 2, \dots$:
#
# $$m_t = \beta_1 m_{t-1} + (1 - \beta_1)\, g_t, \qquad
# v_t = \beta_2 v_{t-1} + (1 - \beta_2)\, g_t^2,$$
#
# $$\hat m_t = \frac{m_t}{1 - \beta_1^t}, \qquad
# \hat v_t = \frac{v_t}{1 - \beta_2^t}, \qquad
# w_t = w_{t-1} - \text{lr}_t \, \frac{\hat m_t}{\sqrt{\hat v_t} + \epsilon},$$
#
# all element by element. The paper (§5.3) uses $\beta_1 = 0.9$,
# $\beta_2 = 0.98$ and $\epsilon = 10^{-9}$, the defaults of `minitrans.Adam`.
# $\hat m / \sqrt{\hat v}$ is a gradient divided by its own typical size, so
# every weight moves by roughly $\text{lr}$ per step, whatever the scale of
# its gradient.
#
# In minitrans the update of one parameter is a pure function,
# `adam_update(param, grad, m, v, t, lr, betas, eps)` in
# `minitrans/training/optimisation/adam.py`. Its reference version reads as the
# equations above, $\hat m$ and $\hat v$ included; `minitrans.Adam`, beside it, only
# decides which parameters to update, in which blocks and on which threads
# (with `minitrans/training/optimisation/optimizer.py`). By default it runs the fast twin,
# `adam_update_fast`, the same numbers computed in place in one scratch array.

# %%
import inspect

from minitrans.training.optimisation.adam import adam_update_reference

print(inspect.getsource(adam_update_reference))

# %% [markdown]
# An optimiser updates a `Module`'s parameters from its `grads`, by name. The
# smallest such module holds one parameter; we set its gradient by hand.

# %%
class Params(minitrans.Module):
    """A module holding one parameter "w", for optimiser experiments."""
    def __init__(self, values):
        super().__init__()
        self.add_param("w", minitrans.from_host(np.asarray(values, dtype=float)))

with minitrans.using(dtype="float64"):
    model = Params([0.5, -1.0, 2.0])
    adam = minitrans.Adam(model, lr=0.01)
    print("betas", (adam.beta1, adam.beta2), "eps", adam.eps)

    w = np.array([0.5, -1.0, 2.0])          # our copy, updated by hand
    m, v = np.zeros(3), np.zeros(3)
    beta1, beta2, eps, lr = 0.9, 0.98, 1e-9, 0.01
    scales = np.array([1.0, 10.0, 0.001])   # f(w) = sum(scales * w^2) / 2, so g = scales * w
    for t in (1, 2, 3):
        g = scales * minitrans.to_numpy(model.params["w"])
        model.zero_grad()
        model.grads["w"] += minitrans.from_host(g)
        adam.step()

        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        m_hat, v_hat = m / (1 - beta1**t), v / (1 - beta2**t)
        w = w - lr * m_hat / (np.sqrt(v_hat) + eps)
        print(f"step {t}: minitrans w = {minitrans.to_numpy(model.params['w'])}, by hand w = {w}, "
              f"max difference {np.abs(w - model.params['w']).max():.0e}")
    print("m:", adam.m["w"], " by hand:", m)
    print("v:", adam.v["w"], " by hand:", v)

# %% [markdown]
# The two agree to the last digit. Notice the steps: the three coordinates
# have gradients of very different sizes (scales 1, 10 and 0.001), yet each
# moved by almost exactly $\text{lr} = 0.01$ per step.
#
# ## 2. Why bias correction
#
# $m$ starts at 0, so after $t$ steps
# $m_t = (1 - \beta_1) \sum_{k=1}^{t} \beta_1^{t-k} g_k$, and if the gradients
# have mean $\mu$, $\mathbb{E}[m_t] = (1 - \beta_1^t)\,\mu$: at step 1 only
# a tenth of it. Dividing by $1 - \beta_1^t$ removes exactly that shrinkage;
# likewise for $v$ with $1 - \beta_2^t$. Below, `minitrans.Adam` runs on
# gradients drawn from $\mathcal{N}(1, 0.5^2)$, and we read its state
# (`adam.m`, `adam.v`) after every step.

# %%
rng = np.random.default_rng(0)
with minitrans.using(dtype="float64"):
    model = Params([0.0])
    adam = minitrans.Adam(model, lr=1e-3)
    history = {"m": [], "v": []}
    for t in range(1, 101):
        model.zero_grad()
        model.grads["w"] += minitrans.from_host(rng.normal(1.0, 0.5, size=1))
        adam.step()
        history["m"].append(float(adam.m["w"][0]))
        history["v"].append(float(adam.v["w"][0]))

steps = np.arange(1, 101)
m_raw, v_raw = np.array(history["m"]), np.array(history["v"])
m_hat, v_hat = m_raw / (1 - 0.9**steps), v_raw / (1 - 0.98**steps)

fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
axes[0].plot(steps, m_raw, label="m (raw)")
axes[0].plot(steps, m_hat, label="m̂ = m / (1 - 0.9ᵗ)")
axes[0].axhline(1.0, color="gray", linestyle=":", label="true mean of g")
axes[0].set_title("First moment, β₁ = 0.9")
axes[1].plot(steps, np.sqrt(v_raw), label="√v (raw)")
axes[1].plot(steps, np.sqrt(v_hat), label="√v̂ = √(v / (1 - 0.98ᵗ))")
axes[1].axhline(np.sqrt(1.25), color="gray", linestyle=":", label="true √E[g²]")
axes[1].set_title("Second moment, β₂ = 0.98")
for ax in axes:
    ax.set_xlabel("step t")
    ax.set_ylabel("estimate")
    ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

ratio = (1 - 0.9**steps) / np.sqrt(1 - 0.98**steps)
print("without correction, the step m/√v would be this many times m̂/√v̂:")
print({t: round(float(ratio[t - 1]), 2) for t in (1, 5, 10, 20, 50, 100)})

# %% [markdown]
# The raw estimates start far too small and catch up slowly: the raw $m$ is
# short by the factor $1 - 0.9^t$ (0.88 at step 20), the raw $\sqrt v$ by
# $\sqrt{1 - 0.98^t}$ (0.58 at step 20, still 0.93 at step 100). The
# corrected ones are unbiased from step 1 and only fluctuate with the noise
# of the gradients. Since $\beta_2 > \beta_1$, $v$ is the slower of the two,
# and without the correction the early steps would be off by a varying
# factor: 0.71 at step 1, then up to about 1.55 times too large around step 15.
#
# ## 3. SGD against Adam on a badly scaled quadratic
#
# Take $f(w) = \tfrac12 (a\,w_1^2 + b\,w_2^2)$ with $a = 1$, $b = 100$:
# a long, narrow valley. The gradient is $(a w_1, b w_2)$. Plain SGD,
# $w \leftarrow w - \text{lr}\, g$, multiplies $w_2$ by $1 - \text{lr}\,b$
# each step, which diverges unless $\text{lr} < 2/b = 0.02$; at that
# learning rate $w_1$ shrinks by only $1 - \text{lr}\,a \approx 0.98$ per step.
# One learning rate cannot suit both directions. Adam divides each
# coordinate by its own gradient size, so both move at about $\text{lr}$ per
# step. We run `minitrans.SGD` and `minitrans.Adam` on a `Params` module for
# 100 steps, computing the gradient by hand each step.

# %%
a, b = 1.0, 100.0

def loss(w):
    return 0.5 * (a * w[0] ** 2 + b * w[1] ** 2)

def run(make_optimizer, steps=100, start=(-4.0, 1.5)):
    """The trajectory (steps + 1, 2) of an optimiser on the quadratic."""
    with minitrans.using(dtype="float64"):
        model = Params(start)
        optimizer = make_optimizer(model)
        path = [minitrans.to_numpy(model.params["w"]).copy()]
        for _ in range(steps):
            w = minitrans.to_numpy(model.params["w"])
            model.zero_grad()
            model.grads["w"] += minitrans.from_host(np.array([a * w[0], b * w[1]]))
            optimizer.step()
            path.append(minitrans.to_numpy(model.params["w"]).copy())
    return np.array(path)

paths = {
    "SGD, lr 0.019": run(lambda model: minitrans.SGD(model, lr=0.019)),
    "Adam, lr 0.1": run(lambda model: minitrans.Adam(model, lr=0.1)),
}
too_fast = run(lambda model: minitrans.SGD(model, lr=0.021))
print(f"SGD with lr 0.021 > 2/b: loss after 100 steps {loss(too_fast[-1]):.1e} (diverged)")
for label, path in paths.items():
    print(f"{label}: loss after 10, 50, 100 steps:",
          ", ".join(f"{loss(path[t]):.1e}" for t in (10, 50, 100)))

fig, axes = plt.subplots(1, 2, figsize=(11, 4))
X, Y = np.meshgrid(np.linspace(-4.5, 1.5, 200), np.linspace(-2, 2, 200))
axes[0].contour(X, Y, loss((X, Y)), levels=np.logspace(-2, 2.5, 10), colors="gray", linewidths=0.6)
for label, path in paths.items():
    axes[0].plot(path[:, 0], path[:, 1], ".-", markersize=3, linewidth=1, label=label)
axes[0].plot(0, 0, "k*", markersize=10, label="minimum")
axes[0].set_title("Trajectories on f = (w₁² + 100 w₂²) / 2")
axes[0].set_xlabel("w₁ (flat direction)")
axes[0].set_ylabel("w₂ (steep direction)")
axes[0].legend(fontsize=8)
for label, path in paths.items():
    axes[1].semilogy([loss(w) for w in path], label=label)
axes[1].set_title("Loss per step")
axes[1].set_xlabel("step")
axes[1].set_ylabel("f(w)")
axes[1].legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# SGD zig-zags across the steep direction (its factor $1 - 0.019 \cdot 100
# = -0.9$ flips the sign of $w_2$ every step) while crawling along the flat
# one. Adam's first steps go diagonally, the same distance along both axes,
# and it reaches a far lower loss. A Transformer's loss is a valley like
# this in millions of directions, with gradients that differ by orders of
# magnitude from one parameter to the next (the embedding row of a rare word
# gets a gradient only in the batches that contain the word). Adam's
# per-parameter scaling is one reason it, not plain SGD, is the usual choice.
#
# ## 4. AdamW in one sentence
#
# Adding weight decay $\lambda w$ to the gradient, as for SGD, lets Adam's
# division by $\sqrt{\hat v}$ rescale it differently for every weight, so
# AdamW (Loshchilov and Hutter, 2019) *decouples* it: the update becomes
# $w \leftarrow w - \text{lr}\,\big(\hat m / (\sqrt{\hat v} + \epsilon) + \lambda w\big)$,
# which is `minitrans.Adam(model, weight_decay=λ)` (the paper uses none).
#
# ## 5. The learning-rate schedule
#
# The paper varies the learning rate over training (§5.3):
#
# $$\text{lrate} = d_\text{model}^{-0.5} \cdot \min\big(\text{step}^{-0.5},\;
# \text{step} \cdot \text{warmup\_steps}^{-1.5}\big),$$
#
# with $\text{warmup\_steps} = 4000$. For $\text{step} < \text{warmup}$ the
# second term is the smaller: the rate rises linearly. After it, the rate
# decays as $1/\sqrt{\text{step}}$. The two meet at step = warmup, where the
# rate peaks at $(d_\text{model} \cdot \text{warmup})^{-1/2}$.
# `minitrans.transformer_lr(step, d_model, warmup, factor=1.0)` computes it
# (steps count from 1); `factor` scales the whole curve.

# %%
steps = np.arange(1, 30001)

def schedule(d_model, warmup):
    return np.array([minitrans.transformer_lr(int(step), d_model, warmup) for step in steps])

fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for warmup in (1000, 4000, 8000):
    axes[0].plot(steps, schedule(512, warmup), label=f"warmup {warmup}")
axes[0].set_title("d_model = 512, several warm-ups")
for d_model in (512, 64):
    axes[1].plot(steps, schedule(d_model, 4000), label=f"d_model {d_model}")
axes[1].set_title("warmup = 4000, two model widths")
for ax in axes:
    ax.set_xlabel("training step")
    ax.set_ylabel("learning rate")
    ax.legend()
fig.tight_layout()
plt.show()

for d_model, warmup in [(512, 1000), (512, 4000), (512, 8000), (64, 4000)]:
    peak = minitrans.transformer_lr(warmup, d_model, warmup)
    print(f"d_model {d_model:3d}, warmup {warmup}: peak {peak:.2e} at step {warmup} "
          f"(formula (d_model * warmup)^-0.5 = {(d_model * warmup) ** -0.5:.2e}), "
          f"at step 30000: {minitrans.transformer_lr(30000, d_model, warmup):.2e}")

# %% [markdown]
# A longer warm-up means a lower, later peak; after it all the curves with the
# same $d_\text{model}$ coincide (the decay $d_\text{model}^{-0.5}\,
# \text{step}^{-0.5}$ does not depend on the warm-up). A narrower model gets
# a larger rate, by $\sqrt{512/64} \approx 2.8$ here. minitrans's toy tasks
# train for a few hundred to a few thousand steps, so they use a shorter
# warm-up and a `--lr-factor`. The warm-up (`--warmup`) is 100 steps by
# default for the `copy` and `reverse` tasks, and 400 for `translate`, `lm`,
# `numbers`, `dates` and a corpus of one's own (`--data`).
#
# Try it with two sliders, warm-up and $d_\text{model}$ (they move in the
# page, or in JupyterLab in a trusted notebook; the picture under the figure
# shows three warm-ups at $d_\text{model} = 256$):

# %%
from IPython.display import display
from minitrans_course.interactive_figures import learning_rate_figure

schedule_figure = learning_rate_figure()
display(schedule_figure)
schedule_figure.static(pyplot=True)
plt.show()

# %% [markdown]
#
# ## 6. Why warm up?
#
# A large learning rate at step 1 seems harmless with Adam, whose steps are
# about $\text{lr}$ in size anyway. The trouble is what those first steps are
# made of. At step 1, $\hat v_1 = g_1^2$ and $\hat m_1 = g_1$: the update is
# $\text{lr} \cdot \operatorname{sign}(g_1)$, a full-size step for every
# weight, decided by a single noisy gradient. $\hat v$ is an average over
# about $1/(1 - \beta_2) = 50$ steps, and until it has seen that many it is a
# noisy estimate of the gradient's size; so is $\hat m$, over about 10 steps,
# of its direction (Liu et al., 2020, analyse this variance and propose
# RAdam). Warm-up keeps the learning rate small while the estimates are poor.
# (Post-norm Transformers, the paper's arrangement, are also known to train
# badly without it, pre-norm ones much less so; Xiong et al., 2020.)
#
# We can watch it. 2,000 weights each get gradients with a small true mean
# (0.1) buried in noise of standard deviation 1, as minibatch gradients are.
# `minitrans.Adam` runs with $\text{lr} = 1$, so each update is
# $\hat m / (\sqrt{\hat v} + \epsilon)$ itself; we measure, per step, how
# scattered $\hat v$ is across the weights (they all have the same true
# $\mathbb{E}[g^2] = 1.01$), how large the updates are, and how many go
# downhill.

# %%
rng = np.random.default_rng(1)
count, true_mean = 2000, 0.1
with minitrans.using(dtype="float64"):
    model = Params(np.zeros(count))
    adam = minitrans.Adam(model, lr=1.0)
    spread, size, downhill = [], [], []
    for t in range(1, 301):
        before = minitrans.to_numpy(model.params["w"]).copy()
        model.zero_grad()
        model.grads["w"] += minitrans.from_host(rng.normal(true_mean, 1.0, size=count))
        adam.step()
        update = minitrans.to_numpy(model.params["w"]) - before
        v_hat = minitrans.to_numpy(adam.v["w"]) / (1 - adam.beta2**t)
        spread.append(v_hat.std() / v_hat.mean())
        size.append(np.abs(update).mean())
        downhill.append((update < 0).mean())      # the true gradient is +0.1: downhill is negative

fig, axes = plt.subplots(1, 2, figsize=(11, 4))
axes[0].plot(range(1, 301), spread)
axes[0].set_title("How noisy is v̂? (all weights have the same E[g²])")
axes[0].set_xlabel("step")
axes[0].set_ylabel("std / mean of v̂ across 2000 weights")
axes[1].plot(range(1, 301), size, label="mean |update| / lr")
axes[1].plot(range(1, 301), downhill, label="fraction of weights moving downhill")
axes[1].set_title("Adam's updates on noisy gradients")
axes[1].set_xlabel("step")
axes[1].set_ylabel("value")
axes[1].set_ylim(0, 1.05)
axes[1].legend(fontsize=8)
fig.tight_layout()
plt.show()
print({t: (round(float(spread[t - 1]), 2), round(float(size[t - 1]), 2),
           round(float(downhill[t - 1]), 2))
       for t in (1, 10, 50, 300)}, "  (spread of v̂, |update|/lr, fraction downhill)")

# %% [markdown]
# At step 1 every weight moves by the full learning rate, and barely more
# than half of them (53%) in the right direction: a step of pure noise, as
# large as any step will ever be. $\hat v$'s spread across weights that
# should all agree starts at about 140% and needs tens of steps to settle;
# the updates shrink to about a fifth of $\text{lr}$ and more of them
# point downhill (two thirds) as $\hat m$ averages out the noise. Warm-up matches the
# schedule to this: tiny learning rates while Adam's estimates are unreliable,
# the full rate once they have averaged enough gradients.
#
# ## 7. Gradient clipping by the global norm
#
# One bad batch can produce a huge gradient and throw the weights far away.
# Clipping caps the step: compute the **global** norm over every gradient of
# the model, $\|g\| = \sqrt{\sum_\text{all tensors} \sum g^2}$, and if it
# exceeds a limit $c$, multiply every gradient by $c / \|g\|$. Because all
# tensors are scaled by the same factor, the direction of the whole update is
# unchanged; only its length is capped. The paper does not mention clipping;
# minitrans's trainer clips at $c = 1$ by default (`clip_norm`), and
# `minitrans.clip_grad_norm(model, c)` returns the norm before clipping,
# which the trainer logs.

# %%
with minitrans.using(dtype="float64"):
    layer = minitrans.Linear(4, 3, rng=0)
    x = minitrans.from_host(np.random.default_rng(2).standard_normal((8, 4)))      # (N, d_in)
    dy = minitrans.from_host(np.random.default_rng(3).standard_normal((8, 3)))     # (N, d_out)

    def gradients_for(scale):
        layer.zero_grad()
        layer.forward(x)
        layer.backward(dy * scale)
        return np.concatenate([minitrans.to_numpy(g).ravel()
                               for _, _, g in layer.named_parameters()])

    for scale in (0.01, 100.0):
        before = gradients_for(scale)
        returned = minitrans.clip_grad_norm(layer, 1.0)
        after = np.concatenate([minitrans.to_numpy(g).ravel()
                                for _, _, g in layer.named_parameters()])
        cosine = before @ after / (np.linalg.norm(before) * np.linalg.norm(after))
        print(f"upstream x {scale:6}: norm before {returned:8.3f}, after "
              f"{global_grad_norm(layer):6.3f}, "
              f"cosine(before, after) = {cosine:.6f}")

    scales = np.logspace(-2, 3, 30)
    norms_before, norms_after = [], []
    for scale in scales:
        gradients_for(scale)
        norms_before.append(minitrans.clip_grad_norm(layer, 1.0))
        norms_after.append(global_grad_norm(layer))

fig, ax = plt.subplots(figsize=(6, 4))
ax.loglog(norms_before, norms_after, "o-", markersize=3)
ax.axvline(1.0, color="gray", linestyle=":", label="max_norm = 1")
ax.set_title("clip_grad_norm(model, 1.0)")
ax.set_xlabel("global gradient norm before")
ax.set_ylabel("global gradient norm after")
ax.legend()
plt.show()

# %% [markdown]
# Below the limit nothing changes; above it the norm is exactly 1 and the
# direction is the same (cosine 1). Clipping each tensor separately would not
# keep the direction: it would shrink some tensors more than others.

# %% [markdown]
# ## Exercises: an Adam step, the schedule, clipping
#
# Three functions in plain NumPy, each checked against a reference that works
# number by number with `math` (not with minitrans's own functions):
#
# * `my_adam_step(param, grad, m, v, t, lr, beta1, beta2, eps)` returns
#   `(new_param, new_m, new_v)`, new arrays of the shape of `param`, for step
#   $t = 1, 2, \dots$ as in section 1. The cases: step 1 with $m = v = 0$
#   (where the bias correction matters most), $t = 10^6$, a zero gradient,
#   gradients of $10^{-6}$ (where $\epsilon$ counts: it goes *outside* the
#   square root), other betas, float32.
# * `my_learning_rate(steps, d_model, warmup, factor)`: the schedule of
#   section 5 for an int array of steps (from 1), same shape. The cases
#   include the peak (step = warmup), step 1 and steps of $10^9$.
# * `my_clip(grads, max_norm)`: `grads` a list of arrays of any shapes;
#   return the list clipped by the global norm as in section 7 (unchanged
#   when the norm is at most `max_norm`).

# %%
from minitrans_course.exercises_training import (check_adam_step, check_clip_by_global_norm,
                                                check_learning_rate)


def my_adam_step(param, grad, m, v, t, lr, beta1, beta2, eps):
    # your code here
    return np.zeros_like(param), np.zeros_like(m), np.zeros_like(v)


def my_learning_rate(steps, d_model, warmup, factor):
    # your code here
    return np.zeros(np.shape(steps))


def my_clip(grads, max_norm):
    # your code here
    return [np.zeros_like(g) for g in grads]


# %%
check_adam_step(my_adam_step)
check_learning_rate(my_learning_rate)
check_clip_by_global_norm(my_clip);

# %% [markdown]
# ## Summary
#
# * Adam keeps running means $m$ of $g$ and $v$ of $g^2$, corrects their
#   start-at-zero bias, and moves each weight by about
#   $\text{lr} \cdot \hat m / \sqrt{\hat v}$; the paper uses
#   $\beta_1 = 0.9$, $\beta_2 = 0.98$, $\epsilon = 10^{-9}$.
# * On a badly scaled problem one SGD learning rate cannot suit every
#   direction; Adam's per-weight scaling can. AdamW adds weight decay to the
#   step, not to the gradient.
# * The paper's schedule rises linearly for `warmup` steps, peaks at
#   $(d_\text{model} \cdot \text{warmup})^{-1/2}$ and decays as $1/\sqrt{\text{step}}$.
# * Warm-up exists because Adam's first steps are full-size and decided by
#   estimates made from a handful of noisy gradients.
# * Clipping by the global norm caps the length of an update without changing
#   its direction.
#
# ## Next
#
# [Lesson 14](14_training_copy_and_translation.ipynb), training on copy and on
# translation: the model, its loss, Adam and the schedule together.

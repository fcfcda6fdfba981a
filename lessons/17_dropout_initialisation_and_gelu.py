# %% [markdown]
# # Lesson 17: Dropout, initialisation and GELU
#
# Three details that the paper states in a line each, and that decide
# whether a model trains at all and how well it does on sentences it has
# never seen: the scale of the random numbers a model starts from, dropout
# (§5.4, $P_{drop} = 0.1$), and the activation of the feed-forward network,
# where later models (BERT, GPT-2) replaced the paper's ReLU by the GELU.
#
# In this lesson:
#
# 1. why the scale of the initial weights matters, measured through a stack
#    of layers, forward and backward; Xavier's scale, and He's for ReLU;
# 2. the embeddings: $\mathcal{N}(0, 1/d_\text{model})$ times
#    $\sqrt{d_\text{model}}$, against the positional encoding, and what tying
#    them to the output layer asks of their scale;
# 3. inverted dropout: what it does to one array, where the Transformer
#    applies it, and what it does to a small model's held-out loss;
# 4. the GELU, exact and approximated, against ReLU, and minitrans's
#    `activation="gelu"`;
# 5. three exercises: dropout, the GELU's backward, Xavier's bound.

# %%
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one BLAS thread; set before NumPy loads

import math
import tempfile

import matplotlib.pyplot as plt
import numpy as np

import minitrans
from minitrans.data.tasks import load_task
from minitrans.training.optimisation import evaluation
from minitrans.training.experiment import build_model
from minitrans.training.trainer import TrainConfig, Trainer

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)

print("minitrans", minitrans.__version__, "| backend:", minitrans.core.backend.backend_name(),
      "| dtype:", minitrans.get_dtype())

# %% [markdown]
# ## 1. Why the scale of the initial weights matters
#
# A layer $y = xW$ with $x$ of $n_\text{in}$ independent entries of variance
# $v$ and $W$ of independent entries with mean 0 and variance $\sigma^2$
# gives entries of variance
#
# $$\mathrm{Var}(y_j) = \sum_{i=1}^{n_\text{in}} \mathrm{Var}(x_i W_{ij})
#   = n_\text{in}\,\sigma^2\,v .$$
#
# Each layer multiplies the variance by $n_\text{in}\sigma^2$. Through $L$
# layers that factor is raised to the power $L$: a little too small and the
# signal dies, a little too large and it explodes. The backward is the same
# story the other way round: $dx = dy\,W^\top$ sums over the $n_\text{out}$
# outputs, so the gradient's variance is multiplied by $n_\text{out}\sigma^2$
# per layer.
#
# We measure it: a batch of 512 random vectors through 20 layers of width
# 256, no activation in between, weights uniform in $[-a, a]$ (variance
# $a^2/3$). Glorot and Bengio (2010) chose
#
# $$a = \sqrt{\frac{6}{n_\text{in} + n_\text{out}}}, \qquad
#   \mathrm{Var}(W) = \frac{2}{n_\text{in} + n_\text{out}} ,$$
#
# which is $1/256$ here, so $n_\text{in}\sigma^2 = 1$ exactly. We try half
# and twice that bound too. Going back, a random gradient enters at the top
# and is carried down by $dx = dy\,W^\top$ (and, with ReLU, zeroed where the
# layer's input was negative).

# %%
def xavier_bound(fan_in, fan_out):
    return math.sqrt(6.0 / (fan_in + fan_out))


def through_stack(widths, bound, relu=False, seed=0):
    """Push a batch forward through Linear layers (widths[i] -> widths[i+1]),
    weights U[-bound(n_in, n_out), +...], then a random gradient back.
    Returns (std of the activations after each layer, std of the gradient
    arriving at each layer's input, bottom to top)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((512, widths[0]))
    weights, inputs, forward_std = [], [], []
    for n_in, n_out in zip(widths[:-1], widths[1:]):
        a = bound(n_in, n_out)
        W = rng.uniform(-a, a, size=(n_in, n_out))
        weights.append(W)
        inputs.append(x)
        x = x @ W
        if relu:
            x = np.maximum(x, 0.0)
        forward_std.append(x.std())
    dy, backward_std = rng.standard_normal(x.shape), []
    for W, x_in, layer in zip(weights[::-1], inputs[::-1], range(len(weights), 0, -1)):
        if relu:
            dy = dy * (x_in @ W > 0)  # the ReLU after this layer
        dy = dy @ W.T
        backward_std.append(dy.std())
    return np.array(forward_std), np.array(backward_std[::-1])


L, width = 20, 256
widths = [width] * (L + 1)
settings = {
    "Xavier / 2": (lambda i, o: 0.5 * xavier_bound(i, o), False),
    "Xavier": (xavier_bound, False),
    "Xavier x 2": (lambda i, o: 2.0 * xavier_bound(i, o), False),
    "Xavier, with ReLU": (xavier_bound, True),
    "He, with ReLU": (lambda i, o: math.sqrt(6.0 / i), True),
}
stds = {name: through_stack(widths, bound, relu) for name, (bound, relu) in settings.items()}

fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
for name, (forward_std, backward_std) in stds.items():
    style = "--" if "ReLU" in name else "-"
    axes[0].semilogy(range(1, L + 1), forward_std, style, marker=".", label=name)
    axes[1].semilogy(range(1, L + 1), backward_std, style, marker=".", label=name)
axes[0].set(title="forward: std of each layer's output", xlabel="layer")
axes[1].set(title="backward: std of the gradient at each layer's input", xlabel="layer")
axes[0].legend()
plt.tight_layout()
plt.show()
for name, (forward_std, backward_std) in stds.items():
    print(f"{name:18s} after 20 layers: activations {forward_std[-1]:9.2e}, "
          f"gradient at the bottom {backward_std[0]:9.2e}")

# %% [markdown]
# With Xavier's bound both curves stay flat near 1. Half the bound
# multiplies the variance by $1/4$ per layer, the standard deviation by
# $1/2$: after 20 layers $2^{-20} \approx 10^{-6}$, and the gradient that
# reaches the bottom layers vanishes the same way. Twice the bound explodes
# by $2^{20} \approx 10^{6}$. The Transformer is deep (6 layers of 2 to 3
# sub-layers each, and each sub-layer has two or more matrices), so this is
# not an academic point, although its residual connections and layer
# normalisation (lesson 9) forgive a lot more than a plain stack does.
#
# **ReLU** zeroes half of a symmetric input, and halves the mean square with
# it: with Xavier's bound the signal then shrinks by $\sqrt{2}$ per layer.
# He et al. (2015) double the variance for ReLU networks,
# $\mathrm{Var}(W) = 2/n_\text{in}$ (bound $\sqrt{6/n_\text{in}}$), and the
# dashed He curve is flat. The Transformer keeps Xavier for its feed-forward
# layers: it has only one ReLU per sub-layer, followed by a residual
# addition and a layer norm that restores the scale.
#
# ### $n_\text{in}$ against $n_\text{out}$
#
# Above every layer was square. When it is not, the forward wants
# $\sigma^2 = 1/n_\text{in}$ and the backward wants $\sigma^2 =
# 1/n_\text{out}$: no single variance satisfies both. Xavier's
# $2/(n_\text{in} + n_\text{out})$ is the compromise, the harmonic mean of
# the two. The feed-forward network's $W_1$ is $(d_\text{model},
# d_\text{ff}) = (d, 4d)$. Per layer, the factors by which each choice
# multiplies the forward and the backward variance, measured through one
# such layer:

# %%
def variance_factors(n_in, n_out, var_w, seed=1):
    """(Var(x W) / Var(x), Var(dy W^T) / Var(dy)) for one layer, measured."""
    rng = np.random.default_rng(seed)
    a = math.sqrt(3 * var_w)  # U[-a, a] has variance a^2 / 3
    W = rng.uniform(-a, a, size=(n_in, n_out))
    x, dy = rng.standard_normal((4096, n_in)), rng.standard_normal((4096, n_out))
    return (x @ W).var() / x.var(), (dy @ W.T).var() / dy.var()


n_in, n_out = 128, 512
print(f"one layer ({n_in}, {n_out}):                forward x    backward x")
for name, var_w in [("1 / n_in  (LeCun)", 1 / n_in), ("1 / n_out", 1 / n_out),
                    ("2 / (n_in + n_out)  (Xavier)", 2 / (n_in + n_out))]:
    forward_factor, backward_factor = variance_factors(n_in, n_out, var_w)
    print(f"  Var(W) = {name:30s} {forward_factor:6.3f}     {backward_factor:6.3f}")

# %% [markdown]
# $1/n_\text{in}$ keeps the forward exact and multiplies the gradient's
# variance by 4; $1/n_\text{out}$ does the opposite; Xavier splits the
# difference (0.4 forward, 1.6 backward), and in the Transformer $W_1$ is
# followed by $W_2 = (4d, d)$, whose factors are the other way round, so
# that the pair multiplies both by about 0.64. minitrans's `Linear` draws
# every projection this way (`minitrans/layers/init.py`, `xavier_uniform`);
# one of the base model's $W_1$:

# %%
with minitrans.using(dtype="float64"):
    W_1 = minitrans.to_numpy(minitrans.Linear(512, 2048, rng=0).params["W"])
print(f"W_1 (512, 2048): max |w| = {np.abs(W_1).max():.5f}, bound {xavier_bound(512, 2048):.5f}; "
      f"std {W_1.std():.5f}, sqrt(2 / (512 + 2048)) = {math.sqrt(2 / 2560):.5f}")

# %% [markdown]
# ## 2. The embeddings: $\mathcal{N}(0, 1/d_\text{model})$ times $\sqrt{d_\text{model}}$
#
# The embedding is a table, not a layer with inputs to balance, so Xavier's
# argument does not apply. What matters is how its output compares with what
# it is added to: the positional encoding, whose entries are sines and
# cosines, mean square $1/2$. The paper multiplies the embedding by
# $\sqrt{d_\text{model}}$ (§3.4); minitrans draws the table from
# $\mathcal{N}(0, 1/d_\text{model})$, so that after the multiplication each
# entry has variance 1 and a token's vector has norm about
# $\sqrt{d_\text{model}}$, while a row of the positional encoding has norm
# exactly $\sqrt{d_\text{model}/2}$. Measured for the base model's width:

# %%
d_model, vocab = 512, 1000
with minitrans.using(dtype="float64"):
    embedding = minitrans.Embedding(vocab, d_model, rng=0)
    tokens = minitrans.to_numpy(embedding.forward(np.arange(vocab)[None, :]))[0]  # (vocab, d_model)
    table = minitrans.to_numpy(embedding.params["W_E"])
pe = minitrans.sinusoidal_table(100, d_model)
print(f"W_E entries:              std {table.std():.4f}  (1/sqrt(d_model) = {d_model**-0.5:.4f})")
print(f"embedding * sqrt(d_model): std {tokens.std():.4f}, mean norm of a token "
      f"{np.linalg.norm(tokens, axis=1).mean():.2f}  (sqrt(d_model) = {math.sqrt(d_model):.2f})")
print(f"positional encoding:       rms {np.sqrt((pe**2).mean()):.4f}, norm of a row "
      f"{np.linalg.norm(pe, axis=1).mean():.2f}  "
      f"(sqrt(d_model / 2) = {math.sqrt(d_model / 2):.2f})")
print(f"without the sqrt(d_model) scale a token's norm would be "
      f"{np.linalg.norm(table, axis=1).mean():.2f}: the position would drown the word")

# %% [markdown]
# The word and the position arrive at comparable sizes, the word somewhat
# larger. Without the scale the token vectors would be 16 times shorter
# than the positional encoding they are added to.
#
# **Tying** (§3.4, `tie_embeddings=True`) uses the same table, transposed,
# as the output projection: $\text{logits} = y\,W_E^\top$. Its input $y$
# comes out of a layer norm, entries of about unit variance, so each logit
# sums $d_\text{model}$ products of variance $1 \cdot 1/d_\text{model}$: the
# logits start with variance about 1, a softmax that is not saturated and an
# initial loss near $\log V$. That is why the table is drawn small and the
# scale put in the forward: a table of unit entries would serve the input
# side, but give logits of standard deviation $\sqrt{d_\text{model}}$:

# %%
rng = np.random.default_rng(2)
y = rng.standard_normal((256, d_model))  # the last layer norm's output, entries ~ N(0, 1)
targets = rng.integers(vocab, size=256)
for name, W_E in [("N(0, 1/d_model) (minitrans)", table),
                  ("N(0, 1)", rng.standard_normal((vocab, d_model)))]:
    logits = y @ W_E.T
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = -log_probs[np.arange(256), targets].mean()
    print(f"W_E ~ {name:28s}: logits std {logits.std():6.2f}, initial loss {loss:6.2f} "
          f"= {loss / math.log(vocab):4.1f} x log V")

# %% [markdown]
# With unit entries the untrained model is confidently wrong, a loss about
# ten times $\log V$, and its first updates must undo that before they
# learn anything. (Not tied, the output projection is a `Linear`-style
# Xavier matrix $(d_\text{model}, V)$, whose variance $2/(d_\text{model} +
# V)$ gives logits of variance below 1.)
#
# ## 3. Dropout
#
# During training, dropout (Srivastava et al., 2014) sets each element of
# an array to 0 with probability $p$. A model can then not rely on any one
# unit being there, and has to spread what it knows over many: it is harder
# to memorise the training set. The paper applies it, with
# $P_{drop} = 0.1$, "to the output of each sub-layer, before it is added to
# the sub-layer input and normalized", and "to the sums of the embeddings
# and the positional encodings" (§5.4).
#
# **Inverted dropout** divides the kept elements by $1 - p$ at training
# time:
#
# $$y = \frac{x \odot m}{1 - p}, \quad m_i \sim \text{Bernoulli}(1 - p),
#   \qquad \mathbb{E}[y_i] = \frac{(1-p)\,x_i}{1-p} = x_i ,$$
#
# so the expected value of every element is unchanged, and at evaluation
# time dropout is simply switched off: $y = x$, nothing to rescale. The
# backward uses the same mask and the same scale, $dx = dy \odot m / (1-p)$.
# minitrans's `Dropout` in training and in evaluation mode:

# %%
with minitrans.using(dtype="float64"):
    dropout = minitrans.Dropout(0.3, rng=0)
    x = np.full((1000, 1000), 2.0)
    y = minitrans.to_numpy(dropout.forward(x))
    print(f"training: {np.mean(y == 0):.4f} of the elements dropped (p = 0.3), the kept ones "
          f"{y[y > 0][0]:.4f} (= 2 / 0.7), mean {y.mean():.4f} (x = 2)")
    dropout.eval()
    print("evaluation (dropout.eval()): y equals x everywhere:",
          np.array_equal(minitrans.to_numpy(dropout.forward(x)), x))

config = minitrans.ModelConfig(vocab_size=20, d_model=16, h=2, N=2, d_ff=32, dropout=0.1)
model = minitrans.Transformer(config, rng=0)
places = [name.rstrip(".") for name, module in model.named_modules()
          if isinstance(module, minitrans.Dropout)]
print(f"{len(places)} Dropout layers in a Transformer with N = 2:")
for name in places:
    print("  ", name)

# %% [markdown]
# One after each embedding sum, one inside each sub-layer's residual
# connection (`AddNorm`: $\text{LayerNorm}(x + \text{Dropout}(F(x)))$): two
# per encoder layer, three per decoder layer. The trainer gives each step
# its own masks, derived from the seed and the step number
# (`Dropout.reset_rng(step)`), so a resumed run draws the masks the
# uninterrupted run drew.
#
# ### What dropout does to the held-out loss
#
# Dropout makes training harder on purpose, so its benefit can only show
# where a model would otherwise learn its training set by heart. We need a
# task where memorising and generalising differ: two-digit additions
# (`"12+34="` → `"46"`, the `lm` task), with only 500 of the 10,000 sums to
# train on and 300 others held out. The model is a small decoder-only one
# ($d_\text{model} = 32$, 2 layers), trained for 1,200 steps of 32 sums
# without label smoothing, once with each dropout rate. Every 150 steps we
# measure the loss on the 500 training sums and on the 300 held-out ones,
# both with dropout off. Three runs of 1,200 steps take long enough for the
# speed to matter, so they run on minitrans's fast kernels (lesson 1), the
# reference versions' equals but for dropout, whose fast masks differ.

# %%
task = load_task("lm", seed=0, num_train=500, num_valid=300)
runs = tempfile.mkdtemp(prefix="minitrans-lesson17-")
STEPS, EVERY = 1200, 150


def train_with_dropout(p):
    """Losses (train, held-out) every EVERY steps of a small LM with dropout p."""
    config = minitrans.ModelConfig(vocab_size=len(task.vocab), d_model=32, h=4, N=2, d_ff=128,
                                   dropout=p, max_len=16, decoder_only=True)
    train_config = TrainConfig(task="lm", steps=STEPS, batch_size=32, warmup=100,
                               label_smoothing=0.0, workers=1, out_dir=os.path.join(runs, str(p)))
    trainer = Trainer(build_model(config, seed=0), task, train_config, progress=False)
    curve = []
    while trainer.step < STEPS:
        trainer.train_step()
        if trainer.step % EVERY == 0:
            train_loss = evaluation.teacher_forced_metrics(trainer.model, task, task.train)
            held_out = evaluation.teacher_forced_metrics(trainer.model, task, task.valid)
            curve.append((trainer.step, train_loss["loss"], held_out["loss"],
                          held_out["token_accuracy"]))
    return np.array(curve)


with minitrans.using(kernels="fast"):  # three trainings: the fast kernels (lesson 1)
    curves = {p: train_with_dropout(p) for p in (0.0, 0.1, 0.3)}

fig, ax = plt.subplots(figsize=(8, 4.5))
for (p, curve), colour in zip(curves.items(), ["C0", "C1", "C2"]):
    ax.plot(curve[:, 0], curve[:, 1], "--", color=colour, label=f"p = {p}: training sums")
    ax.plot(curve[:, 0], curve[:, 2], "-", color=colour, label=f"p = {p}: held-out sums")
ax.set(xlabel="step", ylabel="loss of the answer's tokens (nats)",
       title="500 training sums: training vs held-out loss")
ax.legend(ncol=3, fontsize=8)
plt.show()

print("dropout   train loss   held-out loss: lowest (step)   at the end   held-out token accuracy")
for p, curve in curves.items():
    best = curve[:, 2].argmin()
    print(f"  {p:.1f}      {curve[-1, 1]:6.3f}          {curve[best, 2]:6.3f} "
          f"({int(curve[best, 0]):4d})          {curve[-1, 2]:6.3f}        {curve[-1, 3]:.1%}")

# %% [markdown]
# Without dropout (blue) the two curves part: the training loss keeps
# falling towards 0 while the held-out loss turns around at step 600 and
# climbs, far above its lowest value: the model learns the 500 sums by
# heart, and the more confident it gets about them, the more wrong it is,
# and sure of it, on the others. That is **overfitting**. Its held-out token
# accuracy at the end is close to that with $p = 0.1$ (63.8% against 65.0%)
# while its loss is far higher: what the climbing loss measures is how sure
# the model is of the answers it gets wrong. With $p = 0.1$ the training
# loss falls more slowly and the held-out loss follows it down, still
# falling at the last measurement, far below the dropout-free run's.
# $p = 0.3$ regularises so hard that in 1,200 steps the model learns slowly
# on both sets: the gap between the curves is
# smallest, but both are high. The paper found the same trade-off on
# translation: Table 3, rows (D), where $P_{drop} = 0$ is worse than 0.1 and
# 0.2 on the development set (lesson 18).
#
# This is one seed and one small task. Runs with seeds 1 to 3 (each seed
# draws the split of the sums, the initial weights and the batches; not
# shown, to keep the lesson within its minute) tell the same story: without
# dropout the held-out loss turns around at step 450 or 600 and ends the
# highest of the three (1.56 to 1.85 over the four seeds), $p = 0.1$ ends
# the lowest (0.72 to 0.96), and $p = 0.3$ in between (1.28 to 1.38). And
# the effect needs a task with something to overfit: on 200 pairs of the
# toy translation, whose sentences all come from a small grammar, the
# held-out loss of the same small model fell close to 0 without dropout and
# with $p = 0.1$, which only slowed the first steps down ($p = 0.3$ was
# still far from it after 1,200 steps).
#
# ## 4. GELU
#
# The paper's feed-forward network is $\max(0, xW_1 + b_1)W_2 + b_2$, with
# ReLU. Hendrycks and Gimpel (2016) proposed the Gaussian Error Linear Unit
#
# $$\mathrm{GELU}(x) = x\,\Phi(x) = \frac{x}{2}\left(1 +
#   \mathrm{erf}\!\left(\frac{x}{\sqrt 2}\right)\right),$$
#
# $x$ weighted by the probability that a standard normal variable is below
# it: close to 0 for very negative $x$, close to $x$ for large $x$, smooth in
# between, and slightly negative for moderately negative $x$. BERT and GPT-2
# use it instead of ReLU, in the tanh approximation
#
# $$\mathrm{GELU}(x) \approx \frac{x}{2}\left(1 + \tanh\!\left(\sqrt{2/\pi}
#   \,(x + 0.044715\,x^3)\right)\right).$$
#
# Its derivative, by the product rule, with $u = \sqrt{2/\pi}\,(x +
# 0.044715\,x^3)$ and $t = \tanh u$:
#
# $$\frac{d}{dx} = \frac{1 + t}{2} + \frac{x}{2}\,(1 - t^2)\,\sqrt{2/\pi}
#   \,(1 + 3 \cdot 0.044715\,x^2).$$

# %%
erf = np.vectorize(math.erf)
c = math.sqrt(2 / math.pi)


def gelu_exact(x):
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x**3)))


def gelu_tanh_derivative(x):
    t = np.tanh(c * (x + 0.044715 * x**3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * c * (1 + 3 * 0.044715 * x**2)


x = np.linspace(-4, 4, 801)
gelu_exact_derivative = (0.5 * (1 + erf(x / math.sqrt(2)))
                         + x * np.exp(-x**2 / 2) / math.sqrt(2 * math.pi))
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
axes[0].plot(x, np.maximum(x, 0), label="ReLU")
axes[0].plot(x, gelu_exact(x), label=r"GELU, $x\Phi(x)$")
axes[0].plot(x, gelu_tanh(x), "--", label="GELU, tanh approximation")
axes[1].plot(x, (x > 0).astype(float), label="ReLU'")
axes[1].plot(x, gelu_exact_derivative, label="GELU' (exact)")
axes[1].plot(x, gelu_tanh_derivative(x), "--", label="GELU' (tanh)")
axes[0].set(title="activation", xlabel="x", ylim=(-0.5, 4))
axes[1].set(title="derivative", xlabel="x")
for ax in axes:
    ax.grid(alpha=0.3)
    ax.legend()
plt.tight_layout()
plt.show()

print(f"largest |exact - tanh approximation| on [-4, 4]: value "
      f"{np.abs(gelu_exact(x) - gelu_tanh(x)).max():.1e}, derivative "
      f"{np.abs(gelu_exact_derivative - gelu_tanh_derivative(x)).max():.1e}")
print(f"minimum of GELU: {gelu_exact(x).min():.4f} at x = {x[gelu_exact(x).argmin()]:.2f}; "
      f"its derivative there is 0, and below that point it is negative")
slope = gelu_tanh_derivative(x)
print(f"largest slope: {slope.max():.3f} at x = {x[slope.argmax()]:.2f}")
h = 1e-6
numeric = (gelu_tanh(x + h) - gelu_tanh(x - h)) / (2 * h)
print(f"tanh derivative against central differences: largest difference "
      f"{np.abs(numeric - gelu_tanh_derivative(x)).max():.1e}")

# %% [markdown]
# The approximation is within about $10^{-3}$ of the exact function, well
# below anything training would notice. Where ReLU's derivative jumps from 0
# to 1 at $x = 0$, GELU's changes smoothly, and it lets a small gradient
# through for negative inputs (down to about $x = -0.75$, where the
# derivative is 0, and slightly negative below it) instead of none: a unit
# that has gone negative for every input can still recover. Its slope also
# rises a little above 1 (the largest slope printed above) before settling at 1.
#
# ### GELU in minitrans
#
# `ModelConfig(activation="gelu")` builds every feed-forward network with
# the tanh approximation instead of ReLU; its function and derivative are
# `minitrans.ops.activations.gelu` and `gelu_backward`. ReLU's backward
# needs only the sign of its output; GELU's needs the input and the gate
# $\Phi(a)$: $\mathrm{GELU}'(a) = \Phi(a) + a\,\phi(a)$, and with the tanh
# approximation $\phi(a) = 2\Phi(a)(1 - \Phi(a))\,du/da$. So the layer keeps
# $a = xW_1 + b_1$ and $\Phi(a)$, which the forward computed anyway, and the
# backward needs no second tanh. GELU has no parameters, so the
# model's parameter count does not change. The gradient check of a
# `FeedForward` with it, in float64:

# %%
from minitrans.ops.activations import gelu
from minitrans.gradcheck import check_layer, format_table

with minitrans.using(dtype="float64"):
    check_rng = np.random.default_rng(0)
    ffn = minitrans.FeedForward(8, 32, rng=0, activation="gelu")
    x_check = minitrans.from_host(check_rng.standard_normal((2, 3, 8)))   # (B, T, d_model)
    print(format_table(check_layer(ffn, x_check)))
    a = check_rng.standard_normal(1000) * 3
    print("minitrans's gelu against the formula above:",
          f"{np.abs(minitrans.to_numpy(gelu(minitrans.from_host(a))) - gelu_tanh(a)).max():.1e}")

for activation in ("relu", "gelu"):
    small = minitrans.Transformer(minitrans.ModelConfig(vocab_size=20, d_model=16, h=2, N=1,
                                                        d_ff=32, activation=activation), rng=0)
    print(f"activation={small.config.activation!r}: {small.num_parameters()} parameters")

# %% [markdown]
# ## 5. Exercises
#
# Each checker calls your function on cases with random sizes and on the
# edge cases, and compares with a reference computed element by element in
# another way. The skeletons return zeros, so the checkers say "not yet".
# Solutions: `solutions/17_dropout_initialisation_and_gelu.py`.
#
# **Inverted dropout.** Write `my_dropout(x, u, p, dy)` returning `(y, dx)`:
# the forward and the backward, given the uniform draws `u` in $[0, 1)$ (same
# shape as `x`) instead of a random generator. As in minitrans's `Dropout`,
# an element is kept where `u >= p`. The checker tries $p = 0$, $p = 0.95$,
# float32 and a batch of one.

# %%
from minitrans_course.exercises_regularisation import (check_dropout, check_gelu_backward,
                                                      check_xavier_init)


def my_dropout(x, u, p, dy):
    # your code here
    return np.zeros_like(x), np.zeros_like(dy)


check_dropout(my_dropout);

# %% [markdown]
# **The GELU's backward.** Write `my_gelu_backward(x, dy)` returning $dx$ for
# the tanh approximation (the formula of section 4). The checker tries
# inputs of $\pm 40$, where $u$ is in the thousands: `np.tanh` is then $\pm 1$,
# but a tanh written by hand with `np.exp(u)` overflows.

# %%
def my_gelu_backward(x, dy):
    # your code here
    return np.zeros_like(x)


check_gelu_backward(my_gelu_backward);

# %% [markdown]
# **Xavier's initialisation.** Write `my_xavier_init(u)`: given uniform
# draws `u` in $[0, 1)$ of shape $(n_\text{in}, n_\text{out})$, return
# weights uniform in $[-a, a)$ with Xavier's bound. He's bound, a bound from
# $n_\text{in}$ alone, and a bound without the square root all fail.

# %%
def my_xavier_init(u):
    # your code here
    return np.zeros_like(u)


check_xavier_init(my_xavier_init);

# %% [markdown]
# ## Summary
#
# * Each layer multiplies the variance of its signal by
#   $n_\text{in}\,\mathrm{Var}(W)$ going forward and by
#   $n_\text{out}\,\mathrm{Var}(W)$ going back; over many layers a wrong scale
#   makes both vanish or explode. Xavier's $\mathrm{Var}(W) =
#   2/(n_\text{in} + n_\text{out})$ balances the two; He's $2/n_\text{in}$
#   makes up for ReLU's halving.
# * The embedding table starts at $\mathcal{N}(0, 1/d_\text{model})$ and is
#   multiplied by $\sqrt{d_\text{model}}$: unit entries, like the positional
#   encoding's, while a tied output projection gets logits of unit scale.
# * Inverted dropout scales the kept elements by $1/(1-p)$ while training,
#   so nothing changes at evaluation; the Transformer applies it after every
#   sub-layer and on the embedding sums.
# * On 500 training sums a model without dropout overfits: its held-out loss
#   climbs while the training loss falls; with $p = 0.1$ the held-out loss
#   stays close to the training loss and ends far lower (with this seed and
#   two of three others), $p = 0.3$ slows learning down.
# * GELU, $x\Phi(x)$, is a smooth ReLU used by BERT and GPT-2; its tanh
#   approximation is what `activation="gelu"` computes.
#
# ## Next
#
# [Lesson 18](18_the_papers_experiments.ipynb), the paper's experiments:
# Table 3's variations (heads, $d_k$, model size, dropout, learned
# positions) reproduced at a small scale.

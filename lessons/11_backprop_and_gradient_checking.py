# %% [markdown]
# # Lesson 11: Backpropagation by hand, and gradient checking
#
# Every layer in minitrans has a `backward` written by hand. Few people get one
# right at the first attempt: we derive it on paper, code it, and then let the
# computer compare it with a numerical derivative. This lesson does all three.
#
# In this lesson:
#
# 1. a backward is a vector-Jacobian product: softmax's, derived step by step;
# 2. layer norm's backward, and why a mean term and a variance term appear;
# 3. central differences: the two-point form and the fourth-order form
#    minitrans uses;
# 4. the relative error, and why it is relative;
# 5. the step $h$: truncation error against rounding error, float32 against float64;
# 6. the bugs a gradient check catches, shown live on deliberately wrong backwards;
# 7. exercises: the backwards of softmax, layer norm and attention.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np

import minitrans
from minitrans.ops import softmax as sm
from minitrans.gradcheck import (
    central_derivative,
    check_layer,
    format_table,
    numeric_gradient,
    relative_error,
)
from minitrans.gradcheck import randomise_params

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)

np.set_printoptions(precision=4, suppress=True)

# %% [markdown]
# ## 1. A backward is a vector-Jacobian product
#
# Training minimises one scalar, the loss $L$. A layer $y = f(z)$ sits
# somewhere inside the computation, and backpropagation hands it
# $\frac{\partial L}{\partial y}$, written `dy`, with the shape of $y$. The
# chain rule gives
#
# $$\frac{\partial L}{\partial z_j} = \sum_i \frac{\partial L}{\partial y_i}\,
# \frac{\partial y_i}{\partial z_j}, \qquad\text{that is}\qquad
# dz = J^\top dy, \quad J_{ij} = \frac{\partial y_i}{\partial z_j}.$$
#
# `backward(dy)` computes this product **without ever building $J$**. For
# the logits of a 37,000-word vocabulary $J$ would have $1.4 \times 10^9$
# entries per position; the product costs a few operations per entry of `dy`.
#
# **Softmax.** $y_i = e^{z_i} / S$ with $S = \sum_k e^{z_k}$, over the last
# axis of $z$, of shape $(\dots, V)$. By the quotient rule, since
# $\partial S / \partial z_j = e^{z_j}$:
#
# $$\frac{\partial y_i}{\partial z_j}
# = \frac{\delta_{ij} e^{z_i}}{S} - \frac{e^{z_i} e^{z_j}}{S^2}
# = y_i\,\delta_{ij} - y_i y_j,
# \qquad J = \operatorname{diag}(y) - y\,y^\top .$$
#
# $J$ is symmetric, so $J^\top dy = J\,dy$, and
#
# $$dz_j = y_j\,dy_j - y_j \sum_i y_i\,dy_i
# \qquad\Longrightarrow\qquad
# dz = y \odot \Big(dy - \sum_i dy_i\, y_i\Big).$$
#
# That compact form is `minitrans.ops.softmax.softmax_backward(y, dy)`, $O(V)$
# work instead of $O(V^2)$. Let us check it against the full Jacobian, for one
# row of $V = 6$ logits.

# %%
rng = np.random.default_rng(0)
with minitrans.using(dtype="float64"):
    z = rng.standard_normal(6)
    y = sm.softmax(z)
    J = np.diag(y) - np.outer(y, y)                  # (V, V)
    dy = rng.standard_normal(6)
    compact = sm.softmax_backward(y, dy)             # (V,)

print("J^T dy         :", J.T @ dy)
print("softmax_backward:", compact)
print("relative error :", relative_error(J.T @ dy, compact))
print("rows of J sum to", J.sum(axis=1))

# %% [markdown]
# The last line matters later: every row of $J$ sums to zero, because
# $\sum_i y_i = 1$ whatever $z$ is. An upstream gradient that is the same in
# every entry, such as all ones, is sent to exactly zero. The picture: positive
# on the diagonal (raising $z_j$ raises $y_j$), negative elsewhere (and lowers
# every other probability).

# %%
fig, ax = plt.subplots(figsize=(5, 4))
limit = np.abs(J).max()
image = ax.imshow(J, cmap="RdBu_r", vmin=-limit, vmax=limit)
ax.set_title("Softmax Jacobian diag(y) - y yᵀ, V = 6")
ax.set_xlabel("logit j")
ax.set_ylabel("probability i")
fig.colorbar(image, ax=ax, label="∂y_i / ∂z_j")
plt.show()

# %% [markdown]
# ## 2. Layer norm's backward: where the mean and variance terms come from
#
# For one position with $D = d_\text{model}$ features $x \in \mathbb{R}^D$
# (the layer works on $(B, T, D)$, each of the $B \cdot T$ positions alone):
#
# $$\mu = \frac1D \sum_k x_k, \quad \sigma^2 = \frac1D \sum_k (x_k - \mu)^2, \quad
# s = (\sigma^2 + \epsilon)^{-1/2}, \quad \hat x = (x - \mu)\,s, \quad
# y = \gamma \odot \hat x + \beta .$$
#
# The parameters are easy: $\gamma$ and $\beta$, shape $(D,)$, are used at
# every position, so their gradients **sum over all positions**:
# $d\beta = \sum_{b,t} dy$, $d\gamma = \sum_{b,t} dy \odot \hat x$. Write
# $g = dy \odot \gamma$ for the gradient arriving at $\hat x$.
#
# The input is the interesting part. $\hat x_i$ depends on $x_j$ along three
# paths: directly through $x_i - \mu$ when $i = j$, through the mean $\mu$,
# and through the variance inside $s$:
#
# $$\frac{\partial \mu}{\partial x_j} = \frac1D, \qquad
# \frac{\partial \sigma^2}{\partial x_j} = \frac2D (x_j - \mu), \qquad
# \frac{\partial s}{\partial x_j} = -\tfrac12 s^3 \frac{\partial \sigma^2}{\partial x_j}
# = -\frac{s^2 \hat x_j}{D}.$$
#
# (In $\partial\sigma^2/\partial x_j$ the path through $\mu$ drops out,
# because $\sum_k (x_k - \mu) = 0$.) So
#
# $$\frac{\partial \hat x_i}{\partial x_j}
# = \underbrace{s\,\delta_{ij}}_{\text{direct}}
# \;\underbrace{-\;\frac{s}{D}}_{\text{through } \mu}
# \;\underbrace{-\;\frac{s\,\hat x_i \hat x_j}{D}}_{\text{through } \sigma^2},
# \qquad
# dx = s\,\Big(g - \operatorname{mean}(g) - \hat x \odot \operatorname{mean}(g \odot \hat x)\Big).$$
#
# Each term has a meaning. Adding a constant to every $x_k$ leaves $\hat x$
# unchanged, so $dx$ must have no component along $(1, \dots, 1)$: the mean
# term removes it. Scaling $x$ leaves $\hat x$ unchanged too (up to
# $\epsilon$), so $dx$ must have (almost) no component along $\hat x$: the
# variance term removes it. Below, the Jacobian built from the formula is
# compared with `LayerNorm.backward`, and the two properties are measured.

# %%
D = 6
with minitrans.using(dtype="float64"):
    norm = randomise_params(minitrans.LayerNorm(D), np.random.default_rng(1))
    # one position
    x = minitrans.from_host(np.random.default_rng(2).standard_normal((1, 1, D)) * 3 + 1)
    dy = minitrans.from_host(np.random.default_rng(3).standard_normal((1, 1, D)))
    norm.zero_grad()
    norm.forward(x)
    dx = norm.backward(dy)[0, 0]                                 # (D,)

x0 = x[0, 0]
s = 1.0 / math.sqrt(x0.var() + norm.eps)
x_hat = (x0 - x0.mean()) * s
jacobian = s * (np.eye(D) - 1.0 / D - np.outer(x_hat, x_hat) / D)   # d x_hat_i / d x_j
g = dy[0, 0] * norm.params["gamma"]
print("variance of x:", f"{x0.var():.1f}", "  eps:", norm.eps)
print("J^T g vs LayerNorm.backward, relative error:", relative_error(jacobian.T @ g, dx))
print("sum of dx (shift invariance)          :", f"{dx.sum():.1e}")
print("dx . x_hat (scale invariance, ~0)     :", f"{dx @ x_hat:.1e}", "  vs |dx| =",
      f"{np.abs(dx).max():.2f}")

# %% [markdown]
# Both properties hold: the gradient sums to zero (to rounding), and its
# component along $\hat x$ is not exactly zero but
# $dx \cdot \hat x = s\,(g \cdot \hat x)\,\epsilon / (\sigma^2 + \epsilon)$,
# tiny (with the variance printed above, the factor
# $\epsilon / (\sigma^2 + \epsilon)$ is below $10^{-6}$). Drop either term
# and they break; section 6 shows the gradient check catching it.
#
# The whole layer, checked the usual way (with $\gamma$ and $\beta$ randomised,
# so that a mix-up between them cannot hide):

# %%
with minitrans.using(dtype="float64"):
    norm = randomise_params(minitrans.LayerNorm(4), np.random.default_rng(0))
    x = minitrans.from_host(np.random.default_rng(1).standard_normal((2, 3, 4)))
    print(format_table(check_layer(norm, x)))

# %% [markdown]
# ## 3. Central differences
#
# How does `check_layer` get its "numerical" gradient? From Taylor's theorem,
#
# $$f(x \pm h) = f(x) \pm h f'(x) + \frac{h^2}{2} f''(x) \pm \frac{h^3}{6} f'''(x)
# + \frac{h^4}{24} f^{(4)}(x) \pm \dots$$
#
# The **forward difference** $\frac{f(x+h) - f(x)}{h} = f' + \frac h2 f'' + \dots$
# is only first-order accurate. Subtracting the two expansions cancels every
# even power, which gives the **two-point central difference**:
#
# $$D(h) = \frac{f(x+h) - f(x-h)}{2h} = f'(x) + \frac{h^2}{6} f'''(x) + O(h^4).$$
#
# With twice the step the error is four times larger,
# $D(2h) = f' + \frac{4h^2}{6} f''' + O(h^4)$, so a combination cancels the
# $h^2$ term (Richardson extrapolation), leaving a **fourth-order** estimate:
#
# $$f'(x) \approx \frac{4 D(h) - D(2h)}{3}, \qquad \text{error } O(h^4).$$
#
# `minitrans.gradcheck.central_derivative(f, h)` computes this, for $f$ a
# function of the offset from the point: four evaluations instead of two.
# On $\sin$ at $x = 1$, where $f'(1) = \cos 1$, the three formulas side by
# side:

# %%
def differences(f, x, h):
    """Two-point and fourth-order central differences of f at x (numbers or arrays)."""
    near = (f(x + h) - f(x - h)) / (2 * h)
    far = (f(x + 2 * h) - f(x - 2 * h)) / (4 * h)
    return near, (4 * near - far) / 3

exact = math.cos(1.0)
for h in (1e-1, 1e-2):
    forward = (math.sin(1.0 + h) - math.sin(1.0)) / h
    two_point, four_point = differences(math.sin, 1.0, h)
    print(f"h = {h:.0e}   error: forward {abs(forward - exact):.1e}   "
          f"two-point {abs(two_point - exact):.1e}   fourth-order {abs(four_point - exact):.1e}")

print("central_derivative, h = 1e-4: error",
      f"{abs(central_derivative(lambda d: math.sin(1.0 + d), 1e-4) - exact):.1e}")

# %% [markdown]
# Dividing $h$ by 10 divides the forward error by 10, the two-point error by
# 100 and the fourth-order error by 10,000, as the orders predict.
# (`central_derivative` does one thing more, which section 6 explains: when
# the estimates with $h$ and $2h$ disagree by more than a smooth function
# allows, it shrinks the step itself. At its usual step, $10^{-4}$, a smooth
# function never triggers that.)
#
# ## 4. The relative error, and why relative
#
# `check_layer` compares the analytic gradient $a$ (from `backward`) with the
# numerical one $n$, over a whole tensor, by
#
# $$\text{rel} = \frac{\max_k |a_k - n_k|}{\max\big(\max_k |a_k|, \max_k |n_k|\big)}$$
#
# and passes below $10^{-6}$. Why not the absolute error $\max|a - n|$?
# Because gradients come at every scale. A wrong gradient of a weight whose
# gradients are around $10^{-8}$ has an absolute error of $10^{-8}$ and would
# pass any sensible absolute threshold; a right gradient around $10^{4}$
# carries rounding errors of $10^{-6}$ and would fail it. Dividing by the
# tensor's scale measures the error in "digits that agree", whatever the
# units. The denominator is the tensor's largest entry, not each element's own
# size: an element that should be $0$ and comes out as $10^{-12}$ by rounding
# would otherwise have a relative error of 1.

# %%
tiny_true = np.array([1e-8, -2e-8, 3e-8])
tiny_wrong = 2 * tiny_true                          # off by a factor of 2
big_true = np.array([1e4, -2e4, 3e4])
big_rounded = big_true + np.array([1e-6, -1e-6, 2e-6])
near_zero = (np.array([1.0, 0.0]), np.array([1.0, 1e-12]))

for label, a, n in [("tiny and WRONG", tiny_wrong, tiny_true),
                    ("big and right", big_true, big_rounded),
                    ("right, one entry ~0", *near_zero)]:
    elementwise = np.max(np.abs(a - n) / np.maximum(np.abs(a), np.abs(n)))
    print(f"{label:20s} absolute {np.abs(a - n).max():.1e}   relative {relative_error(a, n):.1e}"
          f"   element-by-element relative {elementwise:.1e}")

# %% [markdown]
# Only the tensor-wide relative error gets all three right: large for the
# wrong gradient, tiny for the two right ones.
#
# ## 5. The step $h$: truncation error against rounding error
#
# A smaller $h$ is not always better. The computer evaluates $f$ with a
# relative rounding error of about $\varepsilon$ (machine epsilon:
# $2.2 \times 10^{-16}$ in float64, $1.2 \times 10^{-7}$ in float32), and
# $f(x+h) - f(x-h)$ subtracts two nearly equal numbers, so that error is
# divided by $2h$. For the two-point form,
#
# $$|D(h) - f'(x)| \approx \underbrace{\frac{h^2}{6}|f'''|}_{\text{truncation}}
# + \underbrace{\frac{\varepsilon |f|}{h}}_{\text{rounding}},$$
#
# smallest near $h \approx \varepsilon^{1/3}$: about $6 \times 10^{-6}$ in
# float64 (error $\sim 10^{-11}$) but about $5 \times 10^{-3}$ in float32
# (error $\sim 10^{-5}$). For the fourth-order form truncation falls like
# $h^4$, the best step is near $\varepsilon^{1/5} \approx 10^{-3}$ in float64,
# and the error near $\varepsilon^{4/5}$. On log-log axes each method draws a
# V: a slope of $-1$ on the left (rounding), $+2$ or $+4$ on the right
# (truncation). To get a clean curve we take the worst error over 50 points
# $x \in [0.2, 1.5]$.

# %%
points = np.linspace(0.2, 1.5, 50)
steps = np.logspace(-13, -0.5, 50)
curves = {}
for dtype in (np.float64, np.float32):
    xs = points.astype(dtype)
    for order in (2, 4):
        errors = []
        for h in steps:
            estimate = differences(np.sin, xs, dtype(h))[order // 2 - 1]
            errors.append(np.abs(estimate.astype(np.float64) - np.cos(xs.astype(np.float64))).max())
        curves[(np.dtype(dtype).name, order)] = np.array(errors)

fig, ax = plt.subplots(figsize=(6, 4))
for (dtype, order), errors in curves.items():
    style = "-" if dtype == "float64" else "--"
    ax.loglog(steps, errors, style,
              label=f"{dtype}, {'two-point' if order == 2 else 'fourth-order'}")
ax.loglog(steps, steps**2 / 6, ":", color="gray", label="h²/6 (truncation)")
ax.loglog(steps, 2.2e-16 / steps, ":", color="black", label="ε₆₄/h (rounding)")
ax.set_ylim(1e-14, 10)
ax.set_title("Error of the numerical derivative of sin")
ax.set_xlabel("step h")
ax.set_ylabel("max |numerical - exact| over 50 points")
ax.legend(fontsize=7)
plt.show()

for (dtype, order), errors in curves.items():
    best = errors.argmin()
    print(f"{dtype}, order {order}: best h = {steps[best]:.0e}, error {errors[best]:.0e}")

# %% [markdown]
# The printed minima land where the estimates said. Note the float32 curves:
# at its very best (fourth-order, $h \approx 0.05$) a float32 derivative is
# good to about $10^{-6}$, our pass threshold, while float64 reaches
# $10^{-13}$. That is why gradient checks run in float64.
#
# A layer behaves the same way. Below, the input gradient of a `LayerNorm` is
# estimated element by element for each $h$ and compared, by the relative
# error, with `backward` in float64. In float32 the layer's forward itself
# rounds to 7 digits.

# %%
G = np.random.default_rng(4).standard_normal((2, 3, 4))      # the upstream gradient, (B, T, D)
x_host = np.random.default_rng(5).standard_normal((2, 3, 4))

with minitrans.using(dtype="float64"):
    norm64 = randomise_params(minitrans.LayerNorm(4), np.random.default_rng(6))
    norm64.forward(minitrans.from_host(x_host))
    analytic = minitrans.to_numpy(norm64.backward(minitrans.from_host(G)))

def layer_differences(dtype, h):
    """(two-point, fourth-order) numerical gradients of sum(LayerNorm(x) * G) wrt x."""
    with minitrans.using(dtype=dtype):
        layer = randomise_params(minitrans.LayerNorm(4), np.random.default_rng(6))
        x = minitrans.from_host(x_host)
        results = (np.zeros(x.shape), np.zeros(x.shape))
        for index in np.ndindex(*x.shape):
            original = float(x[index])

            def loss(offset):
                x[index] = original + offset
                return float((minitrans.to_numpy(layer.forward(x)) * G).sum())

            near = (loss(h) - loss(-h)) / (2 * h)
            far = (loss(2 * h) - loss(-2 * h)) / (4 * h)
            x[index] = original
            results[0][index], results[1][index] = near, (4 * near - far) / 3
        return results

layer_steps = np.logspace(-11, -0.5, 22)
layer_curves = {"float64, two-point": [], "float64, fourth-order": [], "float32, two-point": []}
for h in layer_steps:
    two64, four64 = layer_differences("float64", h)
    two32, _ = layer_differences("float32", h)
    layer_curves["float64, two-point"].append(relative_error(analytic, two64))
    layer_curves["float64, fourth-order"].append(relative_error(analytic, four64))
    layer_curves["float32, two-point"].append(relative_error(analytic, two32))

fig, ax = plt.subplots(figsize=(6, 4))
for label, errors in layer_curves.items():
    ax.loglog(layer_steps, errors, "-" if "64" in label else "--", marker=".", label=label)
ax.axhline(1e-6, color="red", linewidth=0.8, label="pass threshold 1e-6")
ax.axvline(1e-4, color="gray", linewidth=0.8, linestyle=":", label="minitrans's step 1e-4")
ax.set_title("Gradient check of LayerNorm's dx against the step h")
ax.set_xlabel("step h")
ax.set_ylabel("relative error vs backward()")
ax.legend(fontsize=7)
plt.show()

# %% [markdown]
# The same V. minitrans uses the fourth-order form with $h = 10^{-4}$: in
# float64 that sits in the flat bottom of its V, around $10^{-11}$, five
# orders of magnitude below the threshold, so a correct backward never fails
# by bad luck. In float32 even the best step stays above the threshold, and
# `check_layer` refuses float32 layers outright:

# %%
try:
    check_layer(minitrans.LayerNorm(4), minitrans.from_host(x_host))   # float32, the default
except ValueError as error:
    print("ValueError:", error)

# %% [markdown]
# ## 6. The bugs a gradient check catches
#
# Each cell below takes a minitrans layer, overrides its `backward` with one
# classic mistake, and runs `check_layer` on it. Read the table: the check
# says not only *that* something is wrong but *which tensor*.
#
# **Forgetting the mean term of layer norm.** The derivation above had three
# paths; a backward that treats $\mu$ as a constant keeps only two.

# %%
class LayerNormNoMeanTerm(minitrans.LayerNorm):
    def backward(self, dy):
        x_hat, inv_std = self.saved()
        reduce_axes = tuple(range(dy.ndim - 1))
        self.grads["gamma"] += (dy * x_hat).sum(axis=reduce_axes)
        self.grads["beta"] += dy.sum(axis=reduce_axes)
        dx_hat = dy * self.params["gamma"]
        # BUG: no - mean(dx_hat)
        return inv_std * (dx_hat - x_hat * (dx_hat * x_hat).mean(axis=-1, keepdims=True))

with minitrans.using(dtype="float64"):
    layer = randomise_params(LayerNormNoMeanTerm(4), np.random.default_rng(0))
    print(format_table(check_layer(layer, minitrans.from_host(x_host))))

# %% [markdown]
# The parameter gradients pass, the input gradient fails: the bug is in `dx`.
#
# **Forgetting to sum the gradient of a broadcast bias.** In $y = xW + b$ the
# bias $b$, shape $(d_\text{out},)$, is added to every one of the $N = B \cdot T$
# rows, so $db = \sum_n dy_n$. A backward written and tested with a single
# example can get away with using one row of `dy`; with a batch it cannot.
# This is also a lesson about test inputs: use more than one row.

# %%
class LinearOneRowBias(minitrans.Linear):
    def backward(self, dy):
        x_2d, x_shape = self.saved()
        dy_2d = dy.reshape(-1, self.d_out)
        self.grads["W"] += x_2d.T @ dy_2d
        self.grads["b"] += dy_2d[0]                      # BUG: should be dy_2d.sum(axis=0)
        return (dy_2d @ self.params["W"].T).reshape(x_shape)

with minitrans.using(dtype="float64"):
    for shape in [(1, 1, 4), (2, 3, 4)]:
        layer = randomise_params(LinearOneRowBias(4, 3, rng=0), np.random.default_rng(0))
        x = minitrans.from_host(np.random.default_rng(1).standard_normal(shape))
        print(f"input {shape}:\n{format_table(check_layer(layer, x))}\n")

# %% [markdown]
# **A missing transpose.** $dx = dy\,W^\top$. With a square $W$ the shapes of
# $dy\,W$ and $dy\,W^\top$ are the same, so nothing crashes: only the numbers
# are wrong, and only a gradient check notices.

# %%
class LinearNoTranspose(minitrans.Linear):
    def backward(self, dy):
        x_2d, x_shape = self.saved()
        dy_2d = dy.reshape(-1, self.d_out)
        self.grads["W"] += x_2d.T @ dy_2d
        self.grads["b"] += dy_2d.sum(axis=0)
        return (dy_2d @ self.params["W"]).reshape(x_shape)  # BUG: W, not W.T

with minitrans.using(dtype="float64"):
    layer = randomise_params(LinearNoTranspose(4, 4, rng=0), np.random.default_rng(0))
    print(format_table(check_layer(layer, minitrans.from_host(x_host))))

# %% [markdown]
# **Overwriting (`=`) instead of accumulating (`+=`).** When a weight is used
# twice, its gradient is the sum of the gradients of both uses. The paper
# (§3.4) uses the embedding matrix twice: to look tokens up, and, transposed,
# as the pre-softmax projection. Here is that tie, built from minitrans's
# `Embedding` and `OutputProjection(tied_to=...)`, as a tiny model:
# logits $= \text{Embedding}(\text{ids})\,W_E^\top + b$, shapes
# $(B, T) \to (B, T, d) \to (B, T, V)$. The backward runs the projection
# first (which adds its share into the embedding's `grads["W_E"]`), then the
# embedding. An embedding backward that *assigns* its gradient wipes out the
# projection's share.

# %%
class TiedModel(minitrans.Module):
    def __init__(self, embedding):
        super().__init__()
        self.embedding = embedding
        self.projection = minitrans.OutputProjection(embedding.d_model, embedding.vocab_size,
                                                     tied_to=embedding)

    def forward(self, ids):
        return self.projection.forward(self.embedding.forward(ids))

    def backward(self, dlogits):
        self.embedding.backward(self.projection.backward(dlogits))
        return None                                      # token ids get no gradient


class EmbeddingThatOverwrites(minitrans.Embedding):
    def backward(self, dy):
        ids = self.saved()
        xp = minitrans.get_xp()
        dW_E = xp.zeros_like(self.W_E)
        xp.add.at(dW_E, ids.reshape(-1), dy.reshape(-1, self.d_model) * self.scale)
        self.grads["W_E"] = dW_E                         # BUG: should be +=
        return None

# (B, T) = (2, 3); token 1 and 2 repeat
ids = minitrans.to_device(np.array([[1, 2, 1], [3, 0, 2]]))
with minitrans.using(dtype="float64"):
    for embedding_class in (minitrans.Embedding, EmbeddingThatOverwrites):
        model = randomise_params(TiedModel(embedding_class(5, 4, rng=0)), np.random.default_rng(0))
        print(f"{embedding_class.__name__}:\n{format_table(check_layer(model, ids))}\n")

# %% [markdown]
# This is why every minitrans layer *adds* into `grads`, and why the optimiser
# calls `zero_grad()` before each backward.
#
# **Why the upstream gradient must be random, not all ones.** `check_layer`
# differentiates $L = \sum y \odot G$ with a random $G$. Why not simply
# $L = \sum y$, that is $G = 1$? Because for some layers $\sum y$ does not
# depend on the input at all: $\sum_i \text{softmax}(z)_i = 1$. The true
# gradient is then zero, and any backward that also returns zero for a
# constant `dy` agrees with it. Here is a wrong softmax backward that subtracts
# the plain mean of `dy` instead of its $y$-weighted mean; the wrapper layer
# calls minitrans's `softmax` and `softmax_backward`.

# %%
class Softmax(minitrans.Module):
    """softmax over the last axis as a layer: (..., V) -> (..., V)."""
    def forward(self, z):
        self.cache = sm.softmax(z)
        return self.cache

    def backward(self, dy):
        return sm.softmax_backward(self.saved(), dy)


class SoftmaxWrongBackward(Softmax):
    def backward(self, dy):
        y = self.saved()
        return y * (dy - dy.mean(axis=-1, keepdims=True))  # BUG: should be sum(dy * y)


def compare(layer, z, G):
    """max |analytic|, max |numerical| and max |difference| for L = sum(layer(z) * G)."""
    layer.forward(z)
    analytic = layer.backward(G)
    numeric = numeric_gradient(lambda: float((layer.forward(z) * G).sum()), z)
    return np.abs(analytic).max(), np.abs(numeric).max(), np.abs(analytic - numeric).max()


with minitrans.using(dtype="float64"):
    z = np.random.default_rng(7).standard_normal((2, 5))
    for upstream, G in [("all ones", np.ones((2, 5))),
                        ("random", np.random.default_rng(8).standard_normal((2, 5)))]:
        for layer in (Softmax(), SoftmaxWrongBackward()):
            a, n, difference = compare(layer, z, G)
            print(f"G {upstream:8s}  {type(layer).__name__:20s}  max|analytic| {a:.1e}  "
                  f"max|numerical| {n:.1e}  max|difference| {difference:.1e}")

# %% [markdown]
# With $G = 1$ both backwards return zero (to within $10^{-16}$) and the
# numerical gradient is rounding noise ($10^{-12}$): the check compares zero with zero and
# learns nothing. With a random $G$ the wrong backward is off in the first
# digit. `check_layer` always draws $G$ at random:

# %%
with minitrans.using(dtype="float64"):
    print(format_table(check_layer(SoftmaxWrongBackward(), minitrans.from_host(z))))

# %% [markdown]
# Layer norm has the same blind spot, $\sum_k \hat x_k = 0$, and so does any
# layer followed by one of them: random upstream gradients and randomised
# parameters ($\gamma \ne 1$) are what make a check mean something.
#
# **A kink fools the numerical derivative.** The opposite failure: the
# backward is right and the *numerical* derivative is wrong. $\text{ReLU}(x) =
# \max(0, x)$ has a kink at 0. At $x = 3 \times 10^{-5}$ the derivative is 1,
# but with $h = 10^{-4}$ the points $x \pm h$ straddle the kink:

# %%
def relu_at(x):
    return lambda offset: max(0.0, x + offset)

f = relu_at(3e-5)
print("two-point, h = 1e-4:", (f(1e-4) - f(-1e-4)) / 2e-4)
near, far = (f(1e-4) - f(-1e-4)) / 2e-4, (f(2e-4) - f(-2e-4)) / 4e-4
print("fourth-order, h = 1e-4, step never reduced:", (4 * near - far) / 3)
print("central_derivative, h = 1e-4:", central_derivative(f, 1e-4))

# %% [markdown]
# Both plain formulas give nonsense: a gradient check would report a correct
# `FeedForward` (§3.3, which has a ReLU) as broken whenever some
# pre-activation lies within $2h$ of zero, and with thousands of
# pre-activations that happens. `central_derivative` notices that the
# estimates with $h$ and $2h$ disagree (a smooth function would make them
# agree to $O(h^2)$), divides the step by 10, and tries again; here $10^{-5}$
# keeps $x \pm 2h$ on one side of the kink. That is why the `FeedForward` check
# is reliable:

# %%
with minitrans.using(dtype="float64"):
    ffn = randomise_params(minitrans.FeedForward(4, 8, rng=0), np.random.default_rng(0))
    print(format_table(check_layer(ffn, minitrans.from_host(x_host))))

# %% [markdown]
# ## 7. Exercises
#
# Write each backward in plain NumPy (float64 arrays in, arrays out) and run
# the checker below it, which compares your result on several cases (random
# sizes, padding and fully masked rows, a batch of one, float32) with a
# backward it computes through each row's full Jacobian, and names the first
# case that fails with its relative error and a hint.
# The skeletons run but return zeros, so the checkers say "not yet".
# Solutions are in `solutions/11_backprop_and_gradient_checking.py`.
#
# **Exercise 1: softmax backward.** Given the output `y = softmax(z)` and
# `dy`, both $(B, V)$, return `dz`, $(B, V)$. Use the compact form, not the
# Jacobian.

# %%
from minitrans_course.exercises import (
    check_attention_backward,
    check_layernorm_backward,
    check_softmax_backward,
)


def my_softmax_backward(y, dy):
    # your code here
    return np.zeros_like(dy)

check_softmax_backward(my_softmax_backward);

# %% [markdown]
# **Exercise 2: layer norm backward.** `x` is $(B, T, D)$, `gamma` and
# `beta` are $(D,)$, `eps` a float, `dy` is $(B, T, D)$. Recompute what the
# forward would have kept ($\hat x$ and $s$), then return
# `(dx, dgamma, dbeta)` with shapes $(B, T, D)$, $(D,)$, $(D,)$. Remember
# which axes to sum the parameter gradients over.

# %%
def my_layernorm_backward(x, gamma, beta, eps, dy):
    # your code here
    return np.zeros_like(x), np.zeros_like(gamma), np.zeros_like(beta)

check_layernorm_backward(my_layernorm_backward);

# %% [markdown]
# **Exercise 3: attention backward** (§3.2.1). The forward was
# $S = QK^\top / \sqrt{d_k}$, $P = \text{softmax}(S)$ over the keys,
# $\text{out} = PV$, with `Q` $(B, T_q, d_k)$, `K` $(B, T_k, d_k)$, `V`
# $(B, T_k, d_v)$, `P` $(B, T_q, T_k)$ and `dout` $(B, T_q, d_v)$ (no mask).
# Return `(dQ, dK, dV)`, each with the shape of its input. Go backwards one
# product at a time: through $PV$ (two matrix products, so two gradients),
# then through the softmax (exercise 1, row by row), then through
# $QK^\top$ and the scale. Check every shape as you go; `swapaxes(-1, -2)`
# transposes the last two axes of a batch of matrices.

# %%
def my_attention_backward(Q, K, V, P, dout):
    # your code here
    return np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)

check_attention_backward(my_attention_backward);

# %% [markdown]
# ## Summary
#
# * A backward computes $J^\top dy$ without building $J$; for softmax,
#   $J = \operatorname{diag}(y) - yy^\top$ gives $dz = y \odot (dy - \sum dy \odot y)$.
# * Layer norm's input gradient has a mean term and a variance term because
#   $\mu$ and $\sigma^2$ depend on $x$; they make $dx$ blind to shifts and
#   scalings of $x$, which the output is blind to.
# * Central differences have error $O(h^2)$; combining steps $h$ and $2h$
#   gives $O(h^4)$. Too large an $h$ truncates, too small an $h$ rounds: the
#   error against $h$ is a V, and only float64 gets its bottom far below $10^{-6}$.
# * The relative error, tensor-wide, judges gradients of any scale alike.
# * A gradient check names the broken tensor: a missing mean term, an
#   unsummed bias, a missing transpose, `=` where `+=` belongs. It only works
#   with a random upstream gradient, randomised parameters and more than one
#   row, and it needs care at kinks.
#
# ## Next
#
# [Lesson 12](12_the_whole_model.ipynb), the whole model: Figure 1 assembled,
# teacher forcing, and a gradient check of everything at once.

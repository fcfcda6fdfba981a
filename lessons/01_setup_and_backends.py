# %% [markdown]
# # Lesson 1: Setup, arrays and backends
#
# In this course we build the Transformer of *Attention Is All You Need*
# (Vaswani et al., 2017) one piece at a time, with every gradient written by
# hand. Everything is ordinary array code: the same lines run on a laptop CPU
# with **NumPy** and on an NVIDIA GPU with **CuPy**, whose arrays have the same
# interface but live in the GPU's memory.
#
# In this lesson:
#
# 1. how minitrans chooses between NumPy and CuPy, and what happens without a GPU;
# 2. moving arrays between host (CPU) memory and the device (GPU);
# 3. why we care about `float32` versus `float64`;
# 4. the two versions of minitrans's kernels, and why this course runs the
#    one you can read;
# 5. our first layer, `Linear`, with its forward, its backward and a gradient check.

# %%
import numpy as np

import minitrans
from minitrans.core import backend

minitrans.use(kernels="reference")  # the kernels that read as the equations (see below)
print("minitrans", minitrans.__version__, "| numpy", np.__version__)
print("backend:", backend.backend_name(), "| default dtype:", minitrans.get_dtype())

# %% [markdown]
# ## One code path, several array libraries
#
# A layer never writes `import numpy`. It asks the backend for the array
# namespace, by convention called `xp`, and uses it exactly as it would use
# `np`:
#
# ```python
# xp = minitrans.get_xp()      # numpy, or cupy, or the strict test backend
# y = xp.maximum(x @ W + b, 0.0)
# ```
#
# `minitrans.use("cupy")` switches every layer created afterwards to the GPU.
# On a machine without CuPy or without a GPU, asking for it raises an error
# that says which of the two is missing (in a terminal, `minitrans doctor
# --device gpu` says more: which CuPy to install for your driver, and whether
# the GPU computes right):

# %%
try:
    minitrans.use("cupy")
    print("CuPy is available: the GPU is in use")
    minitrans.use("numpy")
except minitrans.BackendUnavailableError as error:
    print("No GPU here:", error)

# %% [markdown]
# The third backend, `strict`, runs on NumPy but behaves like CuPy towards
# NumPy arrays: mixing them raises `TypeError`. On a GPU, a mask built with
# `numpy` inside a layer would fail; with `strict` it fails on a laptop too,
# so the tests catch it before anyone runs on a GPU.

# %%
with minitrans.using("strict"):
    xp = minitrans.get_xp()
    on_device = xp.ones((2, 3))
    try:
        on_device + np.ones((2, 3))        # a host array mixed with a device array
    except TypeError as error:
        print("strict backend:", error)
    print("the backend's own functions work:", float(xp.exp(on_device).sum()))

# %% [markdown]
# ## Moving arrays between host and device
#
# `minitrans.to_device(x)` copies a NumPy array to the current backend, and
# `minitrans.to_numpy(x)` copies any array back to the host (on CuPy this is a
# transfer over the PCIe bus, so we do it rarely: to print, to plot, to save).
# Both also move a whole layer or model in place. `minitrans.from_host(x)`
# is `to_device` with floats cast to the default dtype, the usual way to hand
# fresh data to a layer.

# %%
host = np.arange(6.0).reshape(2, 3)
device = minitrans.to_device(host, dtype="float32")
print(type(device).__name__, device.dtype, device.shape)
back = minitrans.to_numpy(device)
print(type(back).__name__, back)

# %% [markdown]
# ## float32 and float64
#
# GPUs and BLAS libraries are fastest in 32-bit floats, so training runs in
# `float32`. Gradient checks need `float64`: central differences subtract two
# nearly equal numbers, and float32's 7 significant digits are not enough.
#
# One trap: under NumPy 2, a float32 array times a *NumPy* float64 scalar
# becomes float64, silently doubling memory and time. A plain Python float does
# not. That is why minitrans writes `1.0 / math.sqrt(d_k)`, never
# `1 / np.sqrt(d_k)`.

# %%
import math

x = np.ones(3, dtype=np.float32)
print("x / np.sqrt(4.0)   ->", (x / np.sqrt(np.float64(4.0))).dtype)
print("x / math.sqrt(4.0) ->", (x / math.sqrt(4.0)).dtype)

# %% [markdown]
# ## The kernels you read, and the fast ones
#
# A few computations inside the layers (softmax, layer norm, the loss, Adam's
# update, ...) come in two versions, side by side in one module: a
# **reference** version that reads as the equation, and a **fast** one that
# computes the same numbers with fewer arrays or inside the matrix library
# (lesson 12 lists them). minitrans runs the fast versions unless told
# otherwise: they train faster. This course runs the reference versions, so
# that the code a lesson shows you is the code that runs. Every lesson
# starts, as this one did above, with
#
# ```python
# minitrans.use(kernels="reference")
# ```
#
# `with minitrans.using(kernels="fast"):` runs one block on the fast
# versions, and `MINITRANS_KERNELS=reference` in the environment chooses
# before Python starts (for a script, or the `minitrans` command). A few
# lessons train a model long enough for the speed to matter; they run that
# training on the fast kernels, and say so where they do. The two agree to
# rounding (the tests check every pair), except dropout, whose fast version
# draws other masks from the same seed.

# %%
from minitrans.core import kernels

print("active kernel set:", kernels.active())
with minitrans.using(kernels="fast"):
    print("inside `with minitrans.using(kernels=\"fast\")`:", kernels.active())
print("after the block:", kernels.active())

# %% [markdown]
# ## Our first layer: Linear
#
# Every layer in minitrans has the same shape of code:
#
# * `params` and `grads`: dictionaries with the same keys;
# * `forward(x)` computes the output and keeps what `backward` will need;
# * `backward(dy)` returns $\partial L / \partial x$ and **adds** the parameter
#   gradients into `grads`.
#
# For $y = xW + b$ with $x$ of shape $(N, d_\text{in})$ and an upstream gradient
# $\frac{\partial L}{\partial y}$ of shape $(N, d_\text{out})$:
#
# $$\frac{\partial L}{\partial x} = \frac{\partial L}{\partial y} W^\top, \qquad
# \frac{\partial L}{\partial W} = x^\top \frac{\partial L}{\partial y}, \qquad
# \frac{\partial L}{\partial b} = \sum_n \frac{\partial L}{\partial y_n}.$$
#
# Check the shapes: $(N, d_\text{out})(d_\text{out}, d_\text{in})$ gives
# $(N, d_\text{in})$ like $x$, and $(d_\text{in}, N)(N, d_\text{out})$ gives
# $(d_\text{in}, d_\text{out})$ like $W$.

# %%
layer = minitrans.Linear(4, 3, rng=0)
print({name: value.shape for name, value in layer.params.items()})
# (B, T, d_in), float32
x = minitrans.from_host(np.random.default_rng(1).standard_normal((2, 5, 4)))
y = layer.forward(x)
print("y:", y.shape)
dx = layer.backward(minitrans.get_xp().ones_like(y))
print("dx:", dx.shape, "| dW:", layer.grads["W"].shape, "| db:", layer.grads["b"])

# %% [markdown]
# ## A gradient check
#
# How do we know the backward is right? We compare it with a numerical
# derivative. For a random upstream gradient $G$, the scalar
# $L = \sum y \odot G$ has exactly the gradients that `backward(G)` computes,
# and for every element $w$ of every input and parameter,
#
# $$\frac{\partial L}{\partial w} \approx \frac{L(w + h) - L(w - h)}{2h}.$$
#
# `check_layer` does this for every tensor, in float64, and reports the
# relative error $\max|a - n| / \max(|a|, |n|)$; below $10^{-6}$ passes.
# (Lesson 11 opens this box.)

# %%
from minitrans.gradcheck import check_layer, format_table

with minitrans.using(dtype="float64"):
    layer64 = minitrans.Linear(4, 3, rng=0)
    x64 = minitrans.from_host(np.random.default_rng(1).standard_normal((2, 5, 4)))  # float64 here
    print(format_table(check_layer(layer64, x64)))

# %% [markdown]
# ## Exercise: the backward of Linear
#
# Write the backward of $y = xW + b$ yourself, in plain NumPy: given `x`
# $(\dots, d_\text{in})$, `W` $(d_\text{in}, d_\text{out})$ and the upstream
# gradient `dy` $(\dots, d_\text{out})$, return `(dx, dW, db)` with the
# shapes of `x`, `W` and $b$ $(d_\text{out},)$. The formulas are the three
# above; the catch is the batch axes: `x` may be $(N, d_\text{in})$ or
# $(B, T, d_\text{in})$, and every position adds to `dW` and `db`.
#
# The checker tries several cases (rows, a batch, a batch of one, one output
# feature, float32) against a reference that sums position by position, and
# names the first case your answer gets wrong. The skeleton returns zeros, so
# it says "not yet". The solution is in `solutions/01_setup_and_backends.py`.

# %%
from minitrans_course.exercises_basics import check_linear_backward


def my_linear_backward(x, W, dy):
    # your code here
    return np.zeros_like(x), np.zeros_like(W), np.zeros(W.shape[1])


check_linear_backward(my_linear_backward);

# %% [markdown]
# ## Summary
#
# * Layers get their array namespace `xp` from the backend: the same code runs
#   on NumPy, CuPy and the strict test backend.
# * Arrays move with `to_device` and `to_numpy`; layers and models too.
# * Training uses float32, gradient checks float64, and Python floats keep
#   float32 arrays float32.
# * The course runs the reference kernels, which read as the equations
#   (`minitrans.use(kernels="reference")`); `minitrans.using(kernels="fast")`
#   runs a block on the fast ones.
# * A layer is a forward and a backward side by side, and a gradient check
#   proves the backward right.
#
# ## Next
#
# [Lesson 2](02_softmax_and_similarity.ipynb), softmax and why attention
# divides by $\sqrt{d_k}$.

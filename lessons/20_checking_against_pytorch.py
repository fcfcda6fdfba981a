# %% [markdown]
# # Lesson 20: Checking against PyTorch
#
# Every gradient in minitrans was derived on paper and typed in by hand.
# Lesson 11 checked them against finite differences. This lesson checks them
# against PyTorch's autograd, which nobody here wrote: the same model, built
# from `torch.nn.Transformer` with the same weights, must give the same
# logits, the same loss and the same gradient for every parameter.
#
# In this lesson:
#
# 1. why a second check, and what it catches that lesson 11's cannot;
# 2. one layer by hand: `MultiHeadAttention` against `torch.nn.MultiheadAttention`,
#    and how the two store their weights;
# 3. the whole model: logits, label-smoothed loss and all of its gradients,
#    and two planted bugs;
# 4. the key bias, which PyTorch has and minitrans leaves out;
# 5. a few steps of Adam with the paper's schedule, in both;
# 6. where to go next: the same model trained by PyTorch on GPUs.
#
# The lesson needs PyTorch; the CPU build is enough: `pip install ".[torch]"`.

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch

import minitrans
from minitrans.data.tasks import load_task
from minitrans.interop.torch import (
    from_torch,
    key_bias_blocks,
    paper_loss,
    paper_optimizer,
    parameter_links,
    to_torch,
)
from minitrans.gradcheck import check_layer, format_table, relative_error

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)

minitrans.use("numpy", dtype="float64")   # float64 everywhere: rounding stays near 1e-16
print("PyTorch", torch.__version__)

# %% [markdown]
# ## 1. Why compare with an autograd engine
#
# The gradient check of lesson 11 nudges each parameter by $\pm h$, runs our
# forward again, and compares the change in the loss with our backward. It
# proves one thing: **our backward is the derivative of our forward**. It
# cannot tell whether the forward itself is the paper's model. Leave out the
# $\sqrt{d_\text{model}}$ of the embeddings, put a LayerNorm before the
# residual add instead of after, or let the decoder see one position too
# far: the backward, derived from that same forward, is still its exact
# derivative, and the check passes.
#
# PyTorch gives a second, independent opinion on both halves:
#
# * **the forward**: `torch.nn.Transformer` was written by other people from
#   the same paper. If its logits equal ours on the same weights and the same
#   padded batch, both implement the same function (masks, scales and
#   normalisation included);
# * **the backward**: autograd derives nothing by hand. It records the
#   operations of the forward and applies the chain rule to each, so its
#   gradients are right for whatever the forward computed.
#
# It is also cheap: one backward in each library, where central differences
# need four forwards per parameter *entry*. That is why lesson 12's
# whole-model check used a model with $d_\text{model} = 4$; here
# $d_\text{model} = 16$ with a real vocabulary is no trouble, and a base-sized
# model would not be either.
#
# The yardstick is lesson 11's relative error,
# $\max_k |a_k - b_k| / \max(\max_k |a_k|, \max_k |b_k|)$ over a tensor. Two
# float64 programs that compute the same sums in a different order agree to
# about $10^{-15}$; a mistake shows up as $10^{-3}$ or worse.
#
# `minitrans.interop.torch` does the copying and the bookkeeping. Before
# using it, we do one layer by hand, to see what it does for us.
#
# ## 2. One layer by hand: multi-head attention
#
# minitrans multiplies on the right, $y = xW + b$ with $W$ of shape
# $(d_\text{in}, d_\text{out})$, the way the paper writes $QW^Q$. PyTorch's
# `nn.Linear` stores the transpose, $(d_\text{out}, d_\text{in})$, and computes
# $y = xW^\top + b$. `nn.MultiheadAttention` goes one step further and stacks
# the three input projections into a single matrix `in_proj_weight` of shape
# $(3d, d)$, rows $[W_Q^\top; W_K^\top; W_V^\top]$, with one bias `in_proj_bias`
# $[b_Q; b_K; b_V]$ of length $3d$. Both layers, side by side:

# %%
d_model, h = 8, 2
rng = np.random.default_rng(0)
ours = minitrans.MultiHeadAttention(d_model, h, rng=0)
for _, value, _ in ours.named_parameters():   # non-zero biases, so that they are compared too
    value += 0.1 * rng.standard_normal(value.shape)
theirs = torch.nn.MultiheadAttention(d_model, h, batch_first=True, dtype=torch.float64)

print("minitrans:", {name: value.shape for name, value, _ in ours.named_parameters()})
print("PyTorch:  ", {name: tuple(tensor.shape) for name, tensor in theirs.named_parameters()})

# %% [markdown]
# Seven arrays (in the four `Linear` layers `W_Q`, `W_K`, `W_V`, `W_O`)
# against four. Copying our weights into PyTorch means
# transposing each matrix and stacking the three input projections;
# minitrans has no key bias (lesson 7), so its block of `in_proj_bias` is
# set to zero:

# %%
P = {name: torch.from_numpy(value) for name, value, _ in ours.named_parameters()}
with torch.no_grad():
    theirs.in_proj_weight.copy_(torch.cat([P["W_Q.W"].T, P["W_K.W"].T, P["W_V.W"].T]))   # (3d, d)
    theirs.in_proj_bias.copy_(torch.cat([P["W_Q.b"], torch.zeros(d_model), P["W_V.b"]]))
    theirs.out_proj.weight.copy_(P["W_O.W"].T)
    theirs.out_proj.bias.copy_(P["W_O.b"])

# %% [markdown]
# Now the same self-attention in both, on a batch of two sequences where the
# second has three padding positions. The masks have opposite conventions:
# minitrans's `True` means "may attend", PyTorch's `key_padding_mask` marks
# with `True` the keys to **ignore**.
#
# To compare backwards we need a loss. The "fake loss" $L = \sum (\text{out}
# \odot g)$ with a **random** $g$ has $\partial L / \partial\,\text{out} = g$:
# in minitrans we pass $g$ to `backward`, in PyTorch we build $L$ and call
# `.backward()`. (Lesson 11 showed why not all ones: some wrong backwards give
# right answers for an upstream gradient that is the same everywhere.)

# %%
ids = np.array([[5, 3, 7, 2, 4],
                [6, 1, 0, 0, 0]])                     # 0 is <pad>
x = rng.standard_normal((2, 5, d_model))              # (B, T, d_model)
g = rng.standard_normal((2, 5, d_model))              # the upstream gradient

ours.zero_grad()
out = ours.forward(x, mask=minitrans.padding_mask(ids, 0))   # (B, 1, T), True = may attend
dx = ours.backward(g)

x_t = torch.tensor(x, requires_grad=True)
out_t, _ = theirs(x_t, x_t, x_t, key_padding_mask=torch.from_numpy(ids == 0))   # True = ignore
(out_t * torch.from_numpy(g)).sum().backward()

Q, K, V = slice(0, d_model), slice(d_model, 2 * d_model), slice(2 * d_model, 3 * d_model)
dW_in, db_in = theirs.in_proj_weight.grad, theirs.in_proj_bias.grad     # (3d, d), (3d,)
pairs = {                                   # ours, PyTorch's in our layout
    "out":  (out, out_t),
    "dx":   (dx, x_t.grad),
    "dW_Q": (ours.W_Q.grads["W"], dW_in[Q].T),
    "dW_K": (ours.W_K.grads["W"], dW_in[K].T),
    "dW_V": (ours.W_V.grads["W"], dW_in[V].T),
    "db_Q": (ours.W_Q.grads["b"], db_in[Q]),
    "db_V": (ours.W_V.grads["b"], db_in[V]),
    "dW_O": (ours.W_O.grads["W"], theirs.out_proj.weight.grad.T),
    "db_O": (ours.W_O.grads["b"], theirs.out_proj.bias.grad),
}
for name, (a, t) in pairs.items():
    print(f"{name:5s} relative error {relative_error(a, t.detach().numpy()):.1e}")
print("PyTorch's gradient of the key bias it has and we do not: max |db_K| = "
      f"{db_in[K].abs().max():.1e}")

# %% [markdown]
# Output, input gradient and all seven parameter gradients agree to about
# $10^{-16}$, the last digit of float64. Notice the transposes going back
# as well: PyTorch's gradient of `in_proj_weight[Q]` is $(dW_Q)^\top$. The key
# bias gets a gradient of zero up to rounding; section 4 says why.
#
# Doing this by hand for every layer of a model would be long and easy to get
# wrong. `minitrans.interop.torch` writes the correspondence down once.
#
# ## 3. The whole model
#
# A small encoder-decoder for the toy translation task, with dropout off
# (the two libraries draw different random masks, so with dropout on they
# could not agree), and one batch of four sentence pairs of different lengths,
# so that the source and target are padded:

# %%
task = load_task("translate", seed=0, num_train=100, num_valid=5)
config = minitrans.ModelConfig(vocab_size=len(task.vocab), d_model=16, h=4, N=1, d_ff=32,
                               dropout=0.0, max_len=32)
batch = task.make_batch(task.train[:4])
print("src\n", batch.src, "\ntgt_in\n", batch.tgt_in)

model = minitrans.Transformer(config, rng=0)
torch_model = to_torch(model)      # a TorchTransformer: nn.Transformer with our weights, in float64
print(type(torch_model).__name__, next(torch_model.parameters()).dtype)
print(f"parameters: minitrans {model.num_parameters():,}, "
      f"PyTorch {sum(p.numel() for p in torch_model.parameters()):,}")

# %% [markdown]
# PyTorch has 48 parameters more: the key biases of the three attention
# blocks (encoder self-attention, decoder self-attention, cross-attention),
# 16 each. `to_torch` sets them to zero.
#
# Inside, `TorchTransformer` is `nn.Transformer` with `batch_first=True`,
# plus what the paper adds around it: embeddings scaled by
# $\sqrt{d_\text{model}}$, the sinusoidal positional encoding, and the
# pre-softmax linear layer. It follows minitrans where PyTorch's defaults
# differ (no dropout on attention weights, no final LayerNorm after a
# post-norm stack), and builds the causal and padding masks from the ids,
# as `Transformer.forward` does.
#
# **The forward.** The same ids into both, then the same loss: PyTorch's
# `CrossEntropyLoss` with `label_smoothing=0.1` and `ignore_index=<pad>`
# (`paper_loss` builds it) is, term for term, minitrans's
# `LabelSmoothedCrossEntropy`.

# %%
logits = model.forward(batch.src, batch.tgt_in)                               # (B, T, V)
logits_t = torch_model(torch.from_numpy(batch.src), torch.from_numpy(batch.tgt_in))

loss_fn = minitrans.LabelSmoothedCrossEntropy(0.1, pad_id=config.pad_id)
loss = loss_fn.forward(logits, batch.tgt_out)
loss_t = paper_loss(config, 0.1)(logits_t, torch.from_numpy(batch.tgt_out))

print("logits", logits.shape, "relative error",
      f"{relative_error(logits, logits_t.detach().numpy()):.1e}")
print(f"loss   minitrans {float(loss):.15f}\n       PyTorch   {loss_t.item():.15f}")

# %% [markdown]
# **The backward.** One call each. `parameter_links(model, torch_model)` pairs
# every minitrans parameter with the PyTorch tensor that holds it, and
# `link.torch_grad()` returns PyTorch's gradient already sliced out of
# `in_proj_weight` and transposed back into minitrans's layout, so it can be
# compared with `link.grad` directly.

# %%
model.zero_grad()
model.backward(loss_fn.backward())
loss_t.backward()

links = parameter_links(model, torch_model)
errors = {link.name: relative_error(link.grad, link.torch_grad().numpy()) for link in links}
worst = max(errors, key=errors.get)
print(f"{'parameter':44s} {'shape':10s} {'max |grad|':>10s} {'rel. error':>10s}")
for link in links:
    mark = "  <- worst" if link.name == worst else ""
    print(f"{link.name:44s} {str(link.grad.shape):10s} {np.abs(link.grad).max():10.1e} "
          f"{errors[link.name]:10.1e}{mark}")

# %% [markdown]
# All of them, from the source embedding to the output projection, on a log
# scale, with the $10^{-6}$ threshold of `minitrans gradcheck` and float64's
# machine epsilon (the spacing of float64 numbers near 1) for comparison:

# %%
fig, ax = plt.subplots(figsize=(7, 8))
names = list(errors)
ax.barh(names, [max(e, 1e-18) for e in errors.values()],
        color=["tab:red" if n == worst else "tab:blue" for n in names])
ax.axvline(np.finfo(np.float64).eps, color="grey", linestyle=":", label="float64 epsilon, 2.2e-16")
ax.axvline(1e-6, color="black", linestyle="--", label="gradcheck threshold, 1e-6")
ax.set_xscale("log")
ax.set_xlim(1e-18, 1e-4)
ax.invert_yaxis()
ax.tick_params(axis="y", labelsize=7)
ax.set_xlabel("relative error of the gradient, minitrans vs PyTorch autograd")
ax.set_title(f"{len(names)} parameters of a 1-layer Transformer, float64")
ax.legend(loc="lower right")
fig.tight_layout()
plt.show()

# %% [markdown]
# Every gradient agrees to within about ten units of float64's last digit
# (one unit is $2.2 \times 10^{-16}$): nine orders of magnitude below the
# threshold. The two libraries add the same numbers in different orders
# (PyTorch, for instance, computes the three projections of `in_proj_weight`
# as one matrix product), and that is all the difference there is.
#
# **Does the comparison catch anything?** A check is only worth something if
# it fails on a wrong answer. First a wrong backward: halve the gradient of
# one weight, as a backward that forgot a factor of 2 would.

# %%
model.decoder.layers[0].feed_forward.W_2.grads["W"] *= 0.5
for link in links:
    error = relative_error(link.grad, link.torch_grad().numpy())
    if error > 1e-6:
        print(f"FAIL {link.name}: relative error {error:.1e}")
model.decoder.layers[0].feed_forward.W_2.grads["W"] *= 2.0      # put it back

# %% [markdown]
# It names the parameter, with an error of exactly 0.5: half of every entry
# is missing. Then a wrong *forward*, the kind lesson 11's check cannot see:
# an embedding without its $\sqrt{d_\text{model}}$ factor. On its own, such a
# layer passes the gradient check, because its backward is the right
# derivative of what its forward does:

# %%
unscaled = minitrans.Embedding(7, 4, scale=False, rng=0)
print(format_table(check_layer(unscaled, np.array([[1, 2, 2, 6]]))))

# %% [markdown]
# Put into the model, it changes the function the model computes, and the
# comparison with PyTorch fails at the first number it looks at:

# %%
model.src_embed.embedding.scale = model.tgt_embed.embedding.scale = 1.0   # the "bug"
wrong_logits = model.forward(batch.src, batch.tgt_in)
print("logits relative error:", f"{relative_error(wrong_logits, logits_t.detach().numpy()):.1e}")
model.src_embed.embedding.scale = model.tgt_embed.embedding.scale = config.d_model ** 0.5

# %% [markdown]
# **Why float64.** The same comparison in float32 (the dtype training uses)
# can only agree to float32's rounding, $6 \times 10^{-8}$ per operation,
# which piles up through the layers:

# %%
with minitrans.using(dtype="float32"):
    model32 = minitrans.Transformer(config, rng=0)
    torch32 = to_torch(model32)                       # float32 too: to_torch follows the model
    logits32 = model32.forward(batch.src, batch.tgt_in)
    logits32_t = torch32(torch.from_numpy(batch.src), torch.from_numpy(batch.tgt_in))
    loss32_fn = minitrans.LabelSmoothedCrossEntropy(0.1, pad_id=config.pad_id)
    loss32_fn.forward(logits32, batch.tgt_out)
    model32.backward(loss32_fn.backward())
    paper_loss(config)(logits32_t, torch.from_numpy(batch.tgt_out)).backward()
    errors32 = [relative_error(link.grad, link.torch_grad().numpy())
                for link in parameter_links(model32, torch32)]
print(f"float32: logits {relative_error(logits32, logits32_t.detach().numpy()):.1e}, "
      f"worst gradient {max(errors32):.1e}")
print(f"float64: logits {relative_error(logits, logits_t.detach().numpy()):.1e}, "
      f"worst gradient {errors[worst]:.1e}")

# %% [markdown]
# In float32 the worst gradient is already around the $10^{-6}$ threshold, so a
# bug that moves a gradient by one part in a million would be lost in the
# rounding. In float64 the honest differences sit nine orders of magnitude
# lower, and there is no room for a bug to hide.
#
# ## 4. The key bias
#
# `nn.MultiheadAttention` has a bias on the keys, $b_K$; minitrans does not.
# Lesson 7 showed why it is useless: the score of query $i$ and key $j$
# becomes
#
# $$\frac{q_i \cdot (k_j + b_K)}{\sqrt{d_k}} = \frac{q_i \cdot k_j}{\sqrt{d_k}}
# + \frac{q_i \cdot b_K}{\sqrt{d_k}},$$
#
# and the second term is the same for every key $j$ in query $i$'s row.
# Softmax ignores a constant added to a whole row, so nothing downstream
# depends on $b_K$ and its gradient is zero. In PyTorch the parameter exists
# anyway, so we can watch autograd find that zero. `key_bias_blocks` returns,
# for each attention block, its name, its `in_proj_bias` tensor and the rows
# of the $b_K$ part:

# %%
largest = max(float(link.torch_grad().abs().max()) for link in links)
for name, bias, rows in key_bias_blocks(torch_model):
    print(f"{name:44s} max |db_K| = {bias.grad[rows].abs().max():.1e}")
print(f"{'the largest gradient of any parameter':44s} {largest:.1e}")

# %% [markdown]
# Zero up to rounding: below $10^{-17}$, against gradients up to $10^{-1}$.
# (Mathematically it is exactly zero: the gradient of $b_K$ sums, over the
# keys of each row, the gradient of the scores, and softmax's backward makes
# every such row sum vanish; lesson 11 showed the rows of its Jacobian sum to
# zero. In floating point the sum leaves a few units of the last digit.)
#
# The other side of the same fact: give PyTorch's key biases random values
# and its logits do not move, so a PyTorch model whose $b_K$ drifted during
# training still loads into minitrans (`from_torch` leaves $b_K$ behind).

# %%
with torch.no_grad():
    for _, bias, rows in key_bias_blocks(torch_model):
        bias[rows] = torch.randn(rows.stop - rows.start, dtype=torch.float64)
    moved = torch_model(torch.from_numpy(batch.src), torch.from_numpy(batch.tgt_in))
print("logits with random key biases vs without, relative error:",
      f"{relative_error(moved.numpy(), logits_t.detach().numpy()):.1e}")

# %% [markdown]
# ## 5. Adam and the warm-up schedule, in both
#
# Equal gradients are half of training; the optimiser is the other half.
# `paper_optimizer(torch_model, warmup, factor)` builds `torch.optim.Adam`
# with the paper's $\beta_1 = 0.9$, $\beta_2 = 0.98$, $\epsilon = 10^{-9}$ and
# a `LambdaLR` scheduler that follows §5.3,
# $\text{lrate} = \text{factor} \cdot d_\text{model}^{-0.5} \cdot
# \min(\text{step}^{-0.5}, \text{step} \cdot \text{warmup}^{-1.5})$.
# minitrans's `Adam` gets the same rate from `transformer_lr` (lesson 13).
#
# A fresh pair of models, ten steps, a new batch of eight pairs at each. After
# every step we compare every parameter of the two models.

# %%
model = minitrans.Transformer(config, rng=1)
torch_model = to_torch(model)
links = parameter_links(model, torch_model)
warmup, factor = 4, 1.0
optimizer = minitrans.Adam(model, betas=(0.9, 0.98), eps=1e-9)
torch_optimizer, scheduler = paper_optimizer(torch_model, warmup, factor)
torch_loss_fn = paper_loss(config, 0.1)

print(f"{'step':>4s} {'lr':>8s} {'lr torch':>8s} {'loss':>8s} {'loss torch':>10s} "
      f"{'worst param error':>18s}")
for step in range(1, 11):
    batch = task.make_batch(task.train[8 * step: 8 * step + 8])
    model.zero_grad()
    loss = loss_fn.forward(model.forward(batch.src, batch.tgt_in), batch.tgt_out)
    model.backward(loss_fn.backward())
    lr = optimizer.step(minitrans.transformer_lr(step, config.d_model, warmup, factor))

    torch_optimizer.zero_grad()
    logits_t = torch_model(torch.from_numpy(batch.src), torch.from_numpy(batch.tgt_in))
    loss_t = torch_loss_fn(logits_t, torch.from_numpy(batch.tgt_out))
    loss_t.backward()
    lr_t = scheduler.get_last_lr()[0]            # the rate this step uses
    torch_optimizer.step()
    scheduler.step()

    drift = max(relative_error(link.value, link.torch_value().numpy()) for link in links)
    print(f"{step:4d} {lr:8.5f} {lr_t:8.5f} {float(loss):8.4f} {loss_t.item():10.4f} {drift:18.1e}")

# %% [markdown]
# The two learning rates are the same number, the losses move together, and
# after ten updates the parameters still agree to about $10^{-13}$. Each step
# adds a little rounding, and Adam divides by $\sqrt{\hat v}$, which magnifies
# small differences in small gradients, so the agreement slowly loosens; it
# stays far below anything that would matter.
#
# The way back: `from_torch` copies PyTorch's trained weights into a new
# minitrans model, which then computes what the PyTorch model computes.

# %%
back = from_torch(torch_model)
with torch.no_grad():                          # the weights after the last step
    logits_t = torch_model(torch.from_numpy(batch.src), torch.from_numpy(batch.tgt_in))
print("logits of from_torch(torch_model) vs torch_model:",
      f"{relative_error(back.forward(batch.src, batch.tgt_in), logits_t.numpy()):.1e}")

# %% [markdown]
# ## 6. Where to go next: training with PyTorch
#
# minitrans trains on one CPU, or one GPU through CuPy. A model that outgrows
# that can move to PyTorch without losing its weights, because `to_torch`
# builds the same function, as this lesson has measured. A sketch of data
# parallel training on several GPUs (not run here), started with
# `torchrun --nproc_per_node=4 train.py`:
#
# ```python
# torch.distributed.init_process_group("nccl")          # one process per GPU
# rank = torch.distributed.get_rank()
# torch_model = to_torch(model, device=f"cuda:{rank}")  # the same weights on every GPU
# ddp = torch.nn.parallel.DistributedDataParallel(torch_model, device_ids=[rank])
# optimizer, scheduler = paper_optimizer(ddp, warmup=4000)
# for batch in my_shard_of_the_data:                    # each process reads different batches
#     ...                                               # forward, paper_loss, backward as above:
#     optimizer.step(); scheduler.step()                # DDP averages the gradients across GPUs
# if rank == 0:
#     model = from_torch(ddp.module.cpu())              # back to minitrans, to read or decode
# ```
#
# `examples/continue_in_pytorch.py` is this in full, and runs on CPUs too
# (gloo instead of NCCL). Build `model` in float32 for this: `to_torch`
# keeps the model's dtype, and GPUs are much faster in float32 than in
# float64. Whatever you change on the
# PyTorch side (mixed precision, another optimiser, a bigger model), the
# checks of this lesson tell you whether the two still compute the same thing.
#
# **Try it:** compare `minitrans.LayerNorm` with `torch.nn.LayerNorm` by hand,
# as section 2 did for attention (hint: PyTorch's `eps` must match
# `norm.eps`), or run section 3 with `pre_norm=True` or
# `tie_embeddings=True` in the config.

# %% [markdown]
# ## Exercise: minitrans's weights in PyTorch's layout
#
# Section 2 copied the attention weights by hand. Write that conversion as a
# function of plain NumPy arrays: given minitrans's `W_Q`, `W_K`, `W_V`, each
# $(d, d)$ and used as $xW$, and the biases `b_Q`, `b_V` $(d,)$, return
# PyTorch's `(in_proj_weight, in_proj_bias)`, of shapes $(3d, d)$ and
# $(3d,)$. The checker builds the answer row by row, in another way, and
# names the case a slip shows in. The solution is in
# `solutions/20_checking_against_pytorch.py`.

# %%
from minitrans_course.exercises_basics import check_torch_in_proj


def my_torch_in_proj(W_Q, W_K, W_V, b_Q, b_V):
    # your code here
    d = W_Q.shape[0]
    return np.zeros((3 * d, d)), np.zeros(3 * d)


check_torch_in_proj(my_torch_in_proj);

# %% [markdown]
# ## Summary
#
# * A gradient check proves the backward matches the forward; comparing with
#   an independent implementation also proves the forward is the intended
#   model. The two checks answer different questions.
# * minitrans stores $W$ as $(d_\text{in}, d_\text{out})$ and computes $xW$;
#   PyTorch stores $W^\top$, and stacks $W_Q, W_K, W_V$ into `in_proj_weight`.
#   Masks have opposite conventions (`True` = may attend, `True` = ignore).
# * In float64, logits, the label-smoothed loss and every gradient of the
#   whole model agree with autograd to $10^{-14}$ or better; a halved
#   gradient or a missing $\sqrt{d_\text{model}}$ shows up at once.
# * PyTorch's key bias always has a zero gradient, because softmax ignores a
#   constant added to a row of scores; minitrans leaves it out.
# * Adam with the paper's schedule takes the same steps in both, so a model
#   can move to PyTorch (`to_torch`) and back (`from_torch`) mid-training.
#
# ## Next
#
# [Lesson 21](21_data_parallelism.ipynb), data parallelism: one gradient
# from two halves of a batch, computed on two CPU cores, and the step from
# there to `DistributedDataParallel` on many GPUs.

# %% [markdown]
# # Lesson 21: Data parallelism, two cores and one gradient
#
# Large Transformers are trained on many GPUs at once, and the simplest way
# to share the work is to share the *data*: every device holds a copy of the
# model, takes a slice of the batch, computes the gradient of its slice, and
# the devices add their gradients before the optimiser step. This is data
# parallelism (PyTorch's `DistributedDataParallel`; lesson 20 ends there).
#
# minitrans uses the same idea on a laptop CPU, with its cores for devices:
# its `Trainer` splits every batch over two workers. This lesson:
#
# 1. shows why the gradient of a batch is a weighted sum of the gradients
#    of its shards, and why the weights are token counts, not 1/2;
# 2. checks `minitrans.training.optimisation.parallel.DataParallel` against the whole batch in
#    float64, and by central differences;
# 3. opens a replica: a copy of the model that shares its parameters but
#    keeps its own caches, gradients and dropout masks;
# 4. measures why this pays on a CPU: NumPy runs a matrix product on every
#    core, but an element-wise operation on one; and why the second worker
#    is a process of its own rather than a thread;
# 5. ends with an exercise: combine the shards' gradients yourself.

# %%
import timeit

import numpy as np
from threadpoolctl import threadpool_limits

import minitrans
from minitrans.layers.dropout import Dropout
from minitrans.layers.loss import LabelSmoothedCrossEntropy
from minitrans.training.optimisation.parallel import DataParallel, replicate

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)

minitrans.use("numpy", dtype="float64")  # float64 for the checks; timings switch to float32 below

# %% [markdown]
# ## The loss of a batch is a weighted sum
#
# The loss of a batch (lesson 10) is the mean over its real target tokens;
# padding does not count. Cut the batch along its first axis into shards
# $s = 1 \dots S$, shard $s$ holding $n_s$ of the $n = \sum_s n_s$ real
# tokens, with mean loss $L_s$. Then
#
# $$L = \frac{1}{n} \sum_{\text{tokens}} \ell_t
#     = \sum_s \frac{n_s}{n} \cdot \frac{1}{n_s} \sum_{t \in s} \ell_t
#     = \sum_s \frac{n_s}{n} L_s .$$
#
# The gradient is linear, so $\nabla L = \sum_s \frac{n_s}{n} \nabla L_s$:
# each shard's backward can run alone, started with $\partial L /
# \partial L_s = n_s / n$ instead of 1, and the results are added. The
# weights are $n_s / n$, not $1/S$: with padding, two halves of a batch
# rarely hold the same number of real tokens.
#
# A batch of five sentence pairs with padding (id 0) at the end of two
# targets, and a small untrained model:

# %%
config = minitrans.ModelConfig(vocab_size=13, d_model=16, h=2, N=2, d_ff=32, dropout=0.0,
                               max_len=12)
rng = np.random.default_rng(0)
src, tgt_in, tgt_out = (rng.integers(4, 13, size=(5, length)) for length in (7, 6, 6))
tgt_out[0, 2:] = 0
tgt_out[1, 4:] = 0
loss_fn = LabelSmoothedCrossEntropy(0.1, pad_id=0)
model = minitrans.Transformer(config, rng=0)
logits = model.forward(src, tgt_in)

whole = float(loss_fn.forward(logits, tgt_out))
halves = [(slice(0, 2), "rows 0-1"), (slice(2, 5), "rows 2-4")]
shard_losses = [float(loss_fn.forward(logits[rows], tgt_out[rows])) for rows, _ in halves]
counts = [loss_fn.num_targets(tgt_out[rows]) for rows, _ in halves]
for (_, label), count, loss in zip(halves, counts, shard_losses):
    print(f"{label}: {count} real targets, mean loss {loss:.6f}")
print(f"whole batch:             {whole:.6f}")
print("weighted by tokens:      "
      f"{sum(c * l for c, l in zip(counts, shard_losses)) / sum(counts):.6f}")
print(f"plain mean of the halves: {np.mean(shard_losses):.6f}  (wrong)")

# %% [markdown]
# ## DataParallel
#
# `DataParallel(model, loss_fn, workers)` does this. Its
# `forward_backward(inputs, targets)` cuts the batch into `workers` shards
# of nearly equal rows, counts each shard's real targets, runs shard 1 in
# the calling thread on the model itself and every other shard in a worker
# on a replica (a process of its own on Linux, a thread elsewhere: the
# last section says why), each backward started with its share $n_s / n$;
# then it adds the replicas' gradients into the model's. It returns the
# loss of the whole batch and, like `model.backward`, *adds* the gradient
# into `model.grads`.
#
# Against the whole batch in one piece, in float64:

# %%
def loss_and_gradients(workers):
    model = minitrans.Transformer(config, rng=0)
    parallel = DataParallel(model, LabelSmoothedCrossEntropy(0.1, pad_id=0), workers=workers)
    model.zero_grad()
    loss = float(parallel.forward_backward((src, tgt_in), tgt_out))
    return loss, {name: grad.copy() for name, _, grad in model.named_parameters()}


loss_1, grads_1 = loss_and_gradients(1)
for workers in (2, 3, 5):
    loss_w, grads_w = loss_and_gradients(workers)
    largest = max(np.abs(grads_w[name] - grads_1[name]).max() for name in grads_1)
    print(f"{workers} workers: loss {loss_w:.15f} (1 worker: {loss_1:.15f}), "
          f"largest gradient difference {largest:.1e}")

# %% [markdown]
# The differences are rounding: the same numbers added in another order.
# Central differences of the loss that the workers return agree with the
# gradient they add up (three entries of every parameter, by lesson 11's
# `numeric_gradient` with `indices`: a sample instead of every entry):

# %%
from minitrans.gradcheck import numeric_gradient, relative_error

model = minitrans.Transformer(config, rng=0)
parallel = DataParallel(model, LabelSmoothedCrossEntropy(0.1, pad_id=0), workers=2)
model.zero_grad()
parallel.forward_backward((src, tgt_in), tgt_out)
analytic = {name: grad.copy() for name, _, grad in model.named_parameters()}

probe = minitrans.Transformer(config, rng=0)  # its gradients absorb every probe's backward
probe_parallel = DataParallel(probe, LabelSmoothedCrossEntropy(0.1, pad_id=0), workers=2)


def probe_loss():
    return float(probe_parallel.forward_backward((src, tgt_in), tgt_out))


worst = 0.0
for (name, param, _), (_, twin, _) in zip(model.named_parameters(), probe.named_parameters()):
    sample = [np.unravel_index(flat, param.shape)
              for flat in rng.choice(param.size, size=3, replace=False)]
    numeric = numeric_gradient(probe_loss, twin, indices=sample)  # twin: the probe's copy of param
    for index in sample:
        worst = max(worst, relative_error([analytic[name][index]], [numeric[index]]))
print(f"largest relative error over {3 * len(analytic)} entries: {worst:.1e}")

# %% [markdown]
# ## A replica
#
# Why not let two workers run the same model object? A layer keeps, in
# `self.cache`, what its backward needs (lesson 11), and adds into
# `self.grads`: two threads in one layer would overwrite each other's cache
# and race on the same gradient arrays. A replica is a copy of the model
# whose parameters *are* the model's arrays, not copies, with caches and
# gradients of its own:

# %%
replica = replicate(model, 1)
name = "encoder.layers.0.self_attn.W_Q.W"
ours = {n: (param, grad) for n, param, grad in model.named_parameters()}
theirs = {n: (param, grad) for n, param, grad in replica.named_parameters()}
print(f"{name}: same parameter array: {ours[name][0] is theirs[name][0]}, "
      f"same gradient array: {ours[name][1] is theirs[name][1]}")

dropouts = [(m.seed, r.seed) for m, r in zip(model.modules(), replica.modules())
            if isinstance(m, Dropout)]
print(f"{len(dropouts)} dropout layers; seeds of the first, model and replica: {dropouts[0]}")

# %% [markdown]
# Sharing the parameters costs no memory and needs no copying after each
# optimiser step: the step updates the arrays in place, and every replica
# sees the new values. The dropout layers get seeds of their own, derived
# from the model's seed and the replica's number: with the same seeds, the
# two halves of a batch would drop the same positions. Each shard's numbers
# depend only on its rows and these seeds, so a step gives the same result
# whichever worker finishes first (a test in `tests/library/test_parallel.py`
# checks that three runs of a step agree bit for bit).
#
# ## Why it pays on a CPU
#
# NumPy's matrix products call a BLAS library (OpenBLAS in NumPy's
# wheels), which splits a large product over all cores. Everything else
# NumPy does, the `exp` of softmax, layer norm's means, dropout's masks,
# runs on one core. `threadpoolctl` sets how many threads BLAS may use;
# here a product and an element-wise operation, each with BLAS on one
# thread and on two:

# %%
def best_of(function, repeats=5):
    """The fastest of ``repeats`` runs, in seconds (the standard library's timeit)."""
    return min(timeit.repeat(function, number=1, repeat=repeats))


a = np.random.default_rng(1).standard_normal((2048, 512), dtype=np.float32)
b = np.random.default_rng(2).standard_normal((512, 1024), dtype=np.float32)
for threads in (1, 2):
    with threadpool_limits(threads, user_api="blas"):
        product = best_of(lambda: a @ b)
        elementwise = best_of(lambda: np.exp(a))
    print(f"BLAS threads {threads}: (2048, 512) @ (512, 1024) {product * 1e3:5.1f} ms,  "
          f"exp of (2048, 512) {elementwise * 1e3:4.2f} ms")

# %% [markdown]
# On a machine with two or more cores, the product is faster with two
# threads (close to twice as fast when nothing else is running) and `exp`
# does not change: NumPy's element-wise loops have no threads. In a training
# step a third to a half of the time goes to such operations (the profile is
# in `benchmarks/results/step_breakdown/`), and while they run the second
# core has nothing to do.
#
# Two workers, each with a half batch and one BLAS thread, keep both cores
# busy for *all* of the step. Before timing them, one more choice: what a
# worker is.
#
# ## Threads or processes
#
# A thread is the cheapest worker: it shares everything with the thread
# that started it, the replica's arrays included. But Python runs the
# Python code of one thread at a time: each thread must hold the
# interpreter's *global interpreter lock* (the GIL) to run Python. NumPy
# lets go of the lock inside each operation, so two threads do compute at
# once, but every operation begins and ends in Python. When a thread's
# operation ends while the other thread holds the lock, it sleeps until
# the lock is handed over, and a training step of a small model is
# thousands of short operations: thousands of chances to wait.
#
# A process has an interpreter, and a lock, of its own. On Linux,
# `DataParallel` forks a process for each replica but the first at the
# first step (`minitrans/training/optimisation/worker_processes.py`).
# The copy starts with everything the trainer had, and the two then share
# only what is put in *shared memory*: the parameters, which move there
# when the `DataParallel` is made (each layer's `params` then holds a view
# of it, so the optimiser's step, in place, reaches every worker), and the
# replica's gradients, which the worker writes and the trainer adds into
# the model's. Only the shard's token ids and its loss travel through a
# pipe. The numbers are those of
# threads, bit for bit (`tests/library/test_worker_processes.py`). PyTorch's
# `DistributedDataParallel` runs one process per GPU for the same reason.
#
# A training step of a mid-sized model (float32), with one worker, two
# worker threads and two worker processes, timed on minitrans's fast
# kernels, those `minitrans train` runs (lesson 1):

# %%
from minitrans.training.optimisation.worker_processes import processes_usable

minitrans.use("numpy", dtype="float32", kernels="fast")  # timed as training runs (lesson 1)
sizes = minitrans.ModelConfig(vocab_size=1000, d_model=128, h=4, N=2, d_ff=512, dropout=0.1,
                              max_len=40)
batch = [np.random.default_rng(3).integers(4, 1000, size=(64, 32)) for _ in range(3)]
kinds = {"one worker": (1, False), "two worker threads": (2, False)}
if processes_usable():  # Linux
    kinds["two worker processes"] = (2, True)
step_times = {}
for kind, (workers, processes) in kinds.items():
    model = minitrans.Transformer(sizes, rng=0)
    parallel = DataParallel(model, LabelSmoothedCrossEntropy(0.1, pad_id=0), workers=workers,
                            processes=processes)

    def one_step():
        model.zero_grad()
        parallel.forward_backward((batch[0], batch[1]), batch[2])

    one_step()  # the first step allocates (and forks)
    step_times[kind] = best_of(one_step)
    print(f"{kind:>21}: forward and backward of 64 x 32 tokens in "
          f"{step_times[kind] * 1e3:.0f} ms, {step_times[kind] / step_times['one worker']:.2f} "
          f"of one worker's time")

# %% [markdown]
# On two free cores, two workers take clearly less time than one. How much
# the processes save over threads depends on how short the operations are
# and on how long a sleeping thread takes to wake (longer on a virtual
# machine): `python benchmarks/text_lm.py` times the training step of
# nanoGPT's small character model with each, and its results are in
# `benchmarks/results/text_lm/`. On one core, or a busy machine, less is
# gained. For whole training steps, Adam included, `python
# benchmarks/vs_pytorch.py` times minitrans's steps beside PyTorch's with
# two workers, and with `--workers 1` with one.
#
# The Trainer uses two workers on the CPU (`TrainConfig.workers`,
# `minitrans train --workers`), whatever the number of cores: the shards,
# and so the dropout masks, depend on the number of workers, and a run
# should give the same numbers on every machine. On a GPU it uses one: a GPU
# already runs every operation on all its cores.
#
# ## Where this goes
#
# On several GPUs the replicas live on different devices, and "add the
# gradients" becomes an *all-reduce*: every device sends and receives
# pieces of the gradient until each holds the sum (PyTorch's
# `DistributedDataParallel` does it layer by layer, while the backward is
# still running, to hide the communication). The arithmetic is the
# weighted sum of this lesson.
#
# **Try it.** Give every shard the same weight: subclass the loss with a
# `num_targets` that returns 1 (as `tests/library/test_parallel.py` does) and pass
# it to `DataParallel` in `loss_and_gradients`. The comparison with the
# whole batch fails. The central differences would still agree: they check
# that the gradient belongs to the loss the workers compute, and that loss
# is now the plain mean of the halves, the wrong one. A gradient check
# proves a backward right for its forward; whether the forward computes the
# right thing needs a comparison with something independent (lesson 20).

# %% [markdown]
# ## Exercise: the gradient of a batch from its shards
#
# Write `my_combine(grads, counts)`: `grads` is a list of $S$ arrays of one
# shape, the gradient of each shard's *mean* loss, and `counts` the shards'
# numbers of real (non-padding) target tokens $n_s$. Return the gradient of
# the mean loss over the whole batch, one array of that shape, with the
# weights of the first section. A shard with no real token has a zero
# gradient and weighs nothing (its share is $0 / n$); a batch with no real
# token at all has a zero gradient, as in `DataParallel` (no division by
# zero). The checker compares with a sum worked out element by element with
# `math.fsum`, on shards of different sizes, equal shards, a shard of one
# token, empty shards, one shard, and float32.

# %%
from minitrans_course.exercises_training import check_combine_shard_gradients


def my_combine(grads, counts):
    # your code here
    return np.zeros_like(grads[0])


# %%
check_combine_shard_gradients(my_combine);

# %% [markdown]
# ## Summary
#
# * The loss of a batch is the mean over its real tokens, so it is the sum
#   of its shards' mean losses weighted by $n_s / n$, their share of the
#   real tokens, not by $1/S$; so is its gradient.
# * `DataParallel` runs each shard's backward started at $n_s / n$ and adds
#   the results: the same gradient as the whole batch in float64, and the
#   one central differences find.
# * A replica shares the model's parameter arrays, so optimiser steps reach
#   it for free, and keeps its own caches, gradients and dropout seeds, so
#   two workers never write to the same array.
# * NumPy's matrix products use every core but its element-wise work uses
#   one; two workers with one BLAS thread each keep two cores busy for the
#   whole step. The Trainer uses two on any CPU, so that a run gives
#   the same numbers on every machine, and one on a GPU.
# * Threads take turns with Python's global interpreter lock between
#   operations; a process has its own. On Linux the second worker is a
#   forked process that shares the parameters and its gradients with the
#   trainer through shared memory.
# * On many GPUs, adding the gradients becomes an all-reduce; the weighted
#   sum is the same.
#
# ## Next
#
# This is the end of the course. From here: train a translator on your own
# sentence pairs with `minitrans train translate --data pairs.tsv`, run
# `minitrans train lm` for the decoder-only model that learns two-digit
# sums, re-derive one backward of your choice and check it with
# `minitrans gradcheck`, or carry a model to PyTorch (lesson 20) and train
# it on several GPUs.

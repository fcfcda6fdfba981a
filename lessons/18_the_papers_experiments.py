# %% [markdown]
# # Lesson 18: The paper's experiments, in miniature
#
# Sections 5 and 6 of *Attention Is All You Need* say how the Transformer was
# trained and what it reached, and Table 3 says which of its choices matter:
# it changes one setting of the base model at a time (the number of heads,
# the key width $d_k$, the sizes, dropout, label smoothing, the positional
# encoding) and reports what each change does. Such a study, one change at a
# time against a fixed baseline, is an **ablation**.
#
# In this lesson:
#
# 1. the paper's training setup and results, with the arithmetic behind
#    them checked (steps × seconds per step, GPU time × peak speed = the
#    training cost of Table 2);
# 2. minitrans's toy setup beside it, and what it measures instead;
# 3. the paper's Table 3, then the same rows trained at toy scale by
#    `benchmarks/ablations.py` (stored results: three seeds per row), in the
#    paper's form, and what carries over and what does not;
# 4. one comparison rerun live (post-norm against pre-norm at four layers),
#    and checkpoint averaging, the paper's last step before decoding;
# 5. an exercise: perplexity, the PPL column of Table 3.

# %%
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one BLAS thread; set before NumPy loads

import json
import pathlib
import sys
import time

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown, display

import minitrans

ROOT = pathlib.Path.cwd().resolve().parent  # the lessons run in lessons/
sys.path.insert(0, str(ROOT / "benchmarks"))
import ablations  # noqa: E402  benchmarks/ablations.py: the script whose results we read

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)

results_file = ROOT / "benchmarks" / "results" / "ablations.json"
stored = json.loads(results_file.read_text(encoding="utf-8"))
rows = {row["id"]: row for row in stored["rows"]}
print(stored["machine"])

# %% [markdown]
# ## 1. How the paper trained (§5)
#
# | | the paper |
# | --- | --- |
# | data, English-German | WMT 2014, about 4.5 million sentence pairs; byte-pair encoding, one vocabulary of about 37,000 tokens shared by source and target |
# | data, English-French | WMT 2014, 36 million sentences; a vocabulary of 32,000 word pieces |
# | batches | sentence pairs grouped by length, about 25,000 source and 25,000 target tokens per batch |
# | hardware | one machine with 8 NVIDIA P100 GPUs |
# | base model | 100,000 steps of about 0.4 s: 12 hours |
# | big model | 300,000 steps of about 1.0 s: 3.5 days |
# | optimiser | Adam, $\beta_1 = 0.9$, $\beta_2 = 0.98$, $\epsilon = 10^{-9}$; warm-up over 4,000 steps, then $1/\sqrt{\text{step}}$ (lesson 13) |
# | regularisation | residual dropout $P_\text{drop} = 0.1$ (big model: 0.3, but 0.1 for English-French); label smoothing $\epsilon_{ls} = 0.1$ |
# | decoding (§6.1) | beam search, beam 4, length penalty $\alpha = 0.6$; at most input length + 50 tokens |
# | checkpoints (§6.1) | base: the average of the last 5 checkpoints, written every 10 minutes; big: of the last 20 |
#
# The schedule's numbers roughly agree with each other: steps times seconds
# per step give about the hours and days the paper states (its 0.4 s and
# 1.0 s are "about").

# %%
for name, steps, seconds in (("base", 100_000, 0.4), ("big", 300_000, 1.0)):
    print(f"{name:4}: {steps:,} steps x {seconds} s = {steps * seconds / 3600:5.1f} hours "
          f"= {steps * seconds / 86400:.2f} days")
print(f"one checkpoint every 10 minutes of 0.4 s steps: every {10 * 60 / 0.4:,.0f} steps; "
      f"the last 5 span the last {5 * 10 * 60 / 0.4:,.0f} of 100,000")

# %% [markdown]
# ## The results (§6.1, Table 2)
#
# | model | BLEU EN-DE | BLEU EN-FR | training cost (FLOPs), one figure for both pairs |
# | --- | --- | --- | --- |
# | Transformer (base) | 27.3 | 38.1 | $3.3 \cdot 10^{18}$ |
# | Transformer (big) | 28.4 | 41.8 | $2.3 \cdot 10^{19}$ |
#
# BLEU on newstest2014, beam search and checkpoint averaging included. The
# big model's 28.4 on English-German was more than 2 BLEU above the best
# earlier result, ensembles included. Table 2 has a training-cost column for
# each language pair, but for the Transformer it prints one figure across
# both: one cost per model, not one per pair (most earlier systems in the
# table have one per pair).
#
# One figure disagrees within the paper itself: for the big model on
# English-French, in the arXiv versions, Table 2 and the abstract give 41.8
# BLEU, while the text of §6.1 still says 41.0 (the figure of the NeurIPS
# 2017 version, whose abstract says 41.0 too). The table above follows
# Table 2.
#
# The training cost is not counted operation by operation: Table 2's note
# says it is training time × number of GPUs × an estimate of each GPU's
# sustained single-precision speed, 9.5 TFLOPS for a P100. Both figures
# follow:

# %%
P100 = 9.5e12  # FLOP/s, the paper's estimate for one P100
for name, hours in (("base", 12), ("big", 3.5 * 24)):
    print(f"{name:4}: {hours:4.0f} h x 8 GPUs x 9.5 TFLOPS = {hours * 3600 * 8 * P100:.1e} FLOPs")

# A cross-check from the model's size: a step costs about 6 FLOPs per parameter and token
# (2 forward, 4 backward: lesson 11), attention's T^2 terms left out.
params_base, tokens_per_step = 65e6, 25_000 + 25_000
estimate = 6 * params_base * tokens_per_step * 100_000
print(f"6 x 65M parameters x 50,000 tokens x 100,000 steps = {estimate:.1e} FLOPs, "
      f"{estimate / (12 * 3600 * 8 * P100):.0%} of the peak-speed figure")

# %% [markdown]
# The rule of thumb is rough: it leaves out attention's $T^2$ work, and it
# counts every source token as if it went through the whole model, when it
# only goes through the encoder. It says the same order of magnitude: the
# GPUs would have had to sustain around 60% of their peak speed for the 12
# hours. Table 2's figures assume the peak itself, so they are upper bounds,
# which is all the paper claims for them ("an estimate").
#
# ## What minitrans does instead
#
# No CPU trains on WMT in a lesson. `benchmarks/ablations.py` trains on the
# toy translation task of lesson 14 (toy English into a made-up language
# that puts the verb last and adjectives after their nouns), word by word:

# %%
setup = stored["setup"]
task = ablations.make_trainer({}, 0, 1, {}).task
batch = task.make_batch(task.train[:setup["training"]["batch_size"]])
target_tokens = int((batch.tgt_out != 0).sum())
toy = {
    "data": f"{len(task.train):,} training pairs, {len(task.valid):,} held out; "
            f"one vocabulary of {len(task.vocab)} words",
    "batches": f"{setup['training']['batch_size']} pairs, about {target_tokens} target tokens",
    "model": ", ".join(f"{key}={value}" for key, value in setup["base"].items()),
    "schedule": f"{setup['training']['steps']} steps, warm-up {setup['training']['warmup']}, "
                f"{setup['training']['lr_factor']} x the paper's rate",
    "hardware": "one CPU core (one worker thread)",
    "decoding": "greedy, no checkpoint averaging",
    "measured on": f"the first {setup['eval_pairs']} held-out pairs, "
                   f"{setup['seeds']} seeds per row",
}
for key, value in toy.items():
    print(f"{key:12} {value}")
params_toy = rows["base"]["parameters"]
toy_flops = 6 * params_toy * 2 * target_tokens * setup["training"]["steps"]
print(f"\ntraining cost, 6 x params x tokens: {toy_flops:.1e} FLOPs, "
      f"{estimate / toy_flops:.1e} times less than the paper's base model")

# %% [markdown]
# The toy run is about ten million times cheaper. It keeps what defines the
# experiment: the same model, optimiser, schedule shape, dropout and label
# smoothing, one change at a time, the same measures. Held-out perplexity
# (PPL) is $\exp$ of the mean cross-entropy per target token without label
# smoothing; the paper's is per word piece of newstest2013, ours per word of
# the toy language, so only the changes between rows can be compared, never
# the values. Beside BLEU (on an easy task, near 100) we report the share of
# held-out sentences translated exactly right, which still moves where BLEU
# no longer does.
#
# ## 2. Table 3 of the paper
#
# Every row changes the base model as shown (an empty cell: the base's
# value), trains it for 100,000 steps and measures it on newstest2013
# (English-German), without checkpoint averaging. In the paper's words: PPL
# per word piece, BLEU, parameters in millions.
#
# | | N | d_model | d_ff | h | d_k | d_v | P_drop | ε_ls | PPL (dev) | BLEU (dev) | params ×10⁶ |
# | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
# | base | 6 | 512 | 2048 | 8 | 64 | 64 | 0.1 | 0.1 | 4.92 | 25.8 | 65 |
# | (A) | | | | 1 | 512 | 512 | | | 5.29 | 24.9 | |
# | | | | | 4 | 128 | 128 | | | 5.00 | 25.5 | |
# | | | | | 16 | 32 | 32 | | | 4.91 | 25.8 | |
# | | | | | 32 | 16 | 16 | | | 5.01 | 25.4 | |
# | (B) | | | | | 16 | | | | 5.16 | 25.1 | 58 |
# | | | | | | 32 | | | | 5.01 | 25.4 | 60 |
# | (C) | 2 | | | | | | | | 6.11 | 23.7 | 36 |
# | | 4 | | | | | | | | 5.19 | 25.3 | 50 |
# | | 8 | | | | | | | | 4.88 | 25.5 | 80 |
# | | | 256 | | | 32 | 32 | | | 5.75 | 24.5 | 28 |
# | | | 1024 | | | 128 | 128 | | | 4.66 | 26.0 | 168 |
# | | | | 1024 | | | | | | 5.12 | 25.4 | 53 |
# | | | | 4096 | | | | | | 4.75 | 26.2 | 90 |
# | (D) | | | | | | | 0.0 | | 5.77 | 24.6 | |
# | | | | | | | | 0.2 | | 4.95 | 25.5 | |
# | | | | | | | | | 0.0 | 4.67 | 25.3 | |
# | | | | | | | | | 0.2 | 5.47 | 25.7 | |
# | (E) | learned positional embeddings instead of sinusoids | | | | | | | | 4.92 | 25.7 | |
# | big | 6 | 1024 | 4096 | 16 | | | 0.3 | | 4.33 | 26.4 | 213 |
#
# (The big model trained for 300,000 steps.) In (A), and in (C)'s two
# widths, $d_v = d_k$. In (B) only $d_k$ narrows: $d_v$ stays the base's 64,
# so only $W^Q$ and $W^K$ shrink, and $W^V$ and $W^O$ keep their size. The
# parameter counts say so: narrowing $W^Q$ and $W^K$ from 512 to $8 \times 16
# = 128$ columns in all 18 attention layers (6 in the encoder, 12 in the
# decoder) removes $18 \times 2 \times 512 \times 384 \approx 7.1$ million
# of the base's 65 million, leaving the 58 of the table; narrowing $W^V$ and
# $W^O$ as well would have left 51.
# What the paper reads from it (§6.2):
#
# * **(A)** with the computation held constant ($h \cdot d_k = d_\text{model}$),
#   a single head is 0.9 BLEU worse than the best setting, and quality drops
#   with too many heads as well;
# * **(B)** a smaller key size $d_k$ hurts: judging compatibility is not easy,
#   and a more elaborate function than the dot product might help;
# * **(C)** bigger models are better;
# * **(D)** dropout is very helpful against over-fitting; and label
#   smoothing, as §5.4 says, hurts perplexity (4.67 without it against 4.92)
#   but helps BLEU;
# * **(E)** learned positional embeddings give nearly identical results.
#
# ## 3. The same rows at toy scale
#
# `benchmarks/ablations.py` trains the toy base model and one variant per
# row for 100 steps, with seeds 0, 1 and 2 (the seed fixes the data split,
# the initial weights, the batch order and the dropout masks), and stores
# every run. The table is in the paper's form; each cell is the mean of the
# three seeds ± half their range. Rows F1 and F2 are not in the paper:
# pre-norm (lesson 9), alone and with the four layers of C2. Rows B1 and B2
# are not quite the paper's (B): minitrans has one head width for keys and
# values ($d_v = d_k$; `ModelConfig` has no separate $d_v$), so they narrow
# all four projections, $W^V$ and $W^O$ too, where the paper narrows only
# $W^Q$ and $W^K$.

# %%
display(Markdown(ablations.markdown_table(stored["rows"])))

# %% [markdown]
# Three seeds are few, so before reading a difference, look at the spread.
# The figure shows every run's perplexity (dots) and each row's mean (a
# dash). A perfect model's perplexity is 1, so we plot what is left above
# it, PPL − 1, on a log scale, where the small differences show; the grey
# band is the base model's range over its seeds.

# %%
order = [row["id"] for row in stored["rows"]]
fig, ax = plt.subplots(figsize=(9, 3.6))
base_excess = [run["ppl"] - 1 for run in rows["base"]["runs"]]
ax.axhspan(min(base_excess), max(base_excess), color="0.85", label="base: range over seeds")
for x, row_id in enumerate(order):
    values = [run["ppl"] - 1 for run in rows[row_id]["runs"]]
    ax.plot([x] * len(values), values, "o", color="tab:blue", markersize=4)
    ax.plot(x, rows[row_id]["mean"]["ppl"] - 1, "_", color="black", markersize=14)
ax.set_xticks(range(len(order)), order)
ax.set_yscale("log")
ax.set_ylabel("held-out perplexity - 1")
ax.set_title("Table 3 at toy scale: every seed's perplexity, 100 steps each")
ax.legend(loc="upper left", fontsize=8)
plt.show()

# %% [markdown]
# A row is told apart from the base below when the difference of the means
# is larger than the two half-ranges added; otherwise we call it noise.
# Beside each row, the matching row of the paper (a change in the same
# direction: half or double the heads, the width, the layers) and its
# change of BLEU.

# %%
PAPER = {  # our row: (the paper's matching row, its BLEU minus the base's 25.8)
    "A1": ("h=1", 24.9), "A2": ("h=4", 25.5), "A3": ("h=16", 25.8), "A4": ("h=32", 25.4),
    "B1": ("d_k=32", 25.4), "B2": ("d_k=16", 25.1), "C1": ("N=4", 25.3), "C2": ("N=8", 25.5),
    "C3": ("d_model=256", 24.5), "C4": ("d_model=1024", 26.0), "C5": ("d_ff=1024", 25.4),
    "C6": ("d_ff=4096", 26.2), "D1": ("P_drop=0.0", 24.6), "D2": ("P_drop=0.2", 25.5),
    "D3": ("ε_ls=0.0", 25.3), "D4": ("ε_ls=0.2", 25.7), "E1": ("learned", 25.7),
}


def verdict(row, key, lower_is_better=False):
    """'better', 'worse' or 'noise': the row's mean against the base's."""
    base = rows["base"]
    difference = row["mean"][key] - base["mean"][key]
    if abs(difference) <= row["spread"][key] + base["spread"][key]:
        return "noise"
    return "better" if (difference < 0) == lower_is_better else "worse"


print(f"{'row':4} {'change':26} {'Δ PPL':>7} {'':6} {'Δ exact':>8} {'':6}  paper: row, Δ BLEU")
for row in stored["rows"][1:]:
    change = ", ".join(f"{key}={value}" for key, value in row["changes"].items())
    d_ppl = row["mean"]["ppl"] - rows["base"]["mean"]["ppl"]
    d_exact = row["mean"]["exact_match"] - rows["base"]["mean"]["exact_match"]
    paper = PAPER.get(row["id"])
    paper_text = f"{paper[0]:12} {paper[1] - 25.8:+.1f}" if paper else "(not in Table 3)"
    print(f"{row['id']:4} {change:26} {d_ppl:+7.3f} {verdict(row, 'ppl', True):6} "
          f"{d_exact:+8.1%} {verdict(row, 'exact_match'):6}  {paper_text}")

# %% [markdown]
# ### What carries over, and what does not
#
# Read with the spreads in mind (the stored results; the verdicts above are
# computed from them):
#
# * **(A) heads: carries over, in part.** One head is worse than four: its
#   exact match is 3.7 points lower (95.3% against 99.0%, beyond the seeds'
#   spread), as the paper's single head is its worst row; its perplexity is
#   higher too, by 0.012, within the spread. Sixteen heads of width
#   $d_k = 4$ are about as bad on average, the paper's "too many heads", but
#   their seeds spread too widely to tell. Two heads and eight cannot be
#   told from four.
# * **(B) a smaller head width hurts**, at both widths, but this is a
#   different ablation from the paper's. Ours narrows the values with the
#   keys ($d_v = d_k$): $W^V$ and $W^O$ shrink with $W^Q$ and $W^K$, which
#   is why B1 and B2 lose a fifth and nearly three tenths of the base's
#   parameters, where the paper's (B) keeps $d_v = 64$ and loses at most
#   about a tenth. So our rows cannot tell a worse compatibility function
#   (the paper's reading) from narrower values. $d_k = 8$ has a higher
#   perplexity (by 0.019, beyond the spread) and 3 points less exact match
#   (within it); $d_k = 4$ has a perplexity higher by 0.08 and 20 points
#   less exact match on average, though its seeds range from 53% to 95%,
#   too widely for either difference to count.
# * **(C) "bigger is better": does not carry over**, for a reason that is
#   not the model's: every row trains for the same 100 steps. One layer
#   has a slightly lower perplexity than two (by 0.010, beyond the spread)
#   and as good an exact match: in 100 steps the shallower model gets
#   further. The narrow model ($d_\text{model} = 32$) has not learnt this
#   easy task yet; the wide one (128) cannot be told from the base; four
#   post-norm layers (C2) fail outright. Both feed-forward widths are worse
#   than the base on average in the table above. The narrow one (C5,
#   $d_{ff} = 128$) is worse on every measure (perplexity 1.089 against
#   1.073, exact match 96.0% against 99.0%), as the paper's narrow $d_{ff}$
#   is, but its seeds spread so widely (± 5.7 points of exact match) that
#   by our rule the difference stays within the noise. The wide one (C6,
#   512) is worse on average too, also within the noise, where the paper's
#   (4096) has Table 3's best BLEU after the big model. The paper trained
#   every row for 100,000 steps, long enough for size to pay.
# * **(D) dropout: does not carry over.** 100 steps of 64 pairs see 6,400 of
#   the 20,000 training pairs, none twice: there is nothing to over-fit, and
#   dropout can only slow learning down (0.3: it has not learnt the task
#   yet). Without dropout the exact match is a little higher (99.9%
#   against 99.0%, just beyond the spread), while the perplexity is a
#   little higher too. Lesson 17 shows dropout working where a model does
#   over-fit.
# * **(D) label smoothing: carries over.** Without it the perplexity is
#   lower (by 0.048) and the exact match 3 points lower (95.8% against
#   99.0%), both beyond the spread; with 0.3 the perplexity is much higher.
#   That is §5.4's sentence in full: label smoothing "hurts perplexity, as
#   the model learns to be more unsure, but improves accuracy and BLEU
#   score".
# * **(E) learned positions: carries over**: as close to sinusoids as three
#   seeds can tell (the paper: 25.7 against 25.8 BLEU), for $64 \times 64$
#   more parameters per embedding.
# * **(F) pre-norm**, not in Table 3: with two layers it cannot be told
#   from post-norm; with four (F2) it trains where post-norm (C2) fails.
#   This is one reason GPT-2 and most later models put the layer norm
#   first.
#
# How fragile the small differences are: the same script with NumPy's
# matrix products on two threads instead of one (which changes only the
# order of their sums, and so the last bits) moves several rows by a few
# points of exact match: rounding is a source of noise too, and three seeds
# do not average it away. Drawing the dropout masks from another random
# stream (the same seeds) does as much: with other masks, one head has lost
# 11 points of exact match against four (here 4), and one layer could not
# be told from two. Read the verdicts on single rows as hints, and the
# large effects (C2, C3, D2, label smoothing's perplexity) as findings.
#
# ## 4. One comparison, live: four layers, post-norm against pre-norm
#
# The script's own functions (`ablations.make_trainer`, `ablations.measure`)
# rerun rows C2 and F2 with seed 0, as the stored runs were made:
# on minitrans's fast kernels, the script's default, whose dropout masks
# differ from the reference versions' (lesson 1), and which train faster.
# Along the way we keep a copy of the parameters every 10 steps, for
# checkpoint averaging below.

# %%
def train_live(changes, seed=0, keep_every=10, keep_last=5):
    """Train one row's model as ablations.py does; returns the trainer and
    the last ``keep_last`` snapshots of the parameters, ``keep_every`` steps apart."""
    trainer = ablations.make_trainer(changes, seed, setup["training"]["steps"], tasks)
    snapshots = []
    for _ in range(setup["training"]["steps"]):
        trainer.train_step()
        if trainer.step % keep_every == 0:
            parameters = trainer.model.named_parameters()
            snapshots.append({name: np.array(value) for name, value, _ in parameters})
    return trainer, snapshots[-keep_last:]


tasks = {0: task}  # the task of seed 0, built above
live = {}
start = time.perf_counter()
with minitrans.using(kernels="fast"):  # as the stored runs trained (lesson 1)
    for row_id in ("C2", "F2"):
        trainer, snapshots = train_live(rows[row_id]["changes"])
        measures = ablations.measure(trainer.model, trainer.task, setup["eval_pairs"])
        live[row_id] = (trainer, snapshots, measures)
print(f"2 runs of {setup['training']['steps']} steps and their measures: "
      f"{time.perf_counter() - start:.1f} s\n")
for row_id, (trainer, _, measures) in live.items():
    stored_run = rows[row_id]["runs"][0]  # seed 0
    print(f"{row_id} {rows[row_id]['changes']}: live PPL {measures['ppl']:.4f}, exact match "
          f"{measures['exact_match']:.1%} | stored PPL {stored_run['ppl']:.4f}, "
          f"exact match {stored_run['exact_match']:.1%}")

# %% [markdown]
# Every random choice comes from the seed, and the script and this lesson
# both run NumPy's products on one thread (lesson 14), so a live run repeats
# a stored one to the last digit when it runs the same minitrans. Where the
# library's arithmetic differs in its last bits (an optimiser step that adds
# its terms in another order, say), 100 steps carry the difference into the
# third digit of a perplexity, as the lines above may show, and the verdict
# stays: post-norm fails at four layers, pre-norm trains. The training
# losses show where post-norm goes wrong:

# %%
fig, ax = plt.subplots(figsize=(6, 3.5))
for row_id, (trainer, _, _) in live.items():
    label = f"{row_id}: N=4, {'pre' if trainer.model.config.pre_norm else 'post'}-norm"
    ax.plot(trainer.history["step"], trainer.history["loss"], label=label)
ax.set_yscale("log")
ax.set_xlabel("training step")
ax.set_ylabel("training loss (label smoothing 0.1)")
ax.legend()
plt.show()

# %% [markdown]
# Both start alike; after about ten steps the pre-norm stack's loss falls
# much faster, while the post-norm stack's creeps down and is still above 2
# at step 100. In a pre-norm stack the residual path runs from the loss to
# the embeddings without passing through any layer norm (lesson 9); in a
# post-norm stack every gradient passes through the norms of all the layers
# above. Xiong et al. (2020, "On Layer Normalization in the Transformer
# Architecture") show that post-norm's gradients at initialisation are
# largest near the output, which is why it needs a careful warm-up, and that
# pre-norm trains without one. Our 50 warm-up steps are few for four
# post-norm layers; the paper used 4,000.
#
# ## Checkpoint averaging
#
# §6.1: the base models are "a single model obtained by averaging the last 5
# checkpoints", written 10 minutes apart, about 1,500 steps. The average of
# parameters that sit close together on the way down often lies nearer the
# bottom of the valley than any one of them, and it is free: no training,
# one mean per parameter. Here the snapshots are 10 steps apart (steps 60 to
# 100), averaged for the pre-norm run:

# %%
trainer, snapshots, last = live["F2"]
for name, value, _ in trainer.model.named_parameters():
    value[...] = np.mean([snapshot[name] for snapshot in snapshots], axis=0)  # in place
averaged = ablations.measure(trainer.model, trainer.task, setup["eval_pairs"])
for label, measures in (("last checkpoint (step 100)", last),
                        ("average of steps 60-100", averaged)):
    print(f"{label:27}: PPL {measures['ppl']:.4f}, BLEU {measures['bleu']:.1f}, "
          f"exact match {measures['exact_match']:.1%}")

# %% [markdown]
# Here the average of the five snapshots is no clear gain: its perplexity is
# a little worse than the last snapshot's, its exact match within a
# sentence or two of it (the lines above). That is one run and one seed, an
# example rather than a proof, and it shows the catch: on a run whose loss
# is still falling, as this one's is until about step 85 (the curve above),
# the older snapshots (steps 60 to 80) are worse and drag the average back.
# Near the end of a long run, where the parameters wander around a minimum,
# averaging is reliably a gain, for the price of one mean per parameter, and
# that is where the paper used it.
#
# minitrans's trainer does it step by step: with `--average-decay 0.999`
# (`minitrans/training/optimisation/averaging.py`) it keeps an exponential moving average
# of the weights, whose window grows with the run (about its last tenth, at
# most 1,000 steps), so the early, worse weights never drag it back for
# long. Evaluations, `best.npz` and the checkpoint's parameters are the
# average; training goes on from the weights themselves. On the numbers
# task, evaluated every 125 steps, the weights' own held-out exact match
# swung between 94.8% and 98.9% from step 375 to step 1250 and passed 99%
# at step 1375; their average passed it at step 625.
#
# ## 5. Exercise: perplexity
#
# Write `my_perplexity(logits, targets, pad_id)`: logits $(B, T, V)$,
# targets $(B, T)$ token ids with `pad_id` at the padding. Return
# $\exp$ of the mean of $-\log \text{softmax}(\text{logits}_{b,t})[\text{target}_{b,t}]$
# over the positions whose target is not padding, all sentences together
# (a long sentence weighs more than a short one, as in the loss the model
# was trained on). The checker tries padded batches, a `pad_id` other than 0,
# logits near 1000 and float32. The skeleton returns 0, so the checker says
# "not yet".

# %%
from minitrans_course.exercises_experiments import check_perplexity


def my_perplexity(logits, targets, pad_id):
    # your code here: a stable log-softmax, the target's log-probability,
    # the mean over real tokens, exp
    return 0.0


check_perplexity(my_perplexity);

# %% [markdown]
# ## Summary
#
# * The paper trained the base model for 100,000 steps of about 25,000 +
#   25,000 tokens on 8 P100 GPUs (12 hours); Table 2's training cost is GPU
#   time × 9.5 TFLOPS: $3.3 \cdot 10^{18}$ FLOPs for the base model,
#   $2.3 \cdot 10^{19}$ for the big one, which reached 28.4 BLEU on
#   English-German and 41.8 on English-French.
# * Table 3 is an ablation: one change at a time against the base model.
#   `benchmarks/ablations.py` runs its rows on the toy translation task,
#   three seeds each, in two to four minutes; read a difference only where it
#   exceeds the seeds' spread.
# * What carries over: one head is worse than four (too many heads about as
#   bad, within the noise), a smaller $d_k$ hurts, label smoothing raises
#   perplexity and improves exact match, learned positions match sinusoids.
# * What does not: bigger is not better, and dropout does not help, in 100
#   steps that see each example once; four post-norm layers fail where
#   pre-norm trains.
# * Checkpoint averaging is a mean of parameter snapshots (here, on a run
#   still learning, a little worse than the last snapshot), and perplexity
#   is $\exp$ of the token-weighted mean cross-entropy.
#
# ## Next
#
# [Lesson 19](19_to_gpt2.ipynb): from this encoder-decoder to GPT-2.

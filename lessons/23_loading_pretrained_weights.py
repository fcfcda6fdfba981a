# %% [markdown]
# # Lesson 23: Loading pretrained weights
#
# Lessons 19 and 22 built GPT-2's and Llama's layers with minitrans, at
# their real shapes, with random weights. Their trained weights are
# published, as files of named tensors, and every one of those tensors has
# a place in these layers. This lesson reads such files into minitrans:
# what is in a model folder, which tensor goes where, what has to change on
# the way, and how to know that the loaded model is the one that was
# trained.
#
# In this lesson:
#
# 1. a model folder as Hugging Face's Hub stores one: `config.json`,
#    `model.safetensors` (its header read by hand), the tokenizer's files;
# 2. GPT-2: a tiny GPT-2 with random weights, saved by `transformers`, read
#    by `minitrans.pretrained.load_pretrained`: the names of its tensors
#    against minitrans's, the fused `c_attn` split, the key bias dropped,
#    no embedding scale, no output bias and no padding token, its logits
#    against `transformers`', and GPT-2's tokenizer;
# 3. Llama: the same for a tiny Llama, every projection transposed, and
#    the two ways of pairing rotary coordinates (Meta's and Hugging
#    Face's) with the permutation between them;
# 4. one step of fine-tuning, its gradient against PyTorch's autograd, and
#    the way back (`save_pretrained`);
# 5. what the loader refuses, and what a real model needs;
# 6. an exercise: Meta's rotary layout turned into Hugging Face's.
#
# Nothing is downloaded: `transformers`, Hugging Face's library, builds the
# tiny models and saves them as the real ones are saved. Sections 1 to 5
# need `pip install ".[torch]"` (PyTorch and `transformers`); without them
# their cells say so and skip their work. The exercise needs only NumPy.

# %%
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one BLAS thread; set before NumPy loads

import importlib
import importlib.util
import json
import pathlib
import struct
import tempfile
import warnings

import numpy as np

import minitrans

minitrans.use(kernels="reference")  # the kernels that read as the equations (lesson 1)

HAVE_HUB = all(importlib.util.find_spec(name) is not None
               for name in ("torch", "transformers", "safetensors"))
if HAVE_HUB:
    torch = importlib.import_module("torch")
    with warnings.catch_warnings():  # tqdm warns that Jupyter's widgets are missing
        warnings.simplefilter("ignore")
        transformers = importlib.import_module("transformers")
    transformers.utils.logging.disable_progress_bar()  # no progress bar while saving
    from minitrans.pretrained import GPT2, LLAMA, PretrainedError, load_pretrained
    from minitrans.pretrained import save_pretrained
    from minitrans.pretrained.tensor_names import links
    print(f"transformers {transformers.__version__}, PyTorch {torch.__version__}")
else:
    print("PyTorch or transformers is not installed (pip install \".[torch]\"): "
          "sections 1 to 5 skip their work")
root = pathlib.Path(tempfile.mkdtemp(prefix="minitrans-lesson23-"))  # the folders go here

# %% [markdown]
# ## 1. A model folder
#
# A model on Hugging Face's Hub is a folder. `config.json` holds the
# sizes, under the library's names (GPT-2's `n_embd`, `n_head`, `n_layer`;
# Llama's `hidden_size`, `num_attention_heads`, ...); `model.safetensors`
# holds every tensor by name; the tokenizer's files say how text becomes
# ids. A large model splits its tensors over several files, listed in
# `model.safetensors.index.json`.
#
# First a tokenizer of our own, in GPT-2's format: `vocab.json` maps every
# token to its id and `merges.txt` lists the merges in the order they were
# learned (lesson 3's byte-pair encoding). GPT-2's byte-level BPE starts
# from the 256 bytes, each written as a printable character (a space is
# `Ġ`), then GPT-2 has 50,000 merges and one special token,
# `<|endoftext|>`. Ours has five merges:

# %%
from minitrans.data.byte_level_bpe import BYTE_TO_CHAR

MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("e", "n"), ("Ġ", "a")]
tokens = ([BYTE_TO_CHAR[byte] for byte in range(256)] + [a + b for a, b in MERGES]
          + ["<|endoftext|>"])
vocab = {token: i for i, token in enumerate(tokens)}
gpt2_folder = root / "tiny-gpt2"
gpt2_folder.mkdir()
(gpt2_folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
(gpt2_folder / "merges.txt").write_text(
    "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in MERGES), encoding="utf-8")
print(f"{len(vocab)} tokens: bytes 0-255, merges {tokens[256:261]}, "
      f"{tokens[-1]} = {len(vocab) - 1}")

# %% [markdown]
# Then a GPT-2 of that vocabulary, with $d_\text{model} = 32$, 4 heads and
# 2 layers, built by `transformers` with random weights and saved as
# OpenAI's GPT-2 is on the Hub (each weight moved off its initial value, so
# that no LayerNorm gain is still exactly 1):

# %%
if HAVE_HUB:
    torch.manual_seed(0)
    hub_gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=len(vocab), n_embd=32, n_head=4, n_layer=2, n_positions=64,
        bos_token_id=len(vocab) - 1, eos_token_id=len(vocab) - 1,
        initializer_range=0.2)).eval()
    with torch.no_grad():
        for parameter in hub_gpt2.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    hub_gpt2.save_pretrained(gpt2_folder, safe_serialization=True)
    for path in sorted(gpt2_folder.iterdir()):
        print(f"    {path.name:<24}{path.stat().st_size:>8,} bytes")

# %% [markdown]
# A `.safetensors` file is simple enough to read by hand: 8 bytes giving
# the length $n$ of a header (an unsigned little-endian integer), $n$ bytes
# of JSON, then the raw numbers of every tensor, one after the other. The
# header gives each tensor its dtype, its shape and the byte range of its
# numbers after the header. Nothing in the file is code, which is why the
# Hub prefers it to PyTorch's pickled `.bin` files: reading it cannot run
# anything.

# %%
if HAVE_HUB:
    with open(gpt2_folder / "model.safetensors", "rb") as file:
        (header_length,) = struct.unpack("<Q", file.read(8))
        header = json.loads(file.read(header_length))
    print(f"header: {header_length:,} bytes of JSON, {len(header) - 1} tensors, "
          f"metadata {header['__metadata__']}")
    for name in ("transformer.wte.weight", "transformer.h.0.attn.c_attn.weight",
                 "transformer.h.0.attn.c_attn.bias", "transformer.ln_f.weight"):
        print(f"    {name:<36}{header[name]}")

# %% [markdown]
# `load_pretrained(folder)` does that for every file of the folder, and
# checks each header against the file's size and against `config.json`,
# and the memory the model will take, before a byte of a tensor is read.
# Then it builds a `ModelConfig` from `config.json`, copies each tensor into
# its parameter and reads the tokenizer if the folder has one. It returns
# the model, the tokenizer and what it found:

# %%
if HAVE_HUB:
    with minitrans.using(dtype="float32"):
        gpt2, gpt2_tokenizer, gpt2_info = load_pretrained(gpt2_folder)
    print(gpt2_info.architecture, "->", type(gpt2).__name__, "and",
          type(gpt2_tokenizer).__name__)
    print({key: getattr(gpt2.config, key) for key in (
        "d_model", "h", "N", "d_ff", "max_len", "positions", "activation", "norm", "pre_norm",
        "tie_embeddings", "scale_embedding", "output_bias", "pad_id")})

# %% [markdown]
# ## 2. GPT-2's checkpoint
#
# Lesson 19 listed what GPT-2 changed from the paper; here each change is a
# setting of the `ModelConfig` the loader builds, or a step of the copy.
# The loader's table (`minitrans.pretrained.tensor_names`), for layer 0 and
# the rest:

# %%
if HAVE_HUB:
    for link in links(gpt2.config, GPT2):
        name = link.file_name(GPT2)
        if ".h.1." not in name:
            ours = ", ".join(part or "(dropped)" for part in link.ours)
            print(f"{name:<36}{str(list(link.shape)):<10}-> {ours}")

# %% [markdown]
# What changes on the way, and why:
#
# * **The layout.** GPT-2's code computes its projections with a `Conv1D`
#   (a name from its TensorFlow origins) whose weight is
#   $(d_\text{in}, d_\text{out})$ and which computes $xW + b$: the layout
#   of minitrans's `Linear`. These weights are copied as they are, where
#   PyTorch's `nn.Linear`, which stores $(d_\text{out}, d_\text{in})$,
#   would need a transpose (lesson 20, and Llama below).
# * **The fused `c_attn`.** Its $3 d_\text{model}$ columns are $[W_Q \mid
#   W_K \mid W_V]$, heads in order inside each (lesson 7 builds the same
#   fused product): the loader splits them, and the bias the same way.
# * **The key bias.** The middle third of `c_attn.bias` has no place in
#   minitrans, and is dropped (`gpt2_info.dropped` names the tensors it
#   came from). Lesson 7 showed why nothing is lost: a key bias $b_K$ adds
#   $q \cdot b_K$ to every score of query $q$, the same for every key, and
#   softmax ignores a constant added to a row. Checked below.
# * **No embedding scale.** minitrans's `Embedding` multiplies by
#   $\sqrt{d_\text{model}}$ by default (paper §3.4); GPT-2 does not, and the
#   loader sets `scale_embedding=False`.
# * **No output bias.** GPT-2's output layer is the transposed embedding
#   and nothing more: `output_bias=False`.
# * **No padding token.** minitrans masks every key whose id is `pad_id`
#   (0 by default), but in GPT-2's vocabulary id 0 is the token `!`, and
#   GPT-2 has no padding token at all (its `<|endoftext|>`, id 50,256,
#   marks the ends of documents). The loader sets `pad_id=None`: no id is
#   masked, only the future.
# * **What already matches:** the GELU in tanh form (lesson 17), the
#   LayerNorm's $\epsilon = 10^{-5}$, the scale $1/\sqrt{d_k}$, the causal
#   mask, pre-norm with a final LayerNorm, learned positions.
#
# The same ids through `transformers`' model and through minitrans's, in
# float32; then once more through `transformers`' with every key bias set
# to zero:

# %%
if HAVE_HUB:
    ids = np.random.default_rng(5).integers(0, len(vocab), size=(2, 12))
    with torch.no_grad():
        their_logits = hub_gpt2(torch.tensor(ids)).logits.numpy()
    with minitrans.using(dtype="float32"):
        our_logits = minitrans.to_numpy(gpt2.forward(minitrans.to_device(ids)))
    largest = np.abs(their_logits).max()
    print(f"logits {our_logits.shape}: minitrans against transformers "
          f"{np.abs(our_logits - their_logits).max() / largest:.1e} of the largest logit")
    print("dropped:", gpt2_info.dropped)
    with torch.no_grad():
        for block in hub_gpt2.transformer.h:  # the middle third of c_attn's bias: the keys'
            block.attn.c_attn.bias[32:64] = 0.0
        without_key_bias = hub_gpt2(torch.tensor(ids)).logits.numpy()
    print(f"transformers without its key biases: its logits move by "
          f"{np.abs(without_key_bias - their_logits).max() / largest:.1e}")

# %% [markdown]
# Both differences are float32's rounding: the loaded model computes
# GPT-2's logits, and the key biases never mattered.
#
# ### GPT-2's tokenizer
#
# The folder's `vocab.json` and `merges.txt` are read by
# `minitrans.data.gpt2_tokenizer.GPT2Tokenizer`: GPT-2's byte-level BPE,
# with the pattern GPT-2 cuts text by before merging (words with their
# leading space, numbers, punctuation). It agrees with `transformers`'
# reading of the same files:

# %%
if HAVE_HUB:
    text = "the theme, then the end"
    ours = gpt2_tokenizer.encode(text)
    theirs = transformers.AutoTokenizer.from_pretrained(gpt2_folder).encode(text)
    print(ours, "| the same as transformers':", ours == theirs)
    print([tokens[i] for i in ours], "->", repr(gpt2_tokenizer.decode(ours)))

# %% [markdown]
# ## 3. Llama's checkpoint
#
# A tiny Llama with random weights: 2 layers, $d_\text{model} = 32$, 4
# query heads sharing 2 key/value heads, so $d_k = 8$; saved the same way.

# %%
if HAVE_HUB:
    torch.manual_seed(0)
    hub_llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=88, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rope_theta=10000.0, bos_token_id=None, eos_token_id=None,
        initializer_range=0.2)).eval()
    with torch.no_grad():
        for parameter in hub_llama.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    llama_folder = root / "tiny-llama"
    hub_llama.save_pretrained(llama_folder, safe_serialization=True)
    written = json.loads((llama_folder / "config.json").read_text(encoding="utf-8"))
    print({key: written[key] for key in (
        "architectures", "hidden_size", "num_attention_heads", "num_key_value_heads",
        "num_hidden_layers", "intermediate_size", "rope_theta", "rope_parameters",
        "rms_norm_eps", "tie_word_embeddings") if key in written})
    with minitrans.using(dtype="float32"):
        llama, _, llama_info = load_pretrained(llama_folder)
    for link in links(llama.config, LLAMA):
        name = link.file_name(LLAMA)
        if ".layers.1." not in name:
            print(f"{name:<47}{str(list(link.shape)):<9}-> {', '.join(link.ours)}"
                  f"{' (transposed)' if link.transpose else ''}")

# %% [markdown]
# The table is short because the layers match one for one. Every
# projection is an `nn.Linear`, stored $(d_\text{out}, d_\text{in})$, and
# transposed on the way in; there is no bias to drop, no positional table,
# no embedding scale and no padding token. The logits:

# %%
if HAVE_HUB:
    ids = np.random.default_rng(5).integers(0, 64, size=(2, 10))
    with torch.no_grad():
        their_logits = hub_llama(torch.tensor(ids)).logits.numpy()
    with minitrans.using(dtype="float32"):
        our_logits = minitrans.to_numpy(llama.forward(minitrans.to_device(ids)))
    difference = np.abs(our_logits - their_logits).max() / np.abs(their_logits).max()
    print(f"logits {our_logits.shape}: largest difference {difference:.1e} of the largest "
          f"logit; the same next token everywhere: "
          f"{(our_logits.argmax(-1) == their_logits.argmax(-1)).all()}")

# %% [markdown]
# Equal to float32's rounding. (In float64 the loader's tests find them
# equal to about $10^{-10}$, once PyTorch's RMSNorm and rotary angles, which
# it computes in float32 whatever the model's dtype, are made float64 too.)
#
# ### Two ways to pair rotary coordinates
#
# $W_Q$ and $W_K$ loaded as they are, and the scores came out right. That
# holds for checkpoints in Hugging Face's format only. Rotary positions turn
# each pair of a head's coordinates (lesson 22), and which coordinates make
# a pair is a choice: Su et al., and Meta's own Llama code, pair neighbours
# $(2i, 2i+1)$; Hugging Face's Llama, and minitrans, pair $i$ with $i +
# d_k/2$. Both turn pair $i$ by the angle $m\,\theta_i$, so the two differ
# only in where each coordinate sits, a fixed permutation $P$ of each head's
# coordinates. Moving it into the weights, $q = xW_Q$ in Meta's order is
# $P$ applied to the columns of $W_Q$ in Hugging Face's, and the scores are
# the same: $P$ is applied to queries and keys alike.
#
# Meta's checkpoints (`consolidated.00.pth` and `params.json`) store $W_Q$
# and $W_K$ in Meta's order. Hugging Face's conversion script
# (`convert_llama_weights_to_hf.py` in `transformers`) reorders the rows of
# each head's `wq` and `wk` (PyTorch's layout, the columns of minitrans's)
# when it writes a model in Hugging Face's format. minitrans reads
# Hugging Face's format only: a checkpoint of Meta's must go through that
# script first. What goes wrong otherwise, with layer 0's weights: below,
# `neighbours_order` puts $W_Q$ and $W_K$ into Meta's order (the exercise
# asks for the way back), `rotate_neighbours` turns pairs of neighbours as
# Meta's code does, with complex numbers, and minitrans's `RotaryEmbedding`
# turns pairs $(i, i + d_k/2)$:

# %%
def neighbours_order(W, heads):
    """W (d_in, heads * d_k) with each head's columns (i, i + d_k/2) made
    neighbours (2i, 2i + 1): Meta's order from Hugging Face's."""
    d_in, width = W.shape
    halves = W.reshape(d_in, heads, 2, width // heads // 2)  # [.., first or second half, i]
    return halves.swapaxes(2, 3).reshape(d_in, width)  # [.., i, first or second half]


def rotate_neighbours(x, base=10000.0):
    """x (T, d_k) with position m's pairs (x_2i, x_2i+1) turned by m theta_i,
    as Meta's Llama code does it: each pair a complex number."""
    T, d_k = x.shape
    theta = base ** (-np.arange(0, d_k, 2) / d_k)
    turned = (x[:, 0::2] + 1j * x[:, 1::2]) * np.exp(1j * np.arange(T)[:, None] * theta)
    return np.stack([turned.real, turned.imag], axis=-1).reshape(T, d_k)


if HAVE_HUB:
    attention = llama.decoder.layers[0].self_attn
    W_Q, W_K = (minitrans.to_numpy(layer.params["W"]).astype(np.float64)
                for layer in (attention.W_Q, attention.W_K))
    x = np.random.default_rng(6).standard_normal((12, 32))  # 12 positions of d_model = 32
    with minitrans.using(dtype="float64"):
        rope = minitrans.RotaryEmbedding(8, max_len=64)
        q = minitrans.to_numpy(rope.forward(minitrans.from_host((x @ W_Q)[:, :8])))  # head 0
        k = minitrans.to_numpy(rope.forward(minitrans.from_host((x @ W_K)[:, :8])))  # kv head 0
        # Meta's weights turned by Hugging Face's pairing: a mix-up
        q_mixed = minitrans.to_numpy(rope.forward(
            minitrans.from_host((x @ neighbours_order(W_Q, 4))[:, :8])))
    hf_scores = q @ k.T
    q_meta = rotate_neighbours((x @ neighbours_order(W_Q, 4))[:, :8])
    k_meta = rotate_neighbours((x @ neighbours_order(W_K, 2))[:, :8])
    print(f"Meta's order and pairing against Hugging Face's: scores differ by "
          f"{np.abs(q_meta @ k_meta.T - hf_scores).max():.1e}")
    print(f"Meta's weights with Hugging Face's pairing: by "
          f"{np.abs(q_mixed @ k_meta.T - hf_scores).max():.2f}")

# %% [markdown]
# Each order with its own pairing gives the same scores, to rounding;
# weights in one order rotated by the other pairing give other scores, and
# a model that runs, produces text, and is wrong. The logits above are the
# check that catches it.
#
# ## 4. One step of fine-tuning, and the way back
#
# The loaded model is an ordinary `DecoderOnlyLM`, so lesson 16's training
# step applies: next-token targets, the cross-entropy, minitrans's
# hand-written backward through RMSNorm, rotary attention with shared
# key/value heads and SwiGLU, and one step of Adam. Its gradient of layer
# 0's $W_K$, against PyTorch's autograd through `transformers`' model (the
# same loss, the file's `k_proj` gradient transposed):

# %%
if HAVE_HUB:
    from minitrans.layers.loss import LabelSmoothedCrossEntropy
    from minitrans.training.optimisation.adam import Adam

    inputs, targets = ids[:, :-1], ids[:, 1:]
    with minitrans.using(dtype="float32"):
        loss_fn = LabelSmoothedCrossEntropy(0.0, pad_id=None)
        loss = loss_fn.forward(llama.forward(minitrans.to_device(inputs)),
                               minitrans.to_device(targets))
        llama.zero_grad()
        llama.backward(loss_fn.backward())
        ours = minitrans.to_numpy(llama.decoder.layers[0].self_attn.W_K.grads["W"]).copy()
        Adam(llama).step(1e-3)
        after = loss_fn.forward(llama.forward(minitrans.to_device(inputs)),
                                minitrans.to_device(targets))
    their_loss = torch.nn.functional.cross_entropy(
        hub_llama(torch.tensor(inputs)).logits.reshape(-1, 64), torch.tensor(targets).reshape(-1))
    their_loss.backward()
    theirs = hub_llama.model.layers[0].self_attn.k_proj.weight.grad.numpy().T
    gap = np.abs(ours - theirs).max() / np.abs(theirs).max()
    print(f"loss {float(loss):.4f} (transformers {their_loss.item():.4f}); W_K's gradient "
          f"{ours.shape}: largest difference {gap:.1e} of its largest entry")
    print(f"after one step of Adam on this batch: loss {float(after):.4f}")

# %% [markdown]
# And the way back: `save_pretrained` writes the fine-tuned model as
# `transformers` writes one (the same names, each projection transposed
# back), and `transformers` reads it:

# %%
if HAVE_HUB:
    tuned = root / "tiny-llama-tuned"
    save_pretrained(llama, tuned, "llama")
    reread = transformers.AutoModelForCausalLM.from_pretrained(tuned).eval()
    with torch.no_grad():
        their_logits = reread(torch.tensor(ids)).logits.numpy()
    with minitrans.using(dtype="float32"):
        our_logits = minitrans.to_numpy(llama.forward(minitrans.to_device(ids)))
    print(sorted(path.name for path in tuned.iterdir()), f"{type(reread).__name__}: logits "
          f"differ by {np.abs(our_logits - their_logits).max() / np.abs(their_logits).max():.1e}")

# %% [markdown]
# ## 5. What the loader refuses, and a real model
#
# What minitrans's layers do not compute is refused by name, never
# approximated: GPT-2's GELU in its exact (erf) form, biases in Llama's
# attention, and scaled rotary positions. The last is the one a learner
# meets first. Llama 3.1 and the models after it rescale the rotary
# frequencies to reach a context of 128K tokens, and say so in
# `config.json`: a `rope_scaling` entry whose `rope_type` is `"llama3"`.
# Llama 3.2 1B, the small model a laptop can hold, has it. Its
# `config.json`, with our tiny sizes in place of its own:

# %%
if HAVE_HUB:
    llama_3_2 = dict(written, rope_theta=500000.0, rope_scaling={
        "factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192, "rope_type": "llama3"})
    llama_3_2.pop("rope_parameters", None)  # transformers 5's name for the same entries
    scaled = root / "tiny-llama-scaled"
    scaled.mkdir()
    (scaled / "config.json").write_text(json.dumps(llama_3_2), encoding="utf-8")
    try:
        load_pretrained(scaled)
    except PretrainedError as error:  # the message names the file; here, from the folder on
        print("PretrainedError:", str(error).replace(str(root) + os.sep, ""))

# %% [markdown]
# The refusal comes before any tensor is read. Llama 3 8B has no
# `rope_scaling` and loads, if the machine holds it: lesson 22's table says
# how much that is (15 GiB of float16 weights, twice that in minitrans's
# float32, which the loader checks against the memory before it builds
# anything), and the project's README says how to fetch a model folder.
# A large model's weights come in several files listed in
# `model.safetensors.index.json`; the loader reads them one at a time.

# %% [markdown]
# ## Exercise: from Meta's rotary layout to Hugging Face's
#
# Write `my_neighbours_to_halves(W, heads)`: `W` is a projection $W_Q$ or
# $W_K$ in minitrans's layout, $(d_\text{in}, \texttt{heads} \cdot d_k)$,
# whose columns, head by head, are in Meta's order (pair $i$ is columns
# $2i$ and $2i + 1$ of its head); return it in Hugging Face's order (pair
# $i$ is columns $i$ and $i + d_k/2$), the order `load_pretrained` expects.
# It is the inverse of `neighbours_order` above, and what Hugging Face's
# conversion script does to each head. For $W_K$, `heads` is the number of
# key/value heads. The checker tries several heads, one head, $d_k = 2$
# (where nothing moves), $d_k = 8$ (where the order and its inverse
# differ), $W_K$ of fewer heads than $W_Q$, and float32, against a
# reference that moves one column at a time. The solution is in
# `solutions/23_loading_pretrained_weights.py`.

# %%
from minitrans_course.exercises_pretrained import check_neighbours_to_halves


def my_neighbours_to_halves(W, heads):
    # your code here
    return W


check_neighbours_to_halves(my_neighbours_to_halves);

# %% [markdown]
# ## Summary
#
# * A model folder is `config.json` (the sizes), `model.safetensors` (a
#   JSON header of names, dtypes, shapes and byte ranges, then the
#   numbers) and the tokenizer's files; `load_pretrained` checks every
#   header and the memory before it reads a tensor.
# * GPT-2 loads with its fused `c_attn` split in three, its key bias
#   dropped (softmax never saw it), its `Conv1D` weights as they are, and
#   `scale_embedding=False`, `output_bias=False`, `pad_id=None`; its
#   byte-level tokenizer is `GPT2Tokenizer`.
# * Llama loads one tensor per parameter, each `nn.Linear` weight
#   transposed; its $W_Q$ and $W_K$ load as they are only in Hugging Face's
#   format, whose rotary pairs are $(i, i + d_k/2)$: Meta's own checkpoints
#   pair neighbours and need the conversion script's permutation first.
# * The loaded models give `transformers`' logits to float32's rounding,
#   train with minitrans's own backward, and go back with
#   `save_pretrained`; scaled rotary positions (`rope_scaling`, Llama 3.1
#   and later) are refused.
#
# ## Next
#
# This ends the main path: from softmax to the decoder that today's open
# models use, and their trained weights. The appendix is about engineering,
# and starts with [Lesson 20](20_checking_against_pytorch.ipynb): the whole
# model, its gradients and Adam checked against PyTorch, an independent
# implementation.

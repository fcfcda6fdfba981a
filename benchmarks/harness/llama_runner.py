"""The llama config of vs_pytorch.py: a Llama-shaped decoder-only language
model, minitrans's ``DecoderOnlyLM`` against ``transformers``'
``LlamaForCausalLM`` in eager PyTorch.

Both sides build the same model from one dict of sizes (``LLAMA_CONFIGS["llama"]``
of harness.configs): pre-norm RMSNorm blocks, rotary positions, grouped-query
attention (``kv_heads`` key/value heads), the SwiGLU feed-forward network, no
bias anywhere, embeddings neither scaled nor tied to the output projection,
no dropout. The PyTorch model gets minitrans's initial weights (so that the
same batch gives the same loss, which tests/project/test_benchmarks.py
checks); a step is forward, the mean cross-entropy of every next token (no
label smoothing, no padding in the batches), backward and Adam, as the
encoder-decoder configs' steps are.
"""

import numpy as np

from harness.minitrans_runner import MinitransRunner
from harness.torch_runner import TorchRunner, torch_adam
from harness.workload import ADAM_SETTINGS, BATCHES, DEVICE_BACKENDS, minitrans_threads

LLAMA_BATCH_SEED = 0


def llama_model_config(sizes, max_len=None):
    """minitrans's ModelConfig of the llama sizes: Llama's options."""
    from minitrans.model.config import ModelConfig

    return ModelConfig(
        vocab_size=sizes["vocab_size"], d_model=sizes["d_model"], h=sizes["h"], N=sizes["N"],
        d_ff=sizes["d_ff"], kv_heads=sizes["kv_heads"], dropout=0.0,
        max_len=sizes["length"] if max_len is None else max_len,
        decoder_only=True, pre_norm=True, norm="rms", norm_eps=sizes["norm_eps"],
        positions="rope", rope_base=sizes["rope_base"], activation="swiglu", bias=False,
        output_bias=False, scale_embedding=False, tie_embeddings=False,
    )


def hf_llama_config(sizes):
    """transformers' LlamaConfig of the same sizes, eager attention."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=sizes["vocab_size"], hidden_size=sizes["d_model"],
        intermediate_size=sizes["d_ff"], num_hidden_layers=sizes["N"],
        num_attention_heads=sizes["h"], num_key_value_heads=sizes["kv_heads"],
        head_dim=sizes["d_model"] // sizes["h"], max_position_embeddings=sizes["length"],
        rms_norm_eps=sizes["norm_eps"], rope_theta=sizes["rope_base"],
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
        attention_dropout=0.0, hidden_act="silu", use_cache=False,
        attn_implementation="eager",
    )


def make_token_batches(sizes, seed=LLAMA_BATCH_SEED):
    """BATCHES pairs (inputs, next tokens) of (batch, length) ids: a random
    (batch, length + 1) row of ids without padding, shifted by one. The
    same in both workers."""
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(BATCHES):
        ids = rng.integers(4, sizes["vocab_size"], size=(sizes["batch"], sizes["length"] + 1))
        batches.append((ids[:, :-1], ids[:, 1:]))
    return batches


def weight_pairs(model, hf_model):
    """(minitrans array, transformers parameter, transposed) for every
    weight: minitrans computes x W, PyTorch x W^T."""
    pairs = [(model.embed.embedding.params["W_E"], hf_model.model.embed_tokens.weight, False),
             (model.decoder.final_norm.params["g"], hf_model.model.norm.weight, False),
             (model.output_projection.params["W"], hf_model.lm_head.weight, True)]
    for ours, theirs in zip(model.decoder.layers, hf_model.model.layers):
        attention, feed_forward = ours.self_attn, ours.feed_forward
        pairs += [
            (attention.W_Q.params["W"], theirs.self_attn.q_proj.weight, True),
            (attention.W_K.params["W"], theirs.self_attn.k_proj.weight, True),
            (attention.W_V.params["W"], theirs.self_attn.v_proj.weight, True),
            (attention.W_O.params["W"], theirs.self_attn.o_proj.weight, True),
            (ours.self_attn_norm.layer_norm.params["g"], theirs.input_layernorm.weight, False),
            (feed_forward.W_gate.params["W"], theirs.mlp.gate_proj.weight, True),
            (feed_forward.W_up.params["W"], theirs.mlp.up_proj.weight, True),
            (feed_forward.W_down.params["W"], theirs.mlp.down_proj.weight, True),
            (ours.feed_forward_norm.layer_norm.params["g"],
             theirs.post_attention_layernorm.weight, False),
        ]
    return pairs


def copy_weights(model, hf_model):
    """hf_model's weights := minitrans model's (NumPy arrays)."""
    import torch

    pairs = weight_pairs(model, hf_model)
    if sum(int(ours.size) for ours, _, _ in pairs) != model.num_parameters():
        raise ValueError("copy_weights: some minitrans parameter has no transformers twin")
    with torch.no_grad():
        for ours, theirs, transposed in pairs:
            value = torch.from_numpy(np.ascontiguousarray(ours.T if transposed else ours))
            if tuple(value.shape) != tuple(theirs.shape):
                raise ValueError(f"copy_weights: shape {tuple(value.shape)} into "
                                 f"{tuple(theirs.shape)}")
            theirs.copy_(value.to(theirs.device))


class MinitransLlamaRunner(MinitransRunner):
    """minitrans's DecoderOnlyLM with Llama's options, trained as the
    Trainer trains a language model: the batch split over ``workers``
    threads (DataParallel), minitrans's Adam, mean cross-entropy over the
    next tokens. Profiles, products and memory as MinitransRunner's."""

    def __init__(self, sizes, device, threads=2, workers=None):  # noqa: D107 (not super's)
        import minitrans
        from minitrans.layers.loss import LabelSmoothedCrossEntropy
        from minitrans.model.language_model import DecoderOnlyLM
        from minitrans.training.optimisation.adam import Adam
        from minitrans.training.optimisation.parallel import DataParallel

        minitrans.use(DEVICE_BACKENDS[device], dtype="float32")
        self.minitrans, self.device = minitrans, device
        self.model = DecoderOnlyLM(llama_model_config(sizes), rng=0)
        self.optimizer = Adam(self.model, **ADAM_SETTINGS)
        self.loss_fn = LabelSmoothedCrossEntropy(0.0, pad_id=self.model.config.pad_id)
        workers, blas_threads = minitrans_threads(device, threads, workers)
        self.parallel = DataParallel(self.model, self.loss_fn, workers, blas_threads)
        self.batches = [tuple(map(minitrans.to_device, batch))
                        for batch in make_token_batches(sizes)]
        self.count = 0

    def next_batch(self):
        """The next of the batches, as forward_backward takes it: ((input
        ids,), next tokens); ``step`` is MinitransRunner's."""
        inputs, targets = self.batches[self.count % BATCHES]
        self.count += 1
        return (inputs,), targets

    def decode(self, cache):
        raise ValueError("decode: vs_pytorch.py decodes with the small config only")

    def beam(self):
        raise ValueError("beam: vs_pytorch.py decodes with the small config only")


class TorchLlamaRunner(TorchRunner):
    """transformers' LlamaForCausalLM of the same sizes and weights, eager
    attention, trained with torch.optim.Adam (fused unless ``fused_adam`` is
    False, as TorchRunner's); with ``compiled=True``, ``torch.compile`` of
    the model (the loss and Adam stay eager). The timing, products and
    memory methods are TorchRunner's."""

    def __init__(self, sizes, device, threads, compiled=False,  # noqa: D107 (not super's)
                 fused_adam=True):
        import torch
        from transformers import LlamaForCausalLM

        import minitrans
        from minitrans.model.language_model import DecoderOnlyLM

        torch.set_num_threads(threads)
        torch.set_float32_matmul_precision("highest")  # no TF32 on a GPU, as in CuPy
        self.torch = torch
        self.device = torch.device("cuda" if device == "gpu" else "cpu")
        self.model = LlamaForCausalLM(hf_llama_config(sizes)).to(self.device, torch.float32)
        with minitrans.using("numpy", dtype="float32"):  # the other worker's weights
            copy_weights(DecoderOnlyLM(llama_model_config(sizes), rng=0), self.model)
        self.model.train()
        # compiled lazily, on the first step: the first step's time includes it
        self.forward = torch.compile(self.model) if compiled else self.model
        self.optimizer, self.adam = torch_adam(torch, self.model.parameters(), fused_adam)
        self.batches = [tuple(torch.from_numpy(a).to(self.device) for a in batch)
                        for batch in make_token_batches(sizes)]
        self.count = 0

    def step(self):
        inputs, targets = self.batches[self.count % BATCHES]
        self.count += 1
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.forward(input_ids=inputs).logits
        loss = self.torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
        )
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def decode(self, cache):
        raise ValueError("decode: vs_pytorch.py decodes with the small config only")


def parameter_counts(minitrans_runner, torch_runner):
    """(minitrans's, transformers') number of trainable numbers."""
    theirs = sum(p.numel() for p in torch_runner.model.parameters() if p.requires_grad)
    return minitrans_runner.model.num_parameters(), theirs

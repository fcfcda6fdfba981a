"""Weight exchange with PyTorch: the same model, the same numbers.

    from minitrans.interop.torch import to_torch, from_torch
    torch_model = to_torch(model)      # a torch.nn.Module with model's weights
    ...                                # train it with PyTorch, on many GPUs
    model = from_torch(torch_model)    # back to a minitrans model

``to_torch`` builds ``TorchTransformer`` (around ``torch.nn.Transformer``) or
``TorchLanguageModel`` (see ``torch_modules``) from the model's config, in
the model's floating-point dtype, and copies every weight. Given the same ids
both compute the same logits: the test suite checks logits, loss and every
gradient against autograd in float64. The losses, optimisers and clipping to
train the PyTorch model as minitrans trains (the paper's recipe and GPT's)
are ``torch_training``'s, given here too.

How the weights correspond (minitrans computes x W, PyTorch x W^T):

    minitrans                          PyTorch
    W_Q.W, W_K.W, W_V.W (d, d) each    in_proj_weight (3d, d): [W_Q^T; W_K^T; W_V^T]
    W_Q.b, W_V.b                       in_proj_bias (3d,): [b_Q; b_K; b_V]
    W_O.W, W_O.b                       out_proj.weight = W_O^T, out_proj.bias
    FFN W_1.W, W_1.b, W_2.W, W_2.b     linear1.weight = W_1^T, ..., linear2.bias
    *_norm.layer_norm gamma, beta      norm1/2/3.weight, norm1/2/3.bias
    Embedding W_E (V, d)               nn.Embedding.weight (V, d)
    OutputProjection W (d, V), b       output_projection.weight = W^T, output_projection.bias

minitrans has no key bias b_K: it adds q . b_K to every score of a query's
row, and softmax ignores a constant added to a whole row, so it changes
nothing (and its gradient is zero). ``to_torch`` sets PyTorch's b_K to zero;
``from_torch`` leaves it behind, whatever PyTorch training did to it.
"""

import dataclasses

try:
    import torch
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "minitrans.interop.torch needs PyTorch, which is not installed. Install the torch extra: "
        "pip install \"minitrans[torch]\" (on Linux, the CPU-only build is much smaller: "
        "pip install torch --index-url https://download.pytorch.org/whl/cpu)",
        name="torch",  # what is missing, as Python's own ModuleNotFoundError says
    ) from error

from minitrans.core import backend
from minitrans.interop.torch_modules import TorchLanguageModel, TorchTransformer
from minitrans.interop.torch_training import (
    TokenCrossEntropy, clip_grad_norm, gpt_optimizer, gpt_schedule, paper_loss, paper_optimizer)
from minitrans.model.language_model import DecoderOnlyLM
from minitrans.model.transformer import Transformer

__all__ = ["to_torch", "from_torch", "parameter_links", "paper_optimizer", "paper_loss",
           "gpt_optimizer", "gpt_schedule", "clip_grad_norm", "TokenCrossEntropy",
           "TorchTransformer", "TorchLanguageModel"]

# ---------------------------------------------------------------- the table


@dataclasses.dataclass
class ParameterLink:
    """One minitrans parameter and the PyTorch tensor that holds it.

    ``rows`` picks its block out of a larger PyTorch tensor (Q, K or V of
    in_proj_weight); ``transpose`` is set where PyTorch stores W^T.
    """

    name: str  # minitrans's qualified name, as in model.named_parameters()
    module: object
    key: str
    tensor: torch.nn.Parameter
    rows: slice = None
    transpose: bool = False

    def _view(self, tensor):
        tensor = tensor if self.rows is None else tensor[self.rows]
        return tensor.T if self.transpose else tensor

    def torch_value(self):
        """A view of the PyTorch tensor in minitrans's layout, outside
        autograd; writing into it (under ``torch.no_grad()``) writes the
        parameter."""
        return self._view(self.tensor.detach())

    def torch_grad(self):
        """PyTorch's gradient of the parameter, in minitrans's layout."""
        return None if self.tensor.grad is None else self._view(self.tensor.grad)

    @property
    def value(self):
        """minitrans's parameter array; assigning to it writes in place."""
        return self.module.params[self.key]

    @value.setter
    def value(self, new):
        self.module.params[self.key][...] = new

    @property
    def grad(self):
        """minitrans's gradient array; assigning to it writes in place."""
        return self.module.grads[self.key]

    @grad.setter
    def grad(self, new):
        self.module.grads[self.key][...] = new


def _attention_links(prefix, mha, torch_mha):
    d = mha.d_model
    for name, rows in (("Q", slice(0, d)), ("K", slice(d, 2 * d)), ("V", slice(2 * d, 3 * d))):
        linear = getattr(mha, f"W_{name}")
        yield ParameterLink(
            f"{prefix}W_{name}.W", linear, "W", torch_mha.in_proj_weight, rows, True
        )
        if "b" in linear.params:  # minitrans has no key bias
            yield ParameterLink(f"{prefix}W_{name}.b", linear, "b", torch_mha.in_proj_bias, rows)
    yield ParameterLink(f"{prefix}W_O.W", mha.W_O, "W", torch_mha.out_proj.weight, transpose=True)
    if "b" in mha.W_O.params:  # bias=False: none
        yield ParameterLink(f"{prefix}W_O.b", mha.W_O, "b", torch_mha.out_proj.bias)


def _norm_links(prefix, norm, torch_norm):
    yield ParameterLink(f"{prefix}gamma", norm, "gamma", torch_norm.weight)
    yield ParameterLink(f"{prefix}beta", norm, "beta", torch_norm.bias)


def _feed_forward_links(prefix, ffn, torch_layer):
    for name, linear, torch_linear in (
        ("W_1", ffn.W_1, torch_layer.linear1), ("W_2", ffn.W_2, torch_layer.linear2)
    ):
        yield ParameterLink(f"{prefix}{name}.W", linear, "W", torch_linear.weight, transpose=True)
        if "b" in linear.params:
            yield ParameterLink(f"{prefix}{name}.b", linear, "b", torch_linear.bias)


def _layer_links(prefix, layer, torch_layer):
    """A minitrans encoder or decoder layer and PyTorch's: the sub-layers in
    order, each followed by the LayerNorm of its Add & Norm (norm1, norm2,
    norm3)."""
    names = ["self_attn", "cross_attn", "feed_forward"]
    torch_names = ["self_attn", "multihead_attn", None]
    index = 0
    for name, torch_name in zip(names, torch_names):
        sublayer = getattr(layer, name, None)
        if sublayer is None:  # no cross-attention in a decoder-only layer
            continue
        index += 1
        if torch_name is None:
            yield from _feed_forward_links(f"{prefix}{name}.", sublayer, torch_layer)
        else:
            yield from _attention_links(
                f"{prefix}{name}.", sublayer, getattr(torch_layer, torch_name)
            )
        yield from _norm_links(
            f"{prefix}{name}_norm.layer_norm.",
            getattr(layer, f"{name}_norm").layer_norm,
            getattr(torch_layer, f"norm{index}"),
        )


def _stack_links(prefix, stack, torch_stack):
    for i, (layer, torch_layer) in enumerate(zip(stack.layers, torch_stack.layers)):
        yield from _layer_links(f"{prefix}layers.{i}.", layer, torch_layer)
    if stack.final_norm is not None:
        yield from _norm_links(f"{prefix}final_norm.", stack.final_norm, torch_stack.norm)


def _embedding_links(prefix, input_embedding, torch_embedding):
    embedding = input_embedding.embedding
    if embedding.owner is embedding:  # a shared table is linked once, by its owner
        yield ParameterLink(
            f"{prefix}embedding.W_E", embedding, "W_E", torch_embedding.embedding.weight
        )
    positional = input_embedding.positional
    if positional is not None and "P" in positional.params:  # learned positions
        yield ParameterLink(f"{prefix}positional.P", positional, "P", torch_embedding.positions)


def _output_projection_links(projection, torch_projection):
    if "W" in projection.params:  # absent when tied to the embedding
        yield ParameterLink(
            "output_projection.W", projection, "W", torch_projection.weight, transpose=True
        )
    if "b" in projection.params:  # output_bias=False: none
        yield ParameterLink("output_projection.b", projection, "b", torch_projection.bias)


def parameter_links(model, torch_model):
    """Every minitrans parameter paired with its PyTorch tensor, in the order
    of ``model.named_parameters()``."""
    if isinstance(model, Transformer):
        _check_pair(model, torch_model, TorchTransformer)
        links = [*_embedding_links("src_embed.", model.src_embed, torch_model.src_embed),
                 *_stack_links("encoder.", model.encoder, torch_model.transformer.encoder),
                 *_embedding_links("tgt_embed.", model.tgt_embed, torch_model.tgt_embed),
                 *_stack_links("decoder.", model.decoder, torch_model.transformer.decoder)]
    else:
        _check_pair(model, torch_model, TorchLanguageModel)
        links = [*_embedding_links("embed.", model.embed, torch_model.embed),
                 *_stack_links("decoder.", model.decoder, torch_model.decoder)]
    links += _output_projection_links(model.output_projection, torch_model.output_projection)
    order = {name: i for i, (name, _, _) in enumerate(model.named_parameters())}
    return sorted(links, key=lambda link: order[link.name])


def _check_pair(model, torch_model, expected_type):
    if not isinstance(torch_model, expected_type):
        raise TypeError(f"torch_model: expected a {expected_type.__name__} for a "
                        f"{type(model).__name__}, got {type(torch_model).__name__}")
    if torch_model.config != model.config:
        raise ValueError(
            f"torch_model: expected a model of config {model.config}, got {torch_model.config}"
        )


def key_bias_blocks(torch_model):
    """(name of the attention, its in_proj_bias, the rows of b_K) for every
    attention of ``torch_model`` with biases: the PyTorch parameters minitrans lacks."""
    return [
        (name, module.in_proj_bias, slice(module.embed_dim, 2 * module.embed_dim))
        for name, module in torch_model.named_modules()
        if isinstance(module, torch.nn.MultiheadAttention) and module.in_proj_bias is not None
    ]


# ---------------------------------------------------------------- copying


def to_torch(model, device="cpu"):
    """A PyTorch model with the architecture, weights and dtype of ``model``
    (a ``Transformer`` or ``DecoderOnlyLM``), in the same train/eval mode."""
    if not isinstance(model, (Transformer, DecoderOnlyLM)):
        raise TypeError(
            f"model: expected a minitrans Transformer or DecoderOnlyLM, got {type(model).__name__}"
        )
    _, weight, _ = next(model.named_parameters())
    dtype = getattr(torch, str(weight.dtype))  # torch.float32 for "float32"
    torch_type = TorchTransformer if isinstance(model, Transformer) else TorchLanguageModel
    torch_model = torch_type(model.config).to(dtype)
    with torch.no_grad():
        for link in parameter_links(model, torch_model):
            link.torch_value().copy_(torch.from_numpy(backend.to_numpy(link.value)))
        for _, bias, rows in key_bias_blocks(torch_model):
            bias[rows] = 0.0
    return torch_model.train(model.training).to(device)


def from_torch(torch_model, model=None):
    """A minitrans model with ``torch_model``'s weights and dtype, on the
    current backend.

    ``model``: fill this model (of the same config) in place instead of a new
    one; its dtype is kept, the weights are cast to it.
    """
    if not isinstance(torch_model, (TorchTransformer, TorchLanguageModel)):
        raise TypeError("torch_model: expected a TorchTransformer or TorchLanguageModel (made by "
                        f"to_torch or built from a ModelConfig), got {type(torch_model).__name__}")
    if model is None:
        model_type = DecoderOnlyLM if torch_model.config.decoder_only else Transformer
        dtype = str(torch_model.output_projection.weight.dtype).removeprefix("torch.")
        with backend.using(dtype=dtype):  # the dtype of the PyTorch model
            model = model_type(torch_model.config)
    for link in parameter_links(model, torch_model):
        host = link.torch_value().cpu().numpy()
        link.value[...] = backend.to_device(host, dtype=link.value.dtype)
    return model.train(torch_model.training)

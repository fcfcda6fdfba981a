"""config.json of a GPT-2 or Llama model, in the Hugging Face layout, and
minitrans's ``ModelConfig``: each read as the other, both ways.

    config.json (GPT2LMHeadModel)      ModelConfig
    n_embd, n_head, n_layer            d_model, h, N
    n_inner (null: 4 n_embd)           d_ff
    n_positions                        max_len, positions="learned"
    activation_function gelu_new       activation="gelu" (the tanh form)
    layer_norm_epsilon                 norm="layer", norm_eps, pre_norm=True
    tie_word_embeddings (true)         tie_embeddings

    config.json (LlamaForCausalLM)     ModelConfig
    hidden_size, num_attention_heads   d_model, h
    num_key_value_heads (= heads)      kv_heads
    num_hidden_layers                  N
    intermediate_size, hidden_act silu d_ff, activation="swiglu"
    max_position_embeddings            max_len, positions="rope"
    rope_theta (or rope_parameters)    rope_base
    rms_norm_eps                       norm="rms", norm_eps, pre_norm=True
    head_dim (= hidden / heads)        d_k, only where it differs
    tie_word_embeddings (false)        tie_embeddings

Both: decoder_only, no output bias, no embedding scale, no dropout (the
model is loaded to be used), and ``pad_id=None``: neither has a padding
token, so nothing is masked but the future. What minitrans's layers do
not compute (an erf GELU, scaled rotary positions, Llama's biases, ...) is
refused by field name, never silently approximated. A field config.json
leaves out takes the default of Hugging Face's config class.
"""

from minitrans.core import checks
from minitrans.model.config import ModelConfig
from minitrans.files.rules import PretrainedError, short

GPT2, LLAMA = "GPT2LMHeadModel", "LlamaForCausalLM"
MODEL_TYPES = {GPT2: "gpt2", LLAMA: "llama"}
SUPPORTED = f"{GPT2} or {LLAMA}"
REQUIRED = object()  # a field without a default: config.json must give it
# GPT-2's GELU in its tanh form, under Hugging Face's two names for it
TANH_GELUS = ("gelu_new", "gelu_pytorch_tanh")


def architecture_of(where, hub):
    """The architecture config.json (the dict ``hub``, read from ``where``)
    names: its "architectures" or, without them, its "model_type"."""
    named = hub.get("architectures")
    model_type = hub.get("model_type")
    if named is None:
        by_type = {kind: name for name, kind in MODEL_TYPES.items()}
        if model_type not in by_type:
            raise PretrainedError(f"{where}: model_type {short(model_type)} is not supported; "
                                  f"expected {', '.join(by_type)} (or architectures)")
        return by_type[model_type]
    if not isinstance(named, list) or len(named) != 1 or not isinstance(named[0], str):
        raise PretrainedError(f"{where}: architectures is {short(named)}, expected a list of "
                              "one name")
    if named[0] not in MODEL_TYPES:
        raise PretrainedError(f"{where}: architecture {short(named[0])} is not supported; "
                              f"expected {SUPPORTED}")
    if model_type is not None and model_type != MODEL_TYPES[named[0]]:
        raise PretrainedError(f"{where}: model_type {short(model_type)} does not match "
                              f"architecture {named[0]}, expected {MODEL_TYPES[named[0]]!r}")
    return named[0]


def model_config(where, hub, architecture):
    """The ModelConfig of config.json (``hub``) for ``architecture``."""
    fields = _Fields(where, hub)
    sizes = _gpt2_sizes(fields) if architecture == GPT2 else _llama_sizes(fields)
    common = dict(decoder_only=True, pre_norm=True, dropout=0.0, pad_id=None,
                  output_bias=False, scale_embedding=False)
    try:
        return ModelConfig(**common, **sizes)
    except ValueError as error:  # e.g. a size over ModelConfig's LIMITS
        raise PretrainedError(f"{where}: {in_hub_names(str(error), architecture)}") from None


# ModelConfig's fields under config.json's names (the tables of the docstring)
HUB_NAMES = {
    GPT2: {"vocab_size": "vocab_size", "d_model": "n_embd", "h": "n_head", "N": "n_layer",
           "d_ff": "n_inner", "max_len": "n_positions", "norm_eps": "layer_norm_epsilon"},
    LLAMA: {"vocab_size": "vocab_size", "d_model": "hidden_size", "h": "num_attention_heads",
            "N": "num_hidden_layers", "d_ff": "intermediate_size",
            "max_len": "max_position_embeddings", "kv_heads": "num_key_value_heads",
            "d_k": "head_dim", "norm_eps": "rms_norm_eps", "rope_base": "rope_theta"},
}


def in_hub_names(message, architecture):
    """ModelConfig's error "N: expected at most 1024, got ..." as config.json
    says it, "n_layer: ... (ModelConfig's N)": the reader of the error has
    config.json before them, not minitrans's names."""
    name, colon, rest = message.partition(": ")
    hub = HUB_NAMES[architecture].get(name)
    return f"{hub}: {rest} (ModelConfig's {name})" if colon and hub else message


def _gpt2_sizes(fields):
    d_model, h = fields.int("n_embd"), fields.int("n_head")
    if d_model % h:
        fields.refuse("n_head", h, f"a divisor of n_embd={d_model}")
    fields.choice("activation_function", "gelu_new", TANH_GELUS,
                  "minitrans's GELU is the tanh form")
    fields.expect("scale_attn_weights", True, "scores are divided by sqrt(d_k)")
    fields.expect("scale_attn_by_inverse_layer_idx", False, "not implemented")
    fields.expect("add_cross_attention", False, "a language model has no encoder")
    return dict(vocab_size=fields.int("vocab_size"), d_model=d_model, h=h, N=fields.int("n_layer"),
                d_ff=fields.int("n_inner", None) or 4 * d_model,
                max_len=fields.int("n_positions", 1024), positions="learned",
                activation="gelu", norm="layer", bias=True,
                norm_eps=fields.positive("layer_norm_epsilon", 1e-5),
                tie_embeddings=fields.bool("tie_word_embeddings", True))


def _llama_sizes(fields):
    d_model, h = fields.int("hidden_size"), fields.int("num_attention_heads")
    kv_heads = fields.int("num_key_value_heads", h)
    if h % kv_heads:
        fields.refuse("num_key_value_heads", kv_heads, f"a divisor of num_attention_heads={h}")
    head_dim = fields.int("head_dim", None)
    if head_dim is None and d_model % h:
        fields.refuse("num_attention_heads", h, f"a divisor of hidden_size={d_model}")
    fields.choice("hidden_act", "silu", ("silu",), "SwiGLU's gate is SiLU")
    fields.expect("attention_bias", False, "minitrans's rotated keys have no bias")
    fields.expect("mlp_bias", False, "not implemented beside bias-free attention")
    return dict(vocab_size=fields.int("vocab_size"), d_model=d_model, h=h,
                N=fields.int("num_hidden_layers"), d_ff=fields.int("intermediate_size"),
                max_len=fields.int("max_position_embeddings", 2048), positions="rope",
                activation="swiglu", norm="rms", bias=False,
                kv_heads=None if kv_heads == h else kv_heads,
                d_k=None if head_dim in (None, d_model // h) else head_dim,
                norm_eps=fields.positive("rms_norm_eps", 1e-6), rope_base=_rope_base(fields),
                tie_embeddings=fields.bool("tie_word_embeddings", False))


def _rope_base(fields):
    """rope_theta, from the top level (transformers 4) or from rope_parameters
    (transformers 5); any scaling of the angles (rope_scaling, a rope_type
    other than "default": Llama 3.1's "llama3", "linear", "yarn", ...) is
    refused: minitrans's rotary positions are the unscaled ones."""
    scaling = fields.values.get("rope_scaling")
    if scaling is not None:
        fields.refuse("rope_scaling", scaling, "null (scaled rotary positions are not "
                                               "implemented)")
    parameters = fields.values.get("rope_parameters")
    if parameters is None:
        return fields.positive("rope_theta", 10000.0)
    if not isinstance(parameters, dict):
        fields.refuse("rope_parameters", parameters, "an object")
    inner = _Fields(fields.where, parameters, prefix="rope_parameters.")
    kind = parameters.get("rope_type", parameters.get("type", "default"))
    if kind != "default":
        inner.refuse("rope_type", kind, "'default' (scaled rotary positions are not "
                                        "implemented)")
    return inner.positive("rope_theta", fields.values.get("rope_theta", 10000.0))


def hub_config(config, architecture):
    """config.json (a dict) of a minitrans ``config`` as ``architecture``
    (GPT2LMHeadModel or LlamaForCausalLM), for Hugging Face to read."""
    head = dict(architectures=[architecture], model_type=MODEL_TYPES[architecture],
                vocab_size=config.vocab_size, tie_word_embeddings=config.tie_embeddings)
    if architecture == GPT2:
        return {**head, "n_embd": config.d_model, "n_head": config.h, "n_layer": config.N,
                "n_inner": config.d_ff, "n_positions": config.max_len,
                "activation_function": "gelu_new", "layer_norm_epsilon": config.norm_eps,
                "resid_pdrop": config.dropout, "embd_pdrop": config.dropout,
                "attn_pdrop": 0.0}  # minitrans drops no attention weights
    return {**head, "hidden_size": config.d_model, "num_attention_heads": config.h,
            "num_key_value_heads": config.key_value_heads, "head_dim": config.head_width,
            "num_hidden_layers": config.N, "intermediate_size": config.d_ff,
            "hidden_act": "silu", "max_position_embeddings": config.max_len,
            "rms_norm_eps": config.norm_eps, "attention_bias": False, "mlp_bias": False,
            "attention_dropout": 0.0,
            # transformers 5 reads rope_parameters, transformers 4 rope_theta
            "rope_theta": config.rope_base,
            "rope_parameters": {"rope_type": "default", "rope_theta": config.rope_base}}


def check_expressible(where, config, architecture):
    """Refuse a model that ``architecture`` cannot hold (a Llama-shaped model
    as GPT-2, sinusoidal positions, ...): its config.json, read back, must
    give the same model, naming the first field that differs."""
    if architecture not in MODEL_TYPES:
        raise PretrainedError(f"{where}: architecture {short(architecture)} is not supported; "
                              f"expected {SUPPORTED}")
    back = model_config(where, hub_config(config, architecture), architecture)
    for name in COMPARED:
        ours, theirs = getattr(config, name), getattr(back, name)
        if ours != theirs:
            raise PretrainedError(f"{where}: {architecture} cannot hold this model: its "
                                  f"ModelConfig.{name} is {ours!r}, expected {theirs!r}")


# What a saved model must keep; dropout and pad_id change no weight, and
# head_width and key_value_heads stand for d_k and kv_heads (None and the
# number it means are the same model).
COMPARED = ("vocab_size", "d_model", "h", "N", "d_ff", "max_len", "pre_norm", "tie_embeddings",
            "decoder_only", "head_width", "positions", "activation", "norm", "norm_eps",
            "key_value_heads", "bias", "output_bias", "scale_embedding")


class _Fields:
    """The fields of a config.json object, each checked by its name, and the
    one-line errors that name it: "FILE: n_head is 'four', expected ..."."""

    def __init__(self, where, values, prefix=""):
        self.where, self.values, self.prefix = where, values, prefix

    def refuse(self, name, value, expected):
        raise PretrainedError(f"{self.where}: {self.prefix}{name} is {short(value)}, "
                              f"expected {expected}")

    def get(self, name, default, expected):
        if name in self.values:
            return self.values[name]
        if default is REQUIRED:
            raise PretrainedError(f"{self.where}: no field {self.prefix}{name}, expected "
                                  f"{expected}")
        return default

    def int(self, name, default=REQUIRED):
        value = self.get(name, default, "a positive integer")
        if value is not None and not checks.is_int(value, low=1):
            self.refuse(name, value, "a positive integer")
        return value

    def positive(self, name, default):
        value = self.get(name, default, "a positive number")
        if not checks.is_number(value, low=0, low_open=True):
            self.refuse(name, value, "a positive number")
        return float(value)

    def bool(self, name, default):
        value = self.get(name, default, "true or false")
        if not isinstance(value, bool):
            self.refuse(name, value, "true or false")
        return value

    def choice(self, name, default, choices, why):
        value = self.get(name, default, "")
        if value not in choices:
            self.refuse(name, value, f"{' or '.join(map(repr, choices))} ({why})")

    def expect(self, name, wanted, why):
        value = self.get(name, wanted, "")
        if value is not wanted:
            self.refuse(name, value, f"{str(wanted).lower()} ({why})")

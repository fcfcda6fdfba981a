"""Model sizes and options, with the paper's configurations by name."""

import dataclasses
import typing

from minitrans.core import checks
from minitrans.layers.add_norm import NORMS
from minitrans.layers.feedforward import FEED_FORWARDS
from minitrans.layers.multihead import check_kv_heads
from minitrans.layers.positional import POSITIONS
from minitrans.model.init_schemes import INITS

# Table 3 of the paper (with its shared embedding and pre-softmax matrix,
# §3.4), and small sizes for the toy tasks.
PRESETS = {
    "base": dict(d_model=512, h=8, N=6, d_ff=2048, dropout=0.1, tie_embeddings=True),
    "big": dict(d_model=1024, h=16, N=6, d_ff=4096, dropout=0.3, tie_embeddings=True),
    "small": dict(d_model=128, h=4, N=2, d_ff=512, dropout=0.1),
    "toy": dict(d_model=64, h=4, N=2, d_ff=256, dropout=0.1),
    "tiny": dict(d_model=8, h=2, N=1, d_ff=16, dropout=0.0),
}

# The largest size a config may give, far above any model this project
# trains: a typo such as d_model=1000000000 is refused here by name, before
# anything is allocated (whether sizes within them fit the machine's memory
# is judged by minitrans.core.memory_budget). Checkpoints' records are held to
# them too.
LIMITS = {"vocab_size": 2**24, "src_vocab_size": 2**24, "d_model": 2**16, "h": 2**10,
          "N": 2**10, "d_ff": 2**20, "max_len": 2**20, "d_k": 2**16, "kv_heads": 2**10}


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Everything needed to build a model, and nothing about training.

    vocab_size:      target vocabulary (and source, unless src_vocab_size)
    src_vocab_size:  source vocabulary of an encoder-decoder, if different
    d_model, h, N, d_ff, dropout: the paper's names (Table 3)
    max_len:         longest sequence the positional encoding covers
    pre_norm:        LayerNorm before each sub-layer instead of after
    tie_embeddings:  one matrix for source and target embeddings and the
                     pre-softmax projection (paper §3.4); needs one vocabulary
    decoder_only:    a GPT-style language model: no encoder, no cross-attention
    pad_id:          the token id of <pad>, masked out everywhere; None: the
                     model has no padding token (GPT-2, Llama), no key is
                     masked but the future and the loss counts every target
    d_k:             width of each head (and d_v); None: d_model / h, the paper's
    positions:       "sinusoidal" (the paper), "learned" (Table 3 row E, GPT-2)
                     or "rope" (rotary, Llama: no table is added to the
                     embeddings; every self-attention rotates Q and K)
    activation:      the feed-forward's "relu" (the paper) or "gelu" (BERT,
                     GPT-2), or "swiglu": Llama's gated network of three
                     matrices (layers.swiglu)
    norm:            "layer" (LayerNorm, the paper) or "rms" (RMSNorm, Llama)
    norm_eps:        the eps of every norm (Llama: 1e-5 or 1e-6)
    rope_base:       the base of the rotary angles (Llama 3: 500000.0)
    kv_heads:        key/value heads of grouped-query attention, a divisor
                     of h; None: h, the paper's multi-head attention
    bias:            biases in the attention and feed-forward projections
                     (the paper and GPT-2: True; Llama: False)
    output_bias:     a bias in the output projection (GPT-2, Llama: False)
    scale_embedding: embeddings times sqrt(d_model) (§3.4; GPT-2, Llama: False)
    init:            the initial weights: "xavier" (each layer's own, Glorot's
                     uniform matrices) or "gpt" (GPT-2's N(0, 0.02), residual
                     projections scaled by 1 / sqrt(2 N); model.init_schemes)
    The defaults are the paper's model; a checkpoint's record written before
    an option existed lacks it, and so gets the default.
    """

    vocab_size: int
    src_vocab_size: int = None
    d_model: int = 512
    h: int = 8
    N: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    max_len: int = 512
    pre_norm: bool = False
    tie_embeddings: bool = False
    decoder_only: bool = False
    pad_id: typing.Optional[int] = 0  # Optional: a checkpoint's record may hold None
    d_k: int = None
    positions: str = "sinusoidal"
    activation: str = "relu"
    norm: str = "layer"
    norm_eps: float = 1e-5
    rope_base: float = 10000.0
    kv_heads: int = None
    bias: bool = True
    output_bias: bool = True
    scale_embedding: bool = True
    init: str = "xavier"

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "h", "N", "d_ff", "max_len"):
            checks.check_positive_int(name, getattr(self, name))
        for name in ("src_vocab_size", "d_k", "kv_heads"):
            checks.check_int(name, getattr(self, name), low=1, allow_none=True)
        checks.check_choice("positions", self.positions, POSITIONS)
        checks.check_choice("activation", self.activation, FEED_FORWARDS)
        checks.check_choice("norm", self.norm, NORMS)
        checks.check_choice("init", self.init, INITS)
        checks.check_number("norm_eps", self.norm_eps, low=0, low_open=True)
        checks.check_number("rope_base", self.rope_base, low=1, low_open=True)
        for name, limit in LIMITS.items():
            if (getattr(self, name) or 0) > limit:
                raise ValueError(f"{name}: expected at most {limit} (ModelConfig's LIMITS), "
                                 f"got {getattr(self, name)}")
        if self.d_k is None and self.d_model % self.h:
            raise ValueError(
                f"h: d_model={self.d_model} must be divisible by the number of heads, "
                f"got h={self.h}"
            )
        check_kv_heads(self.kv_heads, self.h)
        if self.positions == "rope" and self.head_width % 2:
            raise ValueError(f"d_k: positions='rope' rotates pairs of a head's coordinates, so "
                             f"expected an even head width, got d_k={self.head_width}")
        checks.check_probability("dropout", self.dropout)
        for name in ("pre_norm", "tie_embeddings", "decoder_only", "bias", "output_bias",
                     "scale_embedding"):
            checks.check_bool(name, getattr(self, name))  # "false" would be a truthy string
        checks.check_int("pad_id", self.pad_id, low=0,
                         high=min(self.vocab_size, self.source_vocab_size) - 1, allow_none=True)
        self._store_python_numbers()
        if (
            self.tie_embeddings
            and self.source_vocab_size != self.vocab_size
            and not self.decoder_only
        ):
            raise ValueError(
                "tie_embeddings: source and target must share one vocabulary, got sizes "
                f"{self.source_vocab_size} and {self.vocab_size}"
            )

    def _store_python_numbers(self):
        """NumPy integers pass the checks above; keep Python's int and float,
        which the checkpoint's JSON record can hold."""
        for name in ("vocab_size", "src_vocab_size", "d_model", "h", "N", "d_ff", "max_len",
                     "pad_id", "d_k", "kv_heads"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, int(getattr(self, name)))  # frozen dataclass
        for name in ("dropout", "norm_eps", "rope_base"):
            object.__setattr__(self, name, float(getattr(self, name)))

    @property
    def source_vocab_size(self):
        return self.vocab_size if self.src_vocab_size is None else self.src_vocab_size

    @property
    def head_width(self):
        """d_k: the width of one head, d_model / h unless set."""
        return self.d_model // self.h if self.d_k is None else self.d_k

    @property
    def key_value_heads(self):
        """The key/value heads of each attention (and of its cache): kv_heads, or h."""
        return self.h if self.kv_heads is None else self.kv_heads

    def layer_options(self):
        """The keyword options of the Encoder and Decoder (and of their
        layers) that this config sets besides the sizes."""
        return dict(d_k=self.d_k, activation=self.activation, kv_heads=self.kv_heads,
                    bias=self.bias, norm=self.norm, norm_eps=self.norm_eps,
                    rope=self.positions == "rope", rope_base=self.rope_base,
                    max_len=self.max_len)

    def parameter_count(self):
        """How many numbers the model's parameters hold, computed from the
        sizes alone (without building the model): per attention block the
        projections W_Q (d_model x h d_k), W_K and W_V (d_model x kv_heads
        d_k each) and W_O (h d_k x d_model) and, with ``bias``, the biases of
        Q, V and O (a key bias would change no score); per feed-forward
        network W_1 and W_2 (or SwiGLU's W_gate, W_up and W_down) and their
        biases; 2 d_model per LayerNorm, d_model per RMSNorm; the embeddings
        and the output projection (with its bias unless ``output_bias`` is
        False), one shared matrix when tied; a max_len x d_model table per
        embedding with learned positions (sinusoids and rotations learn
        nothing); the final norm of each stack with pre_norm. The base model
        of Table 3 has about 63 million (with a 37000-token vocabulary)."""
        d, V, d_ff = self.d_model, self.vocab_size, self.d_ff
        width, kv_width = self.h * self.head_width, self.key_value_heads * self.head_width
        attention = 2 * d * width + 2 * d * kv_width + (width + kv_width + d if self.bias else 0)
        norm = d if self.norm == "rms" else 2 * d
        matrices = 3 if self.activation == "swiglu" else 2
        feed_forward = matrices * d * d_ff + ((matrices - 1) * d_ff + d if self.bias else 0)
        layer = attention + norm + feed_forward + norm  # an encoder layer
        stacks = 1 if self.decoder_only else 2
        count = self.N * stacks * layer  # both stacks' self-attention and feed-forward
        if not self.decoder_only:
            count += self.N * (attention + norm)  # the decoder's cross-attention
            count += 0 if self.tie_embeddings else self.source_vocab_size * d
        count += V * d  # the (target) embedding
        count += (V if self.output_bias else 0) + (0 if self.tie_embeddings else d * V)
        count += stacks * self.max_len * d if self.positions == "learned" else 0
        return count + (stacks * norm if self.pre_norm else 0)

    @classmethod
    def preset(cls, name, **overrides):
        """A paper (``base``, ``big``) or toy (``small``, ``toy``, ``tiny``) size."""
        checks.check_choice("preset", name, sorted(PRESETS))
        return cls(**{**PRESETS[name], **overrides})

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values):
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"config: unknown fields {unknown}")
        return cls(**values)

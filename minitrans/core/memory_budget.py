"""How much memory a model needs, against how much the machine has: the
budget of the machine's RAM (a GPU's own memory on CuPy). It lives in core,
beside the backend it asks, and reads only a ModelConfig's sizes (by
attribute); in model/, "memory" is the encoder's output instead.

A size typed by mistake (``--d-model 1000000000``, or sizes that are each
sane but multiply to terabytes) should be refused in one line that names
the sizes and both numbers, before anything is allocated, not end in a
``MemoryError`` traceback or an hour of swapping. The estimates count the
largest arrays only (on the copy task, d_model 256 to 1024, they came
within 10% of the growth of the process's peak memory over two training
steps). They are compared with the whole memory of the machine (a GPU's
own memory on CuPy), not with what is free at the moment, so the same
sizes give the same answer every time: what is refused could not run
(give or take those 10%, with nothing left for anything else), and what is
accepted near the limit may still not. In a container whose memory is
capped below the machine's, the cap is not seen.
"""

import os

from minitrans.core import backend

UNITS = ("bytes", "kB", "MB", "GB", "TB", "PB", "EB")


def machine_memory():
    """Bytes of memory the arrays live in: the GPU's total on CuPy, the
    machine's physical memory otherwise (``os.sysconf``, Linux and most
    Unix systems); None where the system does not say."""
    if backend.backend_name() == "cupy":
        return int(backend.get_xp().cuda.runtime.memGetInfo()[1])  # (free, total)
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):  # Windows, or a name the system lacks
        return None
    return pages * page_size if pages > 0 and page_size > 0 else None


def model_bytes(config, itemsize=None):
    """The arrays of a built model (``config`` a ModelConfig): its
    parameters and its constant tables, ``itemsize`` bytes per number
    (default: the backend's dtype). The tables: with sinusoids, the
    positional encoding of each stack (max_len x d_model); with rotary
    positions, the cos and sin of every self-attention (max_len x d_k / 2
    each); a learned table is a parameter, counted already."""
    itemsize = itemsize or backend.get_dtype().itemsize
    stacks = 1 if config.decoder_only else 2
    tables = 0
    if config.positions == "sinusoidal":
        tables = stacks * config.max_len * config.d_model
    elif config.positions == "rope":
        tables = stacks * config.N * config.max_len * config.head_width
    return itemsize * (config.parameter_count() + tables)


def kv_cache_numbers(config, positions):
    """How many numbers the key/value caches of one decoded row hold over
    ``positions`` positions: K and V in every decoder layer, of its
    key/value heads only (kv_heads with grouped-query attention, h / kv_heads
    times fewer than h) of d_k each."""
    return config.N * 2 * config.key_value_heads * config.head_width * positions


def training_bytes(config, batch_size, length, workers=1, itemsize=None, average=False):
    """Training a model with Adam on batches of ``batch_size`` sequences of
    ``length`` tokens, split over ``workers`` threads: the model's arrays,
    a gradient per parameter for each worker, Adam's two moments, with
    ``average`` a moving average of the weights (one more copy), and what
    the forward pass keeps for the backward pass of one batch, per token:

        per layer     ~4 h d_k (Q, K, V, the heads' output), d_ff (the
                      feed-forward's hidden layer; 4 d_ff for SwiGLU's gate,
                      up, sigma(gate) and product) and h x length (the attention
                      weights), for each self- and cross-attention
        at the top    2 x vocab_size (the logits and their gradient)

    Grouped-query attention keeps as much: its kv_heads heads of K and V
    are repeated to h for the attention, which keeps the repeated ones.
    """
    itemsize = itemsize or backend.get_dtype().itemsize
    h, V = config.h, config.vocab_size
    attention = 4 * h * config.head_width + h * length
    hidden = config.d_ff * (4 if config.activation == "swiglu" else 1)
    layers = config.N * (1 if config.decoder_only else 2)
    cross = 0 if config.decoder_only else config.N  # the decoder's cross-attention
    per_token = layers * (attention + hidden) + cross * attention + 2 * V
    optimiser = (workers + 2 + int(average)) * config.parameter_count() * itemsize
    return model_bytes(config, itemsize) + optimiser + batch_size * length * per_token * itemsize


def check_fits(config, needed, purpose, available=None):
    """Refuse sizes that need more than ``available`` bytes (default: the
    machine's memory; no check where it is unknown): a ValueError naming
    the sizes, what they are needed for, and both numbers."""
    available = machine_memory() if available is None else available
    if available is None or needed <= available:
        return
    sizes = ", ".join(
        f"{name}={getattr(config, name)}"
        for name in ("d_model", "h", "N", "d_ff", "vocab_size", "max_len")
    )
    where = "the GPU" if backend.backend_name() == "cupy" else "this machine"
    raise ValueError(
        f"{sizes}: {purpose} needs about {format_bytes(needed)}, "
        f"{where} has {format_bytes(available)}; choose smaller sizes"
    )


def format_bytes(count):
    """1234567 -> '1.2 MB' (powers of 1000, as disk and memory sizes are sold)."""
    value, unit = float(count), 0
    while value >= 1000 and unit < len(UNITS) - 1:
        value, unit = value / 1000, unit + 1
    return f"{count} bytes" if unit == 0 else f"{value:.3g} {UNITS[unit]}"

"""What decoding refuses before its first step, each in one line that names
the argument, what was expected and what was given:

    a model of the other kind   greedy, sample and beam_search translate a
                                source (encoder-decoder); generate continues a
                                prompt (decoder-only)
    more tokens than positions  every fed token takes one of config.max_len
                                (``room_after_prompt``, also for the command line)
    more rows than memory       the key/value caches of a batch are allocated
                                whole at the first step (``minitrans.model.kvcache``)
"""

from minitrans.core import backend, checks, memory_budget
from minitrans.model.config import ModelConfig

KIND_NAMES = {
    True: "a decoder-only model (DecoderOnlyLM)",
    False: "an encoder-decoder model (Transformer)",
}
# What to call for a model of each kind: the hint of the error
KIND_FUNCTIONS = {
    True: "continue a prompt with decoding.generate",
    False: "decode a source with decoding.greedy, sample or beam_search",
}


def check_model_kind(name, model, decoder_only):
    """``model`` must be of the kind the caller decodes: the two kinds' ``start``
    and ``step`` take different arguments, so the other kind would fail deep
    inside with a TypeError that names neither the model nor the function.
    A stand-in whose config does not say its kind (a test's scripted model)
    is taken at its word; a thing with no config is no model."""
    if not hasattr(model, "config"):
        raise TypeError(f"{name}: expected {KIND_NAMES[decoder_only]}, "
                        f"got {type(model).__name__}")
    given = getattr(model.config, "decoder_only", decoder_only)
    if bool(given) != decoder_only:
        raise TypeError(f"{name}: expected {KIND_NAMES[decoder_only]}, "
                        f"got {KIND_NAMES[bool(given)]}; {KIND_FUNCTIONS[bool(given)]}")


def check_token_id(name, value, model):
    """A token id given as a number (<bos>): in the model's vocabulary."""
    checks.check_int(name, value, low=0, high=model.config.vocab_size - 1)


def check_length(name, value, model, prompt_length=None):
    """``value`` tokens to decode must fit the model's config.max_len
    positions. After a prompt of T0 tokens (``prompt_length``) the last
    prompt token and every new one but the last are fed: T0 + value - 1
    positions, so at most max_len - T0 + 1 new tokens."""
    checks.check_positive_int(name, value)
    positions = model.config.max_len
    if prompt_length is None:
        if value > positions:
            raise ValueError(f"{name}: expected at most {positions} (the model has "
                             f"{positions} positions), got {value}")
        return
    room_after_prompt(prompt_length, positions, name, value)


def room_after_prompt(prompt_length, positions, name=None, wanted=None, with_bos=False):
    """How many new tokens fit after a prompt of ``prompt_length`` tokens in
    a model of ``positions`` positions: the prompt and every new token but
    the last are fed, so positions - prompt_length + 1. ``with_bos``: the
    caller puts a <bos> before the prompt, which takes a position that
    ``prompt_length`` does not count. Refuses a prompt that leaves no room
    (never "at most" a negative number), and ``wanted`` new tokens (the
    argument ``name``) above the room."""
    taken = prompt_length + int(with_bos)
    if taken > positions:
        bos = ", one for <bos>" if with_bos else ""
        raise ValueError(f"prompt: expected at most {positions - int(with_bos)} tokens (the "
                         f"model has {positions} positions{bos}), got {prompt_length}; no room "
                         "is left to generate")
    room = positions - taken + 1
    if wanted is not None and wanted > room:
        raise ValueError(f"{name}: expected at most {room} after a prompt of {prompt_length} "
                         f"tokens (the model has {positions} positions), got {wanted}")
    return room


def row_bytes(config, source_length=0, itemsize=None):
    """Bytes that decoding one row takes at least: the key/value caches of its
    decoder layers (of the key/value heads only, with grouped-query
    attention), allocated at full length (max_len) at the first step, the
    cross-attention's keys and values of its ``source_length`` source tokens
    (encoder-decoder), and two float64 copies of a step's logits (sampling
    draws in float64)."""
    itemsize = itemsize or backend.get_dtype().itemsize
    cached_positions = config.max_len + (0 if config.decoder_only else source_length)
    caches = memory_budget.kv_cache_numbers(config, cached_positions)  # K and V
    return itemsize * caches + 8 * 2 * config.vocab_size


def most_rows(config, source_length=0, available=None):
    """How many rows fit in ``available`` bytes (default: the machine's
    memory, as ``minitrans.core.memory_budget`` counts it) beside the model;
    None where the system does not say how much memory it has."""
    available = memory_budget.machine_memory() if available is None else available
    if available is None:
        return None
    room = available - memory_budget.model_bytes(config)
    return max(0, room // row_bytes(config, source_length))


def check_rows_fit(name, rows, config, source_length=0, what="rows"):
    """Refuse a batch whose caches cannot fit in memory, before they are
    allocated: "prompt: expected at most 1200 rows ..., got 100000" rather
    than a MemoryError traceback halfway through a step. Only a ModelConfig
    has the sizes to count (a test's stand-in model has not)."""
    if not isinstance(config, ModelConfig):
        return
    available = memory_budget.machine_memory()
    most = most_rows(config, source_length, available)
    if most is None or rows <= most:
        return
    where = "the GPU" if backend.backend_name() == "cupy" else "this machine"
    each = memory_budget.format_bytes(row_bytes(config, source_length))
    total = memory_budget.format_bytes(available)
    raise ValueError(f"{name}: expected at most {most} {what} decoded at once (each needs at "
                     f"least {each}, {where} has {total}), got {rows}")

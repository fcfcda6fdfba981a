"""From next-token logits to sentences: greedy, beam search and sampling,
with the key/value cache."""

from minitrans.decoding.attention_maps import (  # noqa: F401
    decode_with_attention,
    generate_with_attention,
)
from minitrans.decoding.sampling import (  # noqa: F401
    apply_temperature,
    draw,
    sampler,
    top_k_filter,
    top_p_filter,
)
from minitrans.decoding.search import (  # noqa: F401
    beam_search,
    generate,
    gnmt_length_penalty,
    greedy,
    sample,
)

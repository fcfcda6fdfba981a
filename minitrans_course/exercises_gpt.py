"""The exercise of lesson 19 (from here to GPT-2): count the parameters of a
decoder-only model from its sizes alone.

``check_decoder_only_parameter_count(fn)`` calls
``fn(vocab_size, d_model, h, N, d_ff, max_len, tied, learned)`` and expects
the exact number of parameters (an int) of the model minitrans builds with

    ModelConfig(vocab_size, d_model=d_model, h=h, N=N, d_ff=d_ff, max_len=max_len,
                decoder_only=True, pre_norm=True, tie_embeddings=tied,
                positions="learned" if learned else "sinusoidal")

that is, GPT-2's arrangement: a LayerNorm before each sub-layer and one more
after the last layer. The reference does not use a formula: it lists every
tensor of such a model by name and shape, as a checkpoint's table of contents
would (``parameter_shapes``), and adds up their sizes.
"""

import math

from minitrans_course.exercise_checker import Case, run_checker

# The published sizes of the four GPT-2 models (Radford et al. 2019, Table 2,
# with the head counts of OpenAI's released hyper-parameters): d_model, h, N.
GPT2_SIZES = {
    "small": (768, 12, 12),
    "medium": (1024, 16, 24),
    "large": (1280, 20, 36),
    "xl": (1600, 25, 48),
}
GPT2_VOCAB, GPT2_CONTEXT = 50257, 1024


def parameter_shapes(vocab_size, d_model, h, N, d_ff, max_len, tied, learned):
    """[(name, shape)] of every parameter of the decoder-only model above.

    ``h`` changes no shape: the h heads split W_Q, W_K, W_V and W_O into
    column blocks (lesson 7). There is no key bias (it would change no
    attention weight), the output projection has a bias, a tied output
    projection reuses the embedding's matrix, and sinusoidal positions are a
    fixed table, not a parameter."""
    shapes = [("embed.embedding.W_E", (vocab_size, d_model))]
    if learned:
        shapes.append(("embed.positional.P", (max_len, d_model)))
    for layer in range(N):
        prefix = f"decoder.layers.{layer}."
        for norm in ("self_attn_norm", "feed_forward_norm"):
            for name in ("gamma", "beta"):
                shapes.append((prefix + f"{norm}.layer_norm.{name}", (d_model,)))
        for weight in ("W_Q", "W_K", "W_V", "W_O"):
            shapes.append((prefix + f"self_attn.{weight}.W", (d_model, d_model)))
        for bias in ("W_Q", "W_V", "W_O"):  # no W_K.b
            shapes.append((prefix + f"self_attn.{bias}.b", (d_model,)))
        shapes += [
            (prefix + "feed_forward.W_1.W", (d_model, d_ff)),
            (prefix + "feed_forward.W_1.b", (d_ff,)),
            (prefix + "feed_forward.W_2.W", (d_ff, d_model)),
            (prefix + "feed_forward.W_2.b", (d_model,)),
        ]
    shapes += [("decoder.final_norm.gamma", (d_model,)), ("decoder.final_norm.beta", (d_model,))]
    if not tied:
        shapes.append(("output_projection.W", (d_model, vocab_size)))
    shapes.append(("output_projection.b", (vocab_size,)))
    return shapes


def parameter_count_by_shapes(*sizes):
    """The sum of the sizes of ``parameter_shapes(*sizes)``: an exact int."""
    return sum(math.prod(shape) for _, shape in parameter_shapes(*sizes))


def decoder_only_parameter_count_cases(rng):
    def case(name, vocab_size, d_model, h, N, d_ff, max_len, tied, learned):
        args = (vocab_size, d_model, h, N, d_ff, max_len, tied, learned)
        sizes = (
            f"vocab_size={vocab_size}, d_model={d_model}, h={h}, N={N}, d_ff={d_ff}, "
            f"max_len={max_len}, tied={tied}, learned={learned}"
        )
        return Case(name, sizes, args, parameter_count_by_shapes(*args))

    def draw():
        """Random small sizes: d_model a multiple of h, d_ff not a multiple of d_model."""
        h = int(rng.integers(2, 5))
        d_model = h * int(rng.integers(2, 9))
        return (
            int(rng.integers(5, 200)),
            d_model,
            h,
            int(rng.integers(2, 5)),
            int(rng.integers(3, 100)),
            int(rng.integers(4, 64)),
        )

    d_model, h, N = GPT2_SIZES["small"]
    d_xl, h_xl, N_xl = GPT2_SIZES["xl"]
    return [
        case("random, tied, learned positions", *draw(), True, True),
        case("random, untied", *draw(), False, True),
        case("random, sinusoidal positions", *draw(), True, False),
        case("random, untied, sinusoidal", *draw(), False, False),
        case("one layer, one head", *draw()[:1], 8, 1, 1, 32, 16, True, True),
        case("d_k = 1 (h = d_model)", *draw()[:1], 6, 6, 2, 24, 10, True, True),
        case("GPT-2 small", GPT2_VOCAB, d_model, h, N, 4 * d_model, GPT2_CONTEXT, True, True),
        case("GPT-2 XL", GPT2_VOCAB, d_xl, h_xl, N_xl, 4 * d_xl, GPT2_CONTEXT, True, True),
    ]


def check_decoder_only_parameter_count(fn, quiet=False, seed=None):
    """fn(vocab_size, d_model, h, N, d_ff, max_len, tied, learned) -> the
    exact number of parameters of minitrans's pre-norm decoder-only model."""
    return run_checker(
        "decoder-only parameter count",
        fn,
        decoder_only_parameter_count_cases,
        "per layer: two LayerNorms (2 d_model each), 4 d_model^2 for W_Q, W_K, W_V, W_O "
        "whatever h is, 3 d_model attention biases (no key bias), 2 d_model d_ff + d_ff + "
        "d_model for the feed-forward network; then one final LayerNorm, the embedding "
        "V d_model, max_len d_model more only for learned positions, the output bias V, "
        "and the output matrix d_model V only when it is not tied",
        quiet,
        seed,
    )


CHECKERS = {"decoder_only_parameter_count": check_decoder_only_parameter_count}

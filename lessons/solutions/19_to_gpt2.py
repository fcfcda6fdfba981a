"""Solution to the exercise of lesson 19 (19_to_gpt2): the number of
parameters of a pre-norm decoder-only model, from its sizes alone."""


def decoder_only_parameter_count(vocab_size, d_model, h, N, d_ff, max_len, tied, learned):
    """The exact parameter count of minitrans's DecoderOnlyLM with pre_norm=True.

    h does not appear: however many heads, W_Q, W_K, W_V and W_O are each
    d_model x d_model. The key projection has no bias (lesson 7).
    """
    layer_norm = 2 * d_model  # gamma and beta
    attention = 4 * d_model * d_model + 3 * d_model  # W_Q, W_K, W_V, W_O; b_Q, b_V, b_O
    feed_forward = d_model * d_ff + d_ff + d_ff * d_model + d_model  # W_1, b_1, W_2, b_2
    layer = layer_norm + attention + layer_norm + feed_forward
    embedding = vocab_size * d_model + (max_len * d_model if learned else 0)
    output = vocab_size + (0 if tied else d_model * vocab_size)  # bias; matrix unless tied
    return embedding + N * layer + layer_norm + output  # + the final LayerNorm

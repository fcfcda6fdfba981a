"""Solution to the exercise of lesson 23 (23_loading_pretrained_weights):
Meta's rotary layout of W_Q or W_K turned into Hugging Face's."""


def neighbours_to_halves(W, heads):
    """W (d_in, heads * d_k) whose columns, head by head, pair neighbours
    (2i, 2i + 1), returned with pair i in columns (i, i + d_k/2)."""
    d_in, width = W.shape
    pairs = W.reshape(d_in, heads, width // heads // 2, 2)  # [.., head, i, first or second]
    return pairs.swapaxes(2, 3).reshape(d_in, width)  # [.., head, first or second, i]

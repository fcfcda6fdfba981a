"""The exercise of lesson 23 (loading pretrained weights): a projection W_Q or
W_K whose rotary pairs are neighbours, as Meta's Llama checkpoints store
them, reordered into Hugging Face's layout, whose pairs are (i, i + d_k/2),
as ``convert_llama_weights_to_hf.py`` in ``transformers`` reorders them.

    from minitrans_course.exercises_pretrained import check_neighbours_to_halves

    def my_neighbours_to_halves(W, heads):
        ...
    check_neighbours_to_halves(my_neighbours_to_halves)
"""

import numpy as np

from minitrans_course.exercise_checker import make_case, normal, run_checker


def neighbours_to_halves(W, heads):
    """W (d_in, heads * d_k), minitrans's layout, each head's rotary pairs in
    columns (2i, 2i + 1), with each head's columns moved one at a time so that
    pair i sits in columns (i, i + d_k/2)."""
    W = np.asarray(W)
    d_k = W.shape[1] // heads
    out = np.empty_like(W)
    for head in range(heads):
        start = head * d_k
        for i in range(d_k // 2):
            out[:, start + i] = W[:, start + 2 * i]
            out[:, start + i + d_k // 2] = W[:, start + 2 * i + 1]
    return out


def neighbours_to_halves_cases(rng):
    def case(name, d_in, heads, d_k, dtype=np.float64):
        W = normal(rng, (d_in, heads * d_k), dtype)
        sizes = f"W ({d_in}, {heads * d_k}), heads={heads}, d_k={d_k}"
        return make_case(name, sizes, (W, heads), neighbours_to_halves, dtype)

    d_in = int(rng.integers(3, 9))
    heads, d_k = int(rng.integers(2, 5)), 2 * int(rng.integers(3, 6))
    return [
        case("several heads", d_in, heads, d_k),
        case("one head", d_in, 1, d_k),
        case("d_k = 2: one pair, nothing moves", d_in, heads, 2),
        case("d_k = 8", d_in, 2, 8),
        case("W_K: 2 key/value heads", d_in, 2, d_k),
        case("a single input feature", 1, heads, d_k),
        case("float32", d_in, heads, d_k, np.float32),
    ]


def check_neighbours_to_halves(fn, quiet=False, seed=None):
    """fn(W, heads) -> W with each head's columns reordered from Meta's rotary
    pairs (2i, 2i + 1) to Hugging Face's (i, i + d_k/2); W (d_in, heads * d_k)."""
    return run_checker(
        "Meta's rotary layout to Hugging Face's", fn, neighbours_to_halves_cases,
        "work head by head: W.reshape(d_in, heads, d_k // 2, 2) holds pair i of a head at "
        "[:, head, i, :]; bring the last axis (first or second of the pair) before i with "
        ".swapaxes(2, 3), then reshape back to (d_in, heads * d_k): column i takes old "
        "column 2i, column i + d_k/2 old column 2i + 1", quiet, seed)


CHECKERS = {"neighbours_to_halves": check_neighbours_to_halves}

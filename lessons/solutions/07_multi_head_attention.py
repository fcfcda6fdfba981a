"""Solutions to the exercises of lesson 7 (multi-head attention): splitting
the features into heads and merging them back, checked by ``check_split_heads``
and ``check_merge_heads`` in ``minitrans_course.exercises_masks_heads``."""


def split_heads(x, h):
    """(B, T, d_model) -> (B, h, T, d_k), d_k = d_model / h: head i takes
    features i*d_k .. (i+1)*d_k of every position."""
    B, T, d_model = x.shape
    return x.reshape(B, T, h, d_model // h).swapaxes(1, 2)   # (B, T, h, d_k) -> (B, h, T, d_k)


def merge_heads(heads):
    """(B, h, T, d_k) -> (B, T, h * d_k): the heads side by side again."""
    B, h, T, d_k = heads.shape
    return heads.swapaxes(1, 2).reshape(B, T, h * d_k)       # (B, T, h, d_k) first

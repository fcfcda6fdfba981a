"""Solution to the exercise of lesson 6 (masks): the decoder's self-attention
mask, checked by ``minitrans_course.exercises_masks_heads.check_decoder_mask``."""

import numpy as np


def decoder_mask(ids, pad_id):
    """(B, T, T) boolean, True where query i may attend to key j: j <= i
    (causal) and ids[b, j] is not padding. ids: (B, T) token ids."""
    T = ids.shape[1]
    causal = np.tril(np.ones((T, T), dtype=bool))         # (T, T), the diagonal included
    real_keys = (ids != pad_id)[:, None, :]               # (B, 1, T): padding hides keys
    return causal & real_keys                             # broadcasts to (B, T, T)

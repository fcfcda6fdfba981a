"""Solution to the exercise of lesson 4 (04_positional_encoding): the
sinusoidal positional-encoding table of the paper, §3.5.

Check it with ``minitrans_course.exercises.check_positional_encoding(positional_encoding)``.
"""

import numpy as np


def positional_encoding(max_len, d_model):
    """The (max_len, d_model) table

        PE[pos, 2i]     = sin(pos / 10000^(2i / d_model))
        PE[pos, 2i + 1] = cos(pos / 10000^(2i / d_model))

    Feature j belongs to pair i with 2i = j - (j mod 2), so the sine and the
    cosine of a pair share one frequency. An odd d_model ends with a sine
    that has no cosine partner.
    """
    position = np.arange(max_len, dtype=float)[:, None]         # (max_len, 1)
    feature = np.arange(d_model)                                 # (d_model,)
    two_i = (feature - feature % 2).astype(float)                # 0, 0, 2, 2, 4, 4, ...
    angle = position / 10000.0 ** (two_i / d_model)              # (max_len, d_model)
    return np.where(feature % 2 == 0, np.sin(angle), np.cos(angle))

"""Solution to the exercise of lesson 1 (01_setup_and_backends): the backward
of a Linear layer, y = x W + b, in plain NumPy."""

import numpy as np


def linear_backward(x, W, dy):
    """x (..., d_in), W (d_in, d_out), dy (..., d_out) -> (dx, dW, db).

    dx = dy W^T keeps x's shape. For dW and db every position counts once,
    whatever axes hold them: flatten to rows first."""
    dx = dy @ W.T                                      # (..., d_in)
    rows_x = x.reshape(-1, x.shape[-1])                # (N, d_in)
    rows_dy = dy.reshape(-1, dy.shape[-1])             # (N, d_out)
    dW = rows_x.T @ rows_dy                            # (d_in, d_out)
    db = rows_dy.sum(axis=0)                           # (d_out,)
    return dx, dW, np.asarray(db)

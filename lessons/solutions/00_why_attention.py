"""Solution to the exercise of lesson 0 (00_why_attention): the backward of a
recurrent layer through time, in plain NumPy."""

import numpy as np


def rnn_backward(x, W_x, W_h, H, dH):
    """The gradients of sum(H * dH) for h_t = tanh(x_t W_x + h_{t-1} W_h + b).

    x: (B, T, d_in), W_x: (d_in, d_h), W_h: (d_h, d_h), H: (B, T, d_h) the
    states of the forward, dH: (B, T, d_h). Returns dx (B, T, d_in),
    dW_x (d_in, d_h), dW_h (d_h, d_h), db (d_h,).
    """
    B, T, d_h = H.shape
    dA = np.zeros_like(H)                   # da_t for every step
    carried = np.zeros((B, d_h), H.dtype)   # what step t+1 sends back to h_t
    dW_h = np.zeros_like(W_h)
    for t in reversed(range(T)):            # step t needs step t+1's gradient
        da = (dH[:, t] + carried) * (1 - H[:, t] ** 2)    # tanh' = 1 - h^2
        dA[:, t] = da
        if t > 0:                           # h_{-1} = 0 adds nothing to dW_h
            dW_h += H[:, t - 1].T @ da
        carried = da @ W_h.T
    dx = dA @ W_x.T                                        # (B, T, d_in)
    dW_x = x.reshape(-1, x.shape[-1]).T @ dA.reshape(-1, d_h)
    return dx, dW_x, dW_h, dA.sum(axis=(0, 1))

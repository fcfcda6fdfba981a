"""Solution to the exercise of lesson 20 (20_checking_against_pytorch):
minitrans's attention projections in the layout of
torch.nn.MultiheadAttention, in plain NumPy."""

import numpy as np


def torch_in_proj(W_Q, W_K, W_V, b_Q, b_V):
    """Each W (d, d) multiplies on the right in minitrans (x W); nn.Linear
    keeps the transpose and stacks the three: in_proj_weight (3d, d) is
    [W_Q^T; W_K^T; W_V^T], in_proj_bias (3d,) is [b_Q; 0; b_V]."""
    weight = np.concatenate([W_Q.T, W_K.T, W_V.T], axis=0)
    bias = np.concatenate([b_Q, np.zeros_like(b_Q), b_V])
    return weight, bias

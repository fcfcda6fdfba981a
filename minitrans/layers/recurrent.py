"""A recurrent layer (Elman RNN): what the Transformer replaced (lesson 0).

Not part of Figure 1. It is here so that lesson 0 can measure, on a layer
written and gradient-checked like the others, the two weaknesses the paper's
section 1 names: its states must be computed one time step after another,
and a gradient travelling back through many steps shrinks or grows
geometrically (Table 1's "sequential operations" and "maximum path length").
"""

from minitrans.core import backend, checks
from minitrans.layers import init
from minitrans.layers.linear import affine_backward
from minitrans.layers.module import Module


class RecurrentLayer(Module):
    """h_t = tanh(x_t W_x + h_{t-1} W_h + b), with h_{-1} = 0, for t = 0 .. T-1.

    Backward (backpropagation through time), with a_t the argument of tanh
    and g_t the gradient reaching h_t, from the output and from step t+1:
        g_t = dH_t + da_{t+1} W_h^T        (g_{T-1} = dH_{T-1})
        da_t = g_t * (1 - h_t^2)
        dW_h += sum over t of h_{t-1}^T da_t
        dW_x += sum over t of x_t^T da_t,  db += sum over t and batch of da_t
        dx_t = da_t W_x^T

    Parameters (Xavier-uniform weights, zero bias):
        W_x: (d_in, d_h)   input to state
        W_h: (d_h, d_h)    state to next state, the same at every step
        b:   (d_h,)

    Inputs:
        x: (B, T, d_in)
    Returns:
        H: (B, T, d_h), every state h_0 .. h_{T-1}
    """

    def __init__(self, d_in, d_h, rng=None):
        super().__init__()
        checks.check_positive_int("d_in", d_in)
        checks.check_positive_int("d_h", d_h)
        self.d_in, self.d_h = d_in, d_h
        rng = backend.host_rng(rng)
        self.add_param("W_x", init.xavier_uniform(rng, d_in, d_h))
        self.add_param("W_h", init.xavier_uniform(rng, d_h, d_h))
        self.add_param("b", init.zeros((d_h,)))

    def forward(self, x):
        checks.check_array("x", x, ndim=3, last_dim=self.d_in, dtype=self.params["W_x"].dtype)
        checks.check_finite("x", x)
        xp = backend.get_xp()
        B, T, _ = x.shape
        # The input's part of every step at once: one (B*T, d_in) x (d_in, d_h) product.
        A_in = (x.reshape(-1, self.d_in) @ self.params["W_x"]).reshape(B, T, self.d_h)
        A_in += self.params["b"]
        H = xp.empty((B, T, self.d_h), dtype=x.dtype)
        h = xp.zeros((B, self.d_h), dtype=x.dtype)  # h_{-1} = 0
        # The loop over time is the algorithm itself, not a shortcut left in:
        # h_t needs h_{t-1}, so T steps run one after another whatever the
        # hardware. This is why recurrent networks are slow to train (the
        # paper's "sequential operations: O(n)").
        for t in range(T):
            h = self.step(A_in[:, t], h)  # (B, d_h)
            H[:, t] = h
        self.cache = (x, H)
        return H

    def step(self, a_in, h_prev):
        """One time step: tanh(a_in + h_prev W_h), a_in = x_t W_x + b (B, d_h),
        h_prev (B, d_h). Returns h_t (B, d_h)."""
        return backend.get_xp().tanh(a_in + h_prev @ self.params["W_h"])

    def backward(self, dH):
        x, H = self.saved()
        checks.check_same_shape("dH", dH, H.shape)
        xp = backend.get_xp()
        B, T, d_h = H.shape
        W_h = self.params["W_h"]
        dA = xp.empty_like(H)  # da_t for every step, (B, T, d_h)
        carried = xp.zeros((B, d_h), dtype=H.dtype)  # da_{t+1} W_h^T, 0 after the last step
        dW_h = xp.zeros_like(W_h)
        # Backwards through time: step t's gradient needs step t+1's.
        for t in reversed(range(T)):
            da = (dH[:, t] + carried) * (1.0 - H[:, t] ** 2)  # tanh'(a_t) = 1 - h_t^2
            dA[:, t] = da
            if t > 0:  # h_{-1} = 0 contributes nothing to dW_h
                dW_h += H[:, t - 1].T @ da
            carried = da @ W_h.T
        # The input's part, for all steps at once, is an affine map's backward.
        dx, dW_x, db = affine_backward(
            x.reshape(-1, self.d_in), self.params["W_x"], dA.reshape(-1, d_h)
        )
        self.grads["W_x"] += dW_x
        self.grads["W_h"] += dW_h
        self.grads["b"] += db
        return dx.reshape(x.shape)

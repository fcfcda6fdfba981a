"""Solutions to the exercises of lesson 10 (the feed-forward network and the
output layer): top-p (nucleus) filtering, checked by
``minitrans_course.exercises.check_top_p``; the feed-forward network's backward
and the label-smoothed loss's gradient, checked by
``check_feedforward_backward`` and ``check_loss_backward`` in
``minitrans_course.exercises_output``."""

import numpy as np


def top_p(probs, p):
    """Keep, in each row of probs (B, V), the most probable tokens while the
    mass before them (in descending order) is < p; zero the rest; renormalise."""
    order = np.argsort(-probs, axis=-1, kind="stable")            # most probable first
    sorted_probs = np.take_along_axis(probs, order, axis=-1)
    mass_before = np.cumsum(sorted_probs, axis=-1) - sorted_probs
    keep_sorted = mass_before < p                                 # the first token is always kept
    keep = np.zeros_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, axis=-1)          # back to the original order
    kept = np.where(keep, probs, 0.0)
    return kept / kept.sum(axis=-1, keepdims=True)


def feedforward_backward(x, W1, b1, W2, b2, dy):
    """(dx, dW1, db1, dW2, db2) of y = max(0, x W1 + b1) W2 + b2.

    x, dy: (..., d), for example (N, d) or (B, T, d); W1 (d, d_ff), b1 (d_ff,),
    W2 (d_ff, d), b2 (d,). The ReLU passes the gradient where its input is
    > 0, not at 0.
    """
    a = x @ W1 + b1                                    # (..., d_ff), recomputed
    r = np.maximum(a, 0)
    dr = dy @ W2.T                                     # (..., d_ff)
    da = dr * (a > 0)

    def rows(t):                                       # (..., n) -> (N, n): sum every position
        return t.reshape(-1, t.shape[-1])

    dW2, db2 = rows(r).T @ rows(dy), rows(dy).sum(axis=0)
    dW1, db1 = rows(x).T @ rows(da), rows(da).sum(axis=0)
    return da @ W1.T, dW1, db1, dW2, db2


def loss_backward(logits, targets, pad_id, eps):
    """dlogits (B, T, V) of the label-smoothed cross-entropy averaged over the
    targets that are not pad_id: (softmax(logits) - q) / n, with
    q = (1 - eps) one_hot(target) + eps / V and n the number of real targets;
    rows whose target is pad_id get 0."""
    V = logits.shape[-1]
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)                                # softmax
    q = (1 - eps) * (targets[..., None] == np.arange(V)) + eps / V       # smoothed targets
    real = (targets != pad_id)[..., None]                                # (B, T, 1)
    return (p - q) * real / max(int(real.sum()), 1)

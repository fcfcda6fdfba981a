"""Solution to the exercise of lesson 10 (the feed-forward network and the
output layer): top-p (nucleus) filtering, checked by
``minitrans.tools.exercises.check_top_p``."""

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

"""Solution to the exercise of lesson 14 (14_training_copy_and_translation):
one step of beam search, in plain NumPy."""

import numpy as np


def beam_search_step(log_prob, step_log_probs, finished, lengths, alpha, pad_id):
    """Extend each sentence's K beams by every token and keep the K best.

    log_prob (B, K): each beam's log P so far (-inf for an unused beam);
    step_log_probs (B, K, V): log p(next token | beam); finished (B, K) bool:
    beams that have produced <eos>; lengths (B, K): their token counts.
    A live beam may take any token but <pad>; a finished beam's only
    continuation is <pad>, at cost 0, and it does not grow. Candidates are
    ranked by log P / ((5 + new length) / 6) ** alpha, ties to the lower
    index k * V + v (a stable sort). Returns (new_log_prob, parent, token),
    each (B, K), best first: the log-probabilities, not the ranking scores.
    """
    B, K, V = step_log_probs.shape
    is_pad = np.arange(V) == pad_id
    live = np.where(is_pad, -np.inf, step_log_probs)  # (B, K, V)
    only_pad = np.where(is_pad, 0.0, -np.inf)  # (V,)
    continuation = np.where(finished[:, :, None], only_pad, live)
    candidates = log_prob[:, :, None] + continuation  # (B, K, V)
    new_lengths = lengths + ~finished  # finished beams keep theirs
    penalty = ((5.0 + new_lengths) / 6.0) ** alpha  # (B, K)
    ranking = (candidates / penalty[:, :, None]).reshape(B, K * V)
    best = np.argsort(-ranking, axis=-1, kind="stable")[:, :K]  # (B, K) flat indices
    new_log_prob = np.take_along_axis(candidates.reshape(B, K * V), best, axis=-1)
    return new_log_prob, best // V, best % V

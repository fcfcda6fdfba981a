"""The loop every decoded token goes through, for greedy, sample and generate.

A model's ``feed`` gives the next token's logits; the loop chooses, writes
and feeds back, until every row has finished. What lasts from one token to
the next (the tokens written so far, their logits, the ban on <pad>, the
recomputing path's prefix) is made once per decode and filled in place: a
token allocates nothing that grows with the sentence, and waits for the GPU
once, to ask whether every row has finished.
"""

from minitrans.core import backend, checks
from minitrans.core.fusion import fused


def decode_loop(feed, first_tokens, max_steps, choose, eos_id, pad_id, keep_logits=False):
    """The loop of greedy, sample and generate: feed(tokens (B,)) -> logits
    (B, V) of the next token; choose(logits with <pad> at -inf) -> (B,) ids.
    Returns tokens (B, L) and the raw logits (B, L, V), or None.

    The caller has checked the source or prompt and the first tokens; every
    later token is one the model chose, so the model need not check them
    again (``checks.inputs_checked``), and a token costs one wait for the
    GPU: whether every row has finished. What a token writes (its column of
    the output, its logits, the ban on <pad>) lives in arrays made once,
    at the first token, and filled in place. pad_id None: nothing banned,
    finished rows filled with eos_id; eos_id None: no row ever finishes."""
    xp = backend.get_xp()
    tokens, finished = first_tokens, xp.zeros(first_tokens.shape, dtype=bool)
    filler = finished_filler(eos_id, pad_id)
    outputs = xp.empty((tokens.shape[0], max_steps), dtype=tokens.dtype)
    for t in range(max_steps):
        with checks.inputs_checked():
            logits = feed(tokens)
        if t == 0:  # the vocabulary's size is known now
            is_pad = None if pad_id is None else xp.arange(logits.shape[-1]) == pad_id
            all_logits = (xp.empty((*outputs.shape, logits.shape[-1]), dtype=logits.dtype)
                          if keep_logits else None)
        banned = logits if pad_id is None else xp.where(is_pad, -xp.inf, logits)
        chosen = choose(banned).astype(tokens.dtype, copy=False)
        if keep_logits:
            all_logits[:, t] = logits
        if eos_id is None:  # no row ever finishes
            outputs[:, t] = tokens = chosen
            continue
        column, finished, tokens = finish_rows(chosen, finished, eos_id, filler)
        outputs[:, t] = column
        if bool(finished.all()):
            break
    return outputs[:, : t + 1], (all_logits[:, : t + 1] if keep_logits else None)


@fused("finish_rows")
def finish_rows(chosen, finished, eos_id, filler):
    """What the tokens ``chosen`` (B,) do to their rows, which had
    ``finished`` (B,) before them: the column of the output (the filler in
    rows finished before), which rows have finished now (with this token's
    <eos>), and the tokens fed next (<eos> in finished rows, never <pad>).
    Element-wise over the batch: one kernel on a device, not five."""
    xp = backend.get_xp()
    column = xp.where(finished, filler, chosen)
    finished_now = finished | (chosen == eos_id)
    return column, finished_now, xp.where(finished_now, eos_id, chosen)


def recomputing_feed(prefix_logits, seen, max_steps):
    """A feed that writes tokens after the prefix ``seen`` (B, t0), in one
    buffer made for all max_steps of them, and reruns the model on all of
    it: O(t) work per step where the cache does O(1)."""
    xp = backend.get_xp()
    prefix = xp.empty((seen.shape[0], seen.shape[1] + max_steps), dtype=seen.dtype)
    prefix[:, : seen.shape[1]] = seen
    length = [seen.shape[1]]

    def feed(tokens):
        prefix[:, length[0]] = tokens
        length[0] += 1
        return prefix_logits(prefix[:, : length[0]])

    return feed


def finished_filler(eos_id, pad_id):
    """What a finished row holds after its <eos>: pad_id, or eos_id without one."""
    return eos_id if pad_id is None else pad_id

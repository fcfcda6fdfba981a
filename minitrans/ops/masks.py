"""Attention masks: True where a query may attend to a key.

Masks are built with the backend's namespace, so they live on the same device
as the scores they are applied to.
"""

from minitrans.core import backend, checks, fusion

# On a device: backend name -> the largest causal mask made there so far, a
# constant that every shorter one is a corner of. Only ``decoder_mask`` reads
# it, and never hands it out: what it returns is a fresh array.
_causal_masks = {}


def causal_mask(length):
    """(T, T) lower-triangular mask: position i sees positions 0..i only.

    Used in the decoder's self-attention so that predicting token i cannot
    look at the tokens it is meant to predict.
    """
    checks.check_positive_int("length", length)
    xp = backend.get_xp()
    return xp.tril(xp.ones((length, length), dtype=bool))


def padding_mask(ids, pad_id):
    """(B, 1, T) mask that hides the keys that are padding.

    It broadcasts over the queries: no query may attend to a padding key.
    ``pad_id=None`` (a model without a padding token, as GPT-2 and Llama)
    hides none: every entry is True. (Written out, not ``ids != None``,
    which NumPy answers element by element but other array types need not.)
    """
    checks.check_array("ids", ids, ndim=2)
    if pad_id is None:
        return backend.get_xp().ones((ids.shape[0], 1, ids.shape[1]), dtype=bool)
    return (ids != pad_id)[:, None, :]


def decoder_mask(ids, pad_id):
    """(B, T, T) mask of the decoder's self-attention: causal and no padding
    (only causal with ``pad_id=None``)."""
    checks.check_array("ids", ids, ndim=2)
    if backend.on_device():
        return decoder_mask_on_device(ids, pad_id)
    return padding_mask(ids, pad_id) & causal_mask(ids.shape[1])


def decoder_mask_on_device(ids, pad_id):
    """``decoder_mask`` in one kernel, where each operation is a launch: the
    causal part is a corner of the kept constant (``shared_causal_mask``), and
    the padding test and the ``&`` are fused (``unpadded_and_causal``)."""
    batch, length = ids.shape
    causal = shared_causal_mask(length)
    if pad_id is None:  # every row the same causal mask: one copy
        return backend.get_xp().broadcast_to(causal, (batch, length, length)).copy()
    return unpadded_and_causal(ids[:, None, :], pad_id, causal)


def shared_causal_mask(length):
    """The (T, T) causal mask as a view of one kept on this backend, made
    again (larger) only when a longer one is asked for: a corner of a
    lower-triangular mask is the shorter one. Read only: it is shared."""
    name = backend.backend_name()
    kept = _causal_masks.get(name)
    if kept is None or kept.shape[0] < length:
        kept = _causal_masks[name] = causal_mask(length)
    return kept[:length, :length]


@fusion.fused("decoder_mask")
def unpadded_and_causal(key_ids, pad_id, causal):
    """(B, 1, T) key ids and a (T, T) causal mask -> (B, T, T): key not padding, and causal."""
    return (key_ids != pad_id) & causal

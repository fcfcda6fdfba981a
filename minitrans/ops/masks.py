"""Attention masks: True where a query may attend to a key.

Masks are built with the backend's namespace, so they live on the same device
as the scores they are applied to.
"""

from minitrans.core import backend, checks


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
    return padding_mask(ids, pad_id) & causal_mask(ids.shape[1])

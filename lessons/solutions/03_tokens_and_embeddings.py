"""Solutions to the exercises of lesson 3 (tokens and embeddings): one
byte-pair-encoding merge, checked by ``check_bpe_merge``, and the embedding's
backward, checked by ``check_embedding_backward`` (both in
``minitrans_course.exercises_embedding``)."""

import collections

import numpy as np


def bpe_merge(words, counts):
    """The most frequent adjacent pair of symbols, and the words with it merged.

    words: a list of words, each a tuple of symbols (strings); counts: how
    often each word occurs. A pair is counted at every place it occurs, so
    "a a a" holds (a, a) twice; ties go to the pair that sorts last, as
    minitrans's ``learn_merges`` and subword-nmt do. Returns (pair, merged
    words), each merged word a tuple, merged left to right.
    """
    pairs = collections.Counter()
    for word, count in zip(words, counts):
        for pair in zip(word, word[1:]):
            pairs[pair] += count
    best = max(pairs, key=lambda pair: (pairs[pair], pair))  # count first, then the last pair
    merged = []
    for word in words:
        symbols, i = [], 0
        while i < len(word):
            if word[i : i + 2] == best:  # a tuple slice: the pair here
                symbols.append(word[i] + word[i + 1])
                i += 2  # both symbols are used up
            else:
                symbols.append(word[i])
                i += 1
        merged.append(tuple(symbols))
    return best, merged


def embedding_backward(ids, dout, vocab_size):
    """dW_E (vocab_size, d_model) of y = sqrt(d_model) * W_E[ids].

    ids (B, T) ints, dout (B, T, d_model). Each row v of dW_E is the sum of
    dout over the positions holding v, times sqrt(d_model); <pad> is a row
    like any other.
    """
    d_model = dout.shape[-1]
    dW = np.zeros((vocab_size, d_model), dtype=dout.dtype)
    np.add.at(dW, ids.reshape(-1), dout.reshape(-1, d_model))  # repeated ids add up
    return dW * np.sqrt(d_model)

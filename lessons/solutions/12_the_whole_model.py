"""Solution to the exercise of lesson 12 (the whole model): the decoder's
input and target for teacher forcing, checked by
``minitrans_course.exercises_output.check_shift_right``."""

import numpy as np


def shift_right(sentences, bos, eos, pad):
    """(decoder_input, decoder_target), two (B, T) int arrays with T the
    longest sentence + 1: input <bos> y_1 .. y_n, target y_1 .. y_n <eos>,
    each padded on the right with ``pad``. sentences: lists of token ids."""
    T = max(len(sentence) for sentence in sentences) + 1
    decoder_input = np.full((len(sentences), T), pad, dtype=np.int64)
    decoder_target = np.full((len(sentences), T), pad, dtype=np.int64)
    for b, sentence in enumerate(sentences):
        decoder_input[b, : len(sentence) + 1] = [bos] + list(sentence)  # shifted right
        decoder_target[b, : len(sentence) + 1] = list(sentence) + [eos]
    return decoder_input, decoder_target

"""Figure 1 put together: the encoder and decoder stacks, the whole
encoder-decoder Transformer, the decoder-only language model, their config
and the key/value cache of decoding."""

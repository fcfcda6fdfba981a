"""The optimisation maths of training: the update rules and their state, the
schedule, clipping, averaging, data parallelism, evaluation and when to stop."""

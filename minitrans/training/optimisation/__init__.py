"""The optimisation maths of training: the optimisers (Adam's equations in
``adam``, with ``flat_state``; SGD; the ``optimizer`` they share), the
schedule, clipping, averaging, data parallelism, evaluation and when to stop."""

"""Training a model: optimisers and the learning-rate schedule, data
parallelism on the CPU, the trainer, checkpoints, held-out evaluation and
the runs that put them together."""

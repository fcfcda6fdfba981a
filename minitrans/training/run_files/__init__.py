"""A training run's files and folder: checkpoints and what they hold, the
run folder and its lock, reading records back, Ctrl-C, progress and plots."""

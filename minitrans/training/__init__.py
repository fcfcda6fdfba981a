"""Training a model, in two households and the modules that join them.

``training.optimisation``: the maths of a step and of a run, no files. The
optimisers (``adam``, with Adam's equations and ``flat_state`` beside them;
``sgd``; ``optimizer``, what every optimiser shares), the learning-rate
schedule, gradient clipping, the weights' moving average, data parallelism
on the CPU, held-out evaluation, and when a run stops or has diverged.

``training.run_files``: what a run writes and reads. Checkpoints (the file,
its records, what a trainer's checkpoint holds), the run folder and its
lock, Ctrl-C, the progress line and the plots.

Here, using both: ``trainer`` (the one training loop) with its
``train_config`` and ``recipe`` (what a kind of run decides: the paper's, or
``finetune``'s for a pretrained model), and ``experiment`` (a run put
together from a task's name or a corpus), ``corpus_defaults`` and
``attention_maps``.
"""

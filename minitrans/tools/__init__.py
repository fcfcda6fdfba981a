"""Tools around the model: the gradient checker and its report, the
lessons' exercise checkers, plots and the ``minitrans`` command."""

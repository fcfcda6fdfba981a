"""The layers of Figure 1, each a class with ``forward`` and ``backward``,
``params`` and ``grads`` (the contract is in ``layers.module``)."""

"""A NumPy array whose matrix products are timed and counted.

The layers write products as ``a @ b``, an operator, which no Python
profiler sees. A model whose arrays are all ``TimedArray`` (``model.
apply_to_arrays(lambda a: a.view(TimedArray))``) computes exactly as before,
and every ``@`` adds its seconds and its floating-point operations
(2 m n k for an (m, k) by (k, n) product, for each matrix of a batch) to the
class's totals. Results of other operations stay TimedArray, since NumPy
keeps the subclass of an operand, so the whole forward, backward and
optimiser step are covered.
"""

import time

import numpy as np


class TimedArray(np.ndarray):
    seconds = 0.0
    flops = 0

    @classmethod
    def reset(cls):
        cls.seconds, cls.flops = 0.0, 0

    def __matmul__(self, other):
        return _timed_matmul(self, other)

    def __rmatmul__(self, other):
        return _timed_matmul(other, self)


def _timed_matmul(a, b):
    a, b = np.asarray(a), np.asarray(b)  # plain views: the product itself runs as NumPy's
    start = time.perf_counter()
    out = a @ b
    TimedArray.seconds += time.perf_counter() - start
    TimedArray.flops += 2 * out.size * a.shape[-1]
    return out.view(TimedArray)

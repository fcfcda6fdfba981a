"""Arrays that a process and the processes it forks share: the memory of
the worker processes of data parallelism (``worker_processes``).

fork() gives the child a copy of the parent's memory, and from then on the
two copies are apart: what one writes, the other does not see. Memory
mapped with MAP_SHARED is the exception, one memory seen by both, and an
anonymous mapping of it (``mmap.mmap(-1, size)``) needs no file. NumPy
arrays can be views of it (``np.frombuffer``): the parameters a worker
reads, the gradients it writes.
"""

import mmap

import numpy as np


class SharedArrays:
    """Memory that a parent and its forked children share: one anonymous
    shared mapping, and in it a view for each of ``slots``, (dict, key)
    pairs: ``dict[key]``'s shape and dtype. Two slots that hold the same
    array (a tied weight, held by two layers) share one view."""

    def __init__(self, slots):
        first = {}  # id(array) -> the first slot that holds it
        for holder, key in slots:
            first.setdefault(id(holder[key]), (holder, key))
        arrays = [holder[key] for holder, key in first.values()]
        self.memory = mmap.mmap(-1, max(1, sum(array.nbytes for array in arrays)))
        views, offset = {}, 0  # id(array) -> its view
        for array in arrays:
            views[id(array)] = np.frombuffer(self.memory, dtype=array.dtype, count=array.size,
                                             offset=offset).reshape(array.shape)
            offset += array.nbytes
        # (dict, key, view, the slot that first holds the array, whose value is written)
        self.slots = [(holder, key, views[id(holder[key])], first[id(holder[key])])
                      for holder, key in slots]

    def view(self, position):
        """The view of the slot at ``position``."""
        return self.slots[position][2]

    def current(self):
        """Whether each slot still holds a NumPy array of its view's shape
        and dtype, and slots that shared an array still share one."""
        return all(isinstance(holder[key], np.ndarray) and holder[key].shape == view.shape
                   and holder[key].dtype == view.dtype and holder[key] is source[0][source[1]]
                   for holder, key, view, source in self.slots)

    def hold(self):
        """Put the views in the slots, in place of the arrays they hold,
        each view given its array's values first: the first call, and after
        an array was replaced (by a checkpoint load, say). From then on the
        slots hold the shared memory itself, and whatever writes into their
        arrays in place (an optimiser's step) writes into it."""
        for holder, key, view, (source, source_key) in self.slots:
            if holder[key] is view:
                continue
            if source is holder and source_key == key:  # once per array: its first slot
                np.copyto(view, holder[key])
            holder[key] = view

"""Array operations that several layers share: softmax, sums along an axis,
masks. Pure functions of arrays, no parameters."""

"""Bridges from minitrans to other libraries.

``minitrans.interop.torch`` exchanges weights with PyTorch: the same model as
``torch.nn.Transformer``, for checking every gradient against autograd, and
for carrying a model trained here on to PyTorch when it outgrows NumPy. It
needs PyTorch (``pip install "minitrans[torch]"``); importing this package
does not.
"""

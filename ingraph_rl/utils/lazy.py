"""Lazy module import, so that TF-only users never import torch."""

import importlib


class LazyModule:
  """Imports the named module on first attribute access.

  >>> np_lazy = LazyModule("numpy")
  >>> np_lazy.zeros(2).shape
  (2,)
  """

  def __init__(self, name):
    self._name = name
    self._module = None

  def __getattr__(self, attr):
    if self._module is None:
      self._module = importlib.import_module(self._name)
    return getattr(self._module, attr)


torch = LazyModule("torch")
F = LazyModule("torch.nn.functional")

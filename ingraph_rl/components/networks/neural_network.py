"""A stack of layers built from a list spec or from layer components."""

import inspect

from ingraph_rl.components.layers import LAYER_TYPES
from ingraph_rl.core import Component, api
from ingraph_rl.errors import AssemblyError


def layer_from_spec(spec, index, compute_dtype=None, weights_dtype=None):
  """A layer component from `{"type": "dense", "units": 64, ...}` (or the
  component itself). Scopes default to `<type>_<index>`; `compute_dtype`
  and `weights_dtype` are the defaults of the layer types that take them
  (see `layers.precision`)."""
  if isinstance(spec, Component):
    return spec
  if not isinstance(spec, dict) or "type" not in spec:
    raise AssemblyError(
      f"layer spec {index} must be a component or a dict "
      f"with a 'type'; got {spec!r}"
    )
  kwargs = dict(spec)
  kind = kwargs.pop("type")
  if kind not in LAYER_TYPES:
    raise AssemblyError(
      f"layer spec {index}: unknown type {kind!r}; known: {sorted(LAYER_TYPES)}"
    )
  kwargs.setdefault("scope", f"{kind}_{index}")
  layer_type = LAYER_TYPES[kind]
  parameters = inspect.signature(layer_type).parameters
  for name, value in (
    ("compute_dtype", compute_dtype),
    ("weights_dtype", weights_dtype),
  ):
    if value is not None and name in parameters:
      kwargs.setdefault(name, value)
  return layer_type(**kwargs)


class NeuralNetwork(Component):
  """Applies its layers in order. `compute_dtype` (e.g. "bfloat16") is the
  default of the spec'd layers that multiply (conv2d, dense,
  residual_block), `weights_dtype` that of the ones that store weights in
  another dtype (conv2d, dense, residual_block); layer components keep
  their own.

  >>> net = NeuralNetwork([{"type": "dense", "units": 64, "activation": "relu"},
  ...                      {"type": "dense", "units": 2}])
  >>> [layer.scope for layer in net.layers]
  ['dense_0', 'dense_1']
  """

  def __init__(
    self, layers, compute_dtype=None, weights_dtype=None, scope="network"
  ):
    super().__init__(scope=scope)
    if not layers:
      raise AssemblyError(f"'{scope}': a network needs at least one layer")
    self.layers = [
      layer_from_spec(s, i, compute_dtype, weights_dtype)
      for i, s in enumerate(layers)
    ]

  @api
  def call(self, inputs):
    x = inputs
    for layer in self.layers:
      x = layer.call(x)
    return x

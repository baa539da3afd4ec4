"""A stack of layers built from a list spec or from layer components."""

from ingraph_rl.components.layers import LAYER_TYPES
from ingraph_rl.core import Component, api
from ingraph_rl.errors import AssemblyError


def layer_from_spec(spec, index):
  """A layer component from `{"type": "dense", "units": 64, ...}` (or the
  component itself). Scopes default to `<type>_<index>`."""
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
  return LAYER_TYPES[kind](**kwargs)


class NeuralNetwork(Component):
  """Applies its layers in order.

  >>> net = NeuralNetwork([{"type": "dense", "units": 64, "activation": "relu"},
  ...                      {"type": "dense", "units": 2}])
  >>> [layer.scope for layer in net.layers]
  ['dense_0', 'dense_1']
  """

  def __init__(self, layers, scope="network"):
    super().__init__(scope=scope)
    if not layers:
      raise AssemblyError(f"'{scope}': a network needs at least one layer")
    self.layers = [layer_from_spec(s, i) for i, s in enumerate(layers)]

  @api
  def call(self, inputs):
    x = inputs
    for layer in self.layers:
      x = layer.call(x)
    return x

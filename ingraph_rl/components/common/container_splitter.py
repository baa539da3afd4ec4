"""Splits a Dict/Tuple value into its parts, and merges parts back."""

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import AssemblyError, SpaceError
from ingraph_rl.spaces import Dict, Tuple


class ContainerSplitter(Component):
  """`split(inputs)` returns the values at `keys` as a tuple, in order.
  Keys are dict keys (for a Dict) or indices (for a Tuple).

  >>> ContainerSplitter("obs", "mask").keys
  ('obs', 'mask')
  """

  def __init__(self, *keys, scope="container_splitter"):
    super().__init__(scope=scope)
    if not keys:
      raise AssemblyError(f"'{scope}': name at least one key to split out")
    self.keys = keys

  def create_variables(self, input_spaces):
    space = self.expect_space(input_spaces, "inputs", (Dict, Tuple))
    present = (
      list(space.keys()) if isinstance(space, Dict) else list(range(len(space)))
    )
    missing = [k for k in self.keys if k not in present]
    if missing:
      raise SpaceError(
        f"keys {missing} not in the input",
        component=self.path,
        argument="inputs",
        expected=f"a container with keys {list(self.keys)}",
        received=repr(space),
      )

  @api
  def split(self, inputs):
    parts = self._graph_fn_split(inputs)
    return tuple(parts[i] for i in range(len(self.keys)))

  # Pure indexing: the same body serves both backends.
  @graph_fn(neutral=True)
  def _graph_fn_split(self, inputs):
    return tuple(inputs[k] for k in self.keys)


class ContainerMerger(Component):
  """`merge(*inputs)` returns a dict keyed by `keys` (or a tuple when no
  keys are given)."""

  def __init__(self, *keys, scope="container_merger"):
    super().__init__(scope=scope)
    if len(set(keys)) != len(keys):
      raise AssemblyError(f"'{scope}': merge keys repeat: {list(keys)}")
    self.keys = keys

  @api
  def merge(self, *inputs):
    if self.keys and len(inputs) != len(self.keys):
      raise AssemblyError(
        f"'{self.path}'.merge got {len(inputs)} values for keys "
        f"{list(self.keys)}"
      )
    return self._graph_fn_merge(*inputs)

  @graph_fn(neutral=True)
  def _graph_fn_merge(self, *inputs):
    return dict(zip(self.keys, inputs)) if self.keys else tuple(inputs)

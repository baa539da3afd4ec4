"""Weight copying between two components of the same structure (target
networks)."""

import tensorflow as tf

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.core.variables import to_torch_layout
from ingraph_rl.errors import SpaceError
from ingraph_rl.utils.lazy import torch


class Synchronizable(Component):
  """Mixin: adds `sync(values, tau=1.0)`, which sets every variable of this
  component's subtree to `tau * values[path] + (1 - tau) * current`
  (tau=1: hard copy; tau<1: Polyak averaging). `values` is the output of
  another component's `variables()` API with the same structure, or an
  API input of that space (TF layout in every backend):

      class Agent(Component):
        def __init__(self):
          super().__init__(scope="agent")
          self.online = NeuralNetwork(spec, scope="online")
          self.target = SyncNetwork(spec, scope="target")

        @api
        def sync_target(self):
          return self.target.sync(self.online.variables())
  """

  def _check_values(self, values):
    """Same paths and shapes as our variables, else a SpaceError (raised at
    build, when the body first runs)."""
    own = self.subtree_variables()
    got = dict(values) if isinstance(values, dict) else {}
    own_shapes = {p: tuple(v.shape) for p, v in sorted(own.items())}
    got_shapes = {p: tuple(v.shape) for p, v in sorted(got.items())}
    if own_shapes != got_shapes:
      raise SpaceError(
        "sync values do not match this component's variables",
        component=self.path,
        api="sync",
        argument="values",
        expected=own_shapes,
        received=got_shapes,
      )
    return own

  @api
  def sync(self, values, tau=1.0):
    return self._graph_fn_sync(values, tau)

  @graph_fn(needs_subtree=True)
  def _graph_fn_sync(self, values, tau):
    hard = _is_one(tau)
    for path, var in sorted(self._check_values(values).items()):
      # Weights stored in another dtype (`weights_dtype`) cast on load.
      value = tf.cast(values[path], var.dtype)
      var.assign(value if hard else tau * value + (1.0 - tau) * var)
    return tf.constant(True)

  @_graph_fn_sync.torch
  def _graph_fn_sync(self, values, tau):
    hard = _is_one(tau)
    values = _torch_layout(values, self.subtree_variables())
    with torch.no_grad():
      for path, var in sorted(self._check_values(values).items()):
        new = values[path] if hard else tau * values[path] + (1.0 - tau) * var
        var.copy_(new)
    return torch.tensor(True)


def _torch_layout(values, own):
  """`values` in the layout of our torch variables. Another component's
  variables (its `variables()`, inside the graph) have it already; any
  other value came in through an API (a weights space, as `get_weights()`
  returns them) in TF layout and is permuted as its variable is."""
  if not isinstance(values, dict):
    return values  # `_check_values` names the problem.
  out = dict(values)
  for path, value in values.items():
    perm = getattr(own.get(path), "torch_permutation", None)
    if (
      perm is not None
      and not hasattr(value, "torch_permutation")
      and value.dim() == len(perm)
    ):
      out[path] = to_torch_layout(value, perm)
  return out


def _is_one(tau):
  """Whether `tau` is the Python number 1 (a hard copy). A tensor `tau` (an
  API input) always blends: it has no Python truth value in a TF graph."""
  return isinstance(tau, (int, float)) and tau == 1.0

"""Weight copying between two components of the same structure (target
networks)."""

import tensorflow as tf

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import SpaceError
from ingraph_rl.utils.lazy import torch


class Synchronizable(Component):
  """Mixin: adds `sync(values, tau=1.0)`, which sets every variable of this
  component's subtree to `tau * values[path] + (1 - tau) * current`
  (tau=1: hard copy; tau<1: Polyak averaging). `values` is the output of
  another component's `variables()` API with the same structure:

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
      new = values[path] if hard else tau * values[path] + (1.0 - tau) * var
      var.assign(new)
    return tf.constant(True)

  @_graph_fn_sync.torch
  def _graph_fn_sync(self, values, tau):
    hard = _is_one(tau)
    with torch.no_grad():
      for path, var in sorted(self._check_values(values).items()):
        new = values[path] if hard else tau * values[path] + (1.0 - tau) * var
        var.copy_(new)
    return torch.tensor(True)


def _is_one(tau):
  """Whether `tau` is the Python number 1 (a hard copy). A tensor `tau` (an
  API input) always blends: it has no Python truth value in a TF graph."""
  return isinstance(tau, (int, float)) and tau == 1.0

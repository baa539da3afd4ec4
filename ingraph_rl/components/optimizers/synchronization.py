"""Synchronization: moves a copy of weights towards a source every n calls
(a target network; Polyak averaging with tau < 1)."""

import numpy as np
import tensorflow as tf

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.utils.lazy import torch


class Synchronization(Component):
  """`sync(variables, source)` -> {"synced": bool}: on every
  `sync_every`-th call, each variable becomes `tau * source + (1 - tau) *
  variable` (tau=1: a hard copy, DQN's target network; tau=0.005 every
  call: SAC's Polyak averaging). `variables` and `source` are two
  components' `variables()` outputs of the same paths and shapes.
  """

  variable_args = ()

  def __init__(self, sync_every=1, tau=1.0, scope="synchronization"):
    super().__init__(scope=scope)
    if int(sync_every) < 1:
      raise BuildError(f"'{scope}': sync_every must be >= 1, got {sync_every}")
    if not 0.0 < float(tau) <= 1.0:
      raise BuildError(f"'{scope}': tau must be in (0, 1], got {tau}")
    self.sync_every, self.tau = int(sync_every), float(tau)

  def create_variables(self, input_spaces):
    self.calls = self.add_variable("calls", (), np.int64, trainable=False)

  @api
  def sync(self, variables, source):
    return self._graph_fn_sync(variables, source)

  def _check(self, variables, source):
    shapes = [
      {p: tuple(v.shape) for p, v in sorted(dict(x).items())}
      for x in (variables, source)
    ]
    if shapes[0] != shapes[1]:
      raise SpaceError(
        "source does not match the variables",
        component=self.path,
        api="sync",
        argument="source",
        expected=shapes[0],
        received=shapes[1],
      )
    return sorted(variables)

  def _mix(self, var, src):
    return src if self.tau == 1.0 else self.tau * src + (1.0 - self.tau) * var

  @graph_fn
  def _graph_fn_sync(self, variables, source):
    paths = self._check(variables, source)
    calls = self.calls.assign_add(1)
    due = tf.equal(calls % self.sync_every, 0)

    def copy():
      for p in paths:
        var = variables[p]
        var.assign(self._mix(var, tf.cast(source[p], var.dtype)))
      return tf.constant(True)

    return {"synced": tf.cond(due, copy, lambda: tf.constant(False))}

  @_graph_fn_sync.torch
  def _graph_fn_sync(self, variables, source):
    paths = self._check(variables, source)
    with torch.no_grad():
      self.calls += 1
      due = int(self.calls) % self.sync_every == 0
      if due:
        for p in paths:
          var = variables[p]
          var.copy_(self._mix(var, source[p].to(var.dtype)))
    return {"synced": torch.tensor(due)}

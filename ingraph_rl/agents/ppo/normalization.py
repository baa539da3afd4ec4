"""Running mean / variance normalization in the graph, as gymnasium's
`NormalizeObservation` and `NormalizeReward` wrappers do it (CleanRL's
continuous PPO wraps both, clipping the results to +-10): the statistics
are variables, updated by batches with the parallel (Chan et al.) formula,
float64 as gymnasium's `RunningMeanStd` (count starting at 1e-4)."""

import numpy as np
import tensorflow as tf

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.utils.lazy import torch

EPSILON = 1e-8  # gymnasium's, inside the square root.


class RunningMeanStd(Component):
  """Statistics of items of shape `shape`, over the leading (batch) axis.

  APIs:
    normalize(x) -> clip((x - mean) / sqrt(var + 1e-8), +-clip), float32.
    update_normalize(x): the statistics updated with the batch x first
      (NormalizeObservation).
    update_scale(values, x) -> clip(x / sqrt(var + 1e-8), +-clip) after
      updating with `values` (NormalizeReward: `values` the discounted
      returns, `x` the rewards).
  """

  variable_args = ()

  def __init__(self, shape=(), clip=10.0, scope="running_mean_std"):
    super().__init__(scope=scope)
    self.shape, self.clip = tuple(int(d) for d in shape), float(clip)

  def create_variables(self, input_spaces):
    var = self.add_variable
    self.mean = var("mean", self.shape, np.float64, "zeros", trainable=False)
    self.var = var("var", self.shape, np.float64, "ones", trainable=False)
    self.count = var("count", (), np.float64, 1e-4, trainable=False)

  @api
  def normalize(self, x):
    return self._graph_fn_normalize(x)

  @api
  def update_normalize(self, x):
    return self._graph_fn_normalize(x, self._graph_fn_update(x))

  @api
  def update_scale(self, values, x):
    return self._graph_fn_scale(x, self._graph_fn_update(values))

  # --- TF ----------------------------------------------------------------

  @graph_fn
  def _graph_fn_update(self, x):
    x = tf.cast(x, tf.float64)
    batch_mean, batch_var = tf.nn.moments(x, axes=[0])
    n = tf.cast(tf.shape(x)[0], tf.float64)
    delta = batch_mean - self.mean
    total = self.count + n
    m2 = (
      self.var * self.count + batch_var * n + delta**2 * self.count * n / total
    )
    ops = [
      self.mean.assign(self.mean + delta * n / total),
      self.var.assign(m2 / total),
    ]
    with tf.control_dependencies(ops):
      return self.count.assign(total)

  @graph_fn
  def _graph_fn_normalize(self, x, updated=None):
    deps = [] if updated is None else [updated]
    with tf.control_dependencies(deps):
      mean, var = self.mean.read_value(), self.var.read_value()
    out = (tf.cast(x, tf.float64) - mean) / tf.sqrt(var + EPSILON)
    return tf.cast(tf.clip_by_value(out, -self.clip, self.clip), tf.float32)

  @graph_fn
  def _graph_fn_scale(self, x, updated):
    with tf.control_dependencies([updated]):
      var = self.var.read_value()
    out = tf.cast(x, tf.float64) / tf.sqrt(var + EPSILON)
    return tf.cast(tf.clip_by_value(out, -self.clip, self.clip), tf.float32)

  # --- torch -------------------------------------------------------------

  @_graph_fn_update.torch
  def _graph_fn_update(self, x):
    x = x.to(torch.float64)
    batch_mean, batch_var = x.mean(0), x.var(0, unbiased=False)
    n = float(x.shape[0])
    with torch.no_grad():
      delta = batch_mean - self.mean
      total = self.count + n
      m2 = (
        self.var * self.count
        + batch_var * n
        + delta**2 * self.count * n / total
      )
      self.mean.add_(delta * n / total)
      self.var.copy_(m2 / total)
      self.count.copy_(total)
    return self.count.clone()

  @_graph_fn_normalize.torch
  def _graph_fn_normalize(self, x, updated=None):
    out = (x.to(torch.float64) - self.mean) / torch.sqrt(self.var + EPSILON)
    return out.clamp(-self.clip, self.clip).to(torch.float32)

  @_graph_fn_scale.torch
  def _graph_fn_scale(self, x, updated):
    out = x.to(torch.float64) / torch.sqrt(self.var + EPSILON)
    return out.clamp(-self.clip, self.clip).to(torch.float32)

"""Flattens the per-item dims, keeping the batch (and time) dims."""

import math

import tensorflow as tf

from ingraph_rl.core import Component, api, graph_fn


class Flatten(Component):
  """[*leading, d1, d2, ...] -> [*leading, d1*d2*...]."""

  def __init__(self, scope="flatten"):
    super().__init__(scope=scope)

  def create_variables(self, input_spaces):
    # No variables: learns how many leading dims to keep and the flat size
    # (static, so a following Dense sees a known last dim).
    space = self.expect_space(input_spaces, "inputs", min_rank=1)
    self.num_leading = space.num_leading_ranks
    self.flat_size = math.prod(space.shape)

  @api
  def call(self, inputs):
    return self._graph_fn_call(inputs)

  @graph_fn
  def _graph_fn_call(self, inputs):
    shape = tf.shape(inputs)
    return tf.reshape(
      inputs, tf.concat([shape[: self.num_leading], [self.flat_size]], 0)
    )

  @_graph_fn_call.torch
  def _graph_fn_call(self, inputs):
    return inputs.reshape(
      tuple(inputs.shape[: self.num_leading]) + (self.flat_size,)
    )

"""Elementwise clipping to [low, high]."""

import numpy as np
import tensorflow as tf

from ingraph_rl.components.preprocessing._common import check_inputs
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError
from ingraph_rl.utils.lazy import torch


class Clip(Component):
  """min(max(inputs, low), high); dtype kept (bounds are cast to it)."""

  def __init__(self, low, high, scope="clip"):
    super().__init__(scope=scope)
    if not float(low) <= float(high):
      raise BuildError(f"'{scope}': need low <= high, got {low}, {high}")
    self.low, self.high = low, high

  def create_variables(self, input_spaces):
    self.dtype = check_inputs(self, input_spaces).dtype
    if self.dtype.kind in "iu":
      info = np.iinfo(self.dtype)
      if self.low < info.min or self.high > info.max:
        raise BuildError(
          f"'{self.path}': bounds [{self.low}, {self.high}] "
          f"do not fit {self.dtype}"
        )

  @api
  def call(self, inputs):
    return self._graph_fn_call(inputs)

  @graph_fn
  def _graph_fn_call(self, inputs):
    return tf.clip_by_value(
      inputs,
      tf.constant(self.low, inputs.dtype),
      tf.constant(self.high, inputs.dtype),
    )

  @_graph_fn_call.torch
  def _graph_fn_call(self, inputs):
    low = torch.tensor(np.asarray(self.low, self.dtype))
    high = torch.tensor(np.asarray(self.high, self.dtype))
    return torch.minimum(torch.maximum(inputs, low), high)

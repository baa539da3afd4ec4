"""Scaling: `Divide(divisor)` and `Normalize(mean, std)`."""

import numpy as np
import tensorflow as tf

from ingraph_rl.components.preprocessing._common import (
  check_inputs,
  float_dtype,
  torch_dtype,
)
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError
from ingraph_rl.utils.lazy import torch


class Divide(Component):
  """inputs / divisor, e.g. `Divide(255.0)` for uint8 frames -> [0, 1].
  Floating result (float32 for integer inputs)."""

  def __init__(self, divisor, scope="divide"):
    super().__init__(scope=scope)
    if float(divisor) == 0.0:
      raise BuildError(f"'{scope}': divisor must not be 0")
    self.divisor = float(divisor)

  def create_variables(self, input_spaces):
    self.dtype = float_dtype(check_inputs(self, input_spaces).dtype)

  @api
  def call(self, inputs):
    return self._graph_fn_call(inputs)

  @graph_fn
  def _graph_fn_call(self, inputs):
    return tf.cast(inputs, self.dtype) / tf.constant(self.divisor, self.dtype)

  @_graph_fn_call.torch
  def _graph_fn_call(self, inputs):
    return inputs.to(torch_dtype(self.dtype)) / torch.tensor(
      self.divisor, dtype=torch_dtype(self.dtype)
    )


class Normalize(Component):
  """(inputs - mean) / std; `mean` and `std` are scalars or per-channel
  arrays (broadcast against the last axis). Floating result."""

  def __init__(self, mean, std, scope="normalize"):
    super().__init__(scope=scope)
    self.mean = np.asarray(mean, np.float64)
    self.std = np.asarray(std, np.float64)
    if np.any(self.std <= 0):
      raise BuildError(f"'{scope}': std must be > 0")
    if self.mean.ndim > 1 or self.std.ndim > 1:
      raise BuildError(f"'{scope}': mean and std must be scalars or 1-D")

  def create_variables(self, input_spaces):
    space = check_inputs(self, input_spaces)
    self.dtype = float_dtype(space.dtype)
    for name, v in (("mean", self.mean), ("std", self.std)):
      if v.ndim == 1 and (space.rank < 1 or space.shape[-1] != v.shape[0]):
        raise BuildError(
          f"'{self.path}': {name} has {v.shape[0]} entries, "
          f"the inputs' last dim is "
          f"{space.shape[-1] if space.rank else None}"
        )

  @api
  def call(self, inputs):
    return self._graph_fn_call(inputs)

  @graph_fn
  def _graph_fn_call(self, inputs):
    mean = tf.constant(self.mean.astype(self.dtype))
    std = tf.constant(self.std.astype(self.dtype))
    return (tf.cast(inputs, self.dtype) - mean) / std

  @_graph_fn_call.torch
  def _graph_fn_call(self, inputs):
    mean = torch.from_numpy(self.mean.astype(self.dtype))
    std = torch.from_numpy(self.std.astype(self.dtype))
    return (inputs.to(torch_dtype(self.dtype)) - mean) / std

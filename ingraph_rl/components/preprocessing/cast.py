"""dtype conversion, rounding and saturating like cv2's saturate_cast."""

import numpy as np
import tensorflow as tf

from ingraph_rl.components.preprocessing._common import (
  check_inputs,
  torch_dtype,
)
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError
from ingraph_rl.utils.lazy import torch


class Cast(Component):
  """inputs as `dtype`.

  Floating -> integer rounds to nearest (ties to even, as cv2's
  `saturate_cast` / `cvRound`) unless `round=False` (then truncation
  towards zero), and saturates at the integer range: 255.6 -> 255, -3 -> 0
  for uint8. Integer -> integer saturates too. Other casts are plain.
  """

  def __init__(self, dtype, round=True, scope="cast"):
    super().__init__(scope=scope)
    self.dtype = np.dtype(dtype)
    if self.dtype.kind not in "fiu":
      raise BuildError(
        f"'{scope}': cast to float or integer dtypes only, got {self.dtype}"
      )
    self.round = bool(round)

  def create_variables(self, input_spaces):
    self.in_dtype = check_inputs(self, input_spaces).dtype
    self.saturate = self.dtype.kind in "iu"
    if self.saturate:
      lo, hi = np.iinfo(self.dtype).min, np.iinfo(self.dtype).max
      if self.in_dtype.kind in "iu":
        src = np.iinfo(self.in_dtype)
        lo, hi = max(lo, src.min), min(hi, src.max)
      self.bounds = (lo, hi)

  @api
  def call(self, inputs):
    return self._graph_fn_call(inputs)

  @graph_fn
  def _graph_fn_call(self, inputs):
    if not self.saturate:
      return tf.cast(inputs, self.dtype)
    x = inputs
    if self.in_dtype.kind == "f":
      x = tf.round(x) if self.round else x
      return tf.saturate_cast(x, self.dtype)
    lo, hi = self.bounds
    return tf.cast(
      tf.clip_by_value(x, tf.constant(lo, x.dtype), tf.constant(hi, x.dtype)),
      self.dtype,
    )

  @_graph_fn_call.torch
  def _graph_fn_call(self, inputs):
    target = torch_dtype(self.dtype)
    if not self.saturate:
      return inputs.to(target)
    x = inputs
    if self.in_dtype.kind == "f":
      x = torch.round(x) if self.round else torch.trunc(x)
    lo, hi = self.bounds
    return torch.clamp(x, lo, hi).to(target)

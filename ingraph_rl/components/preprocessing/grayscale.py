"""RGB -> grayscale with ITU-R BT.601 luma weights (as cv2.cvtColor)."""

import numpy as np
import tensorflow as tf

from ingraph_rl.components.preprocessing._common import (
  check_inputs,
  float_dtype,
  torch_dtype,
)
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.utils.lazy import torch

# cv2.COLOR_RGB2GRAY: Y = 0.299 R + 0.587 G + 0.114 B.
RGB_WEIGHTS = (0.299, 0.587, 0.114)


class Grayscale(Component):
  """[..., 3] RGB -> [..., 1] (keepdims) or [...] grayscale.

  The result is floating (float32 for integer inputs), not rounded; follow
  with `Cast(np.uint8)` for cv2's uint8 result (it rounds to nearest).
  Needs a batch rank; a time rank is fine.
  """

  def __init__(self, keepdims=True, weights=RGB_WEIGHTS, scope="grayscale"):
    super().__init__(scope=scope)
    self.keepdims = bool(keepdims)
    self.weights = tuple(float(w) for w in weights)

  def create_variables(self, input_spaces):
    space = check_inputs(self, input_spaces, last_dim=len(self.weights))
    self.dtype = float_dtype(space.dtype)

  @api
  def call(self, inputs):
    return self._graph_fn_call(inputs)

  @graph_fn
  def _graph_fn_call(self, inputs):
    x = tf.cast(inputs, self.dtype)
    w = tf.constant(np.asarray(self.weights, self.dtype))
    out = tf.tensordot(x, w, axes=[[-1], [0]])
    return out[..., None] if self.keepdims else out

  @_graph_fn_call.torch
  def _graph_fn_call(self, inputs):
    x = inputs.to(torch_dtype(self.dtype))
    w = torch.as_tensor(np.asarray(self.weights, self.dtype))
    out = torch.tensordot(x, w, dims=([-1], [0]))
    return out[..., None] if self.keepdims else out

"""2-D max pooling. Values are NHWC in both backends; the torch mirror
permutes to NCHW around `F.max_pool2d` and pads TF-'SAME' style with -inf
(the odd pixel at the bottom/right; padding never wins the max)."""

import tensorflow as tf

from ingraph_rl.components.layers import image_ops
from ingraph_rl.components.layers.conv2d import _pair
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError
from ingraph_rl.spaces import FloatBox
from ingraph_rl.utils.lazy import F


class MaxPool2D(Component):
  """Max pooling over per-item [H, W, C] inputs, any leading ranks folded.

  Defaults are IMPALA's: 3x3 window, stride 2, 'same' padding.
  """

  def __init__(
    self, pool_size=3, strides=2, padding="same", scope="max_pool2d"
  ):
    super().__init__(scope=scope)
    if padding not in ("valid", "same"):
      raise BuildError(f"'{scope}': padding must be 'valid' or 'same'")
    self.pool_size = _pair(pool_size)
    self.strides = _pair(strides)
    self.padding = padding

  def create_variables(self, input_spaces):
    # No variables: checks the space and learns the leading ranks.
    space = self.expect_space(input_spaces, "inputs", FloatBox, rank=3)
    self.num_leading = space.num_leading_ranks

  @api
  def call(self, inputs):
    return self._graph_fn_call(inputs)

  @graph_fn
  def _graph_fn_call(self, inputs):
    x, lead = image_ops.tf_fold(inputs, self.num_leading)
    out = tf.nn.max_pool2d(
      x, self.pool_size, self.strides, self.padding.upper()
    )
    return image_ops.tf_unfold(out, lead)

  @_graph_fn_call.torch
  def _graph_fn_call(self, inputs):
    x, lead = image_ops.torch_fold_nchw(inputs, self.num_leading)
    if self.padding == "same":
      x = F.pad(
        x,
        image_ops.same_padding(
          x.shape[2], x.shape[3], self.pool_size, self.strides
        ),
        value=float("-inf"),
      )
    return image_ops.torch_unfold_nchw(
      F.max_pool2d(x, self.pool_size, self.strides), lead
    )

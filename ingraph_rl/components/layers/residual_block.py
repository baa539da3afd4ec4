"""IMPALA's residual block (Espeholt et al. 2018, the "deep" network):

    out = x + conv3x3(relu(conv3x3(relu(x))))

Both convolutions have `filters` output channels, stride 1, 'same' padding
and a bias, so `filters` must equal the input's channels.
"""

import tensorflow as tf

from ingraph_rl.components.layers.conv2d import Conv2D
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import FloatBox
from ingraph_rl.utils.lazy import F


class ResidualBlock(Component):
  """relu -> conv3x3 -> relu -> conv3x3 -> + input, over [..., H, W, C]."""

  def __init__(
    self,
    filters,
    kernel_initializer="glorot_uniform",
    compute_dtype=None,
    weights_dtype=None,
    scope="residual_block",
  ):
    super().__init__(scope=scope)
    self.filters = int(filters)
    conv = dict(
      padding="same",
      kernel_initializer=kernel_initializer,
      compute_dtype=compute_dtype,
      weights_dtype=weights_dtype,
    )
    self.conv_0 = Conv2D(
      filters, 3, activation="relu", scope="conv2d_0", **conv
    )
    self.conv_1 = Conv2D(filters, 3, scope="conv2d_1", **conv)

  def create_variables(self, input_spaces):
    # No own variables: checks that the skip connection fits.
    space = self.expect_space(input_spaces, "inputs", FloatBox, rank=3)
    if space.shape[-1] != self.filters:
      raise SpaceError(
        f"a residual block with {self.filters} filters needs "
        f"{self.filters} input channels",
        component=self.path,
        argument="inputs",
        expected=f"FloatBox with shape (H, W, {self.filters})",
        received=repr(space),
      )

  @api
  def call(self, inputs):
    h = self.conv_1.call(self.conv_0.call(self._graph_fn_relu(inputs)))
    return self._graph_fn_add(inputs, h)

  @graph_fn
  def _graph_fn_relu(self, x):
    return tf.nn.relu(x)

  @_graph_fn_relu.torch
  def _graph_fn_relu(self, x):
    return F.relu(x)

  @graph_fn(neutral=True)
  def _graph_fn_add(self, x, h):
    return x + h

"""Fully connected layer."""

import tensorflow as tf

from ingraph_rl.components.layers import precision
from ingraph_rl.components.layers.activations import (
  check_activation,
  tf_activation,
  torch_activation,
)
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.spaces import FloatBox
from ingraph_rl.utils.lazy import F


class Dense(Component):
  """`activation(inputs @ kernel + bias)` over the last axis; any leading
  ranks pass through.

  The torch mirror stores the kernel as (units, in), torch's layout.
  """

  def __init__(
    self,
    units,
    activation=None,
    use_bias=True,
    kernel_initializer="glorot_uniform",
    compute_dtype=None,
    weights_dtype=None,
    scope="dense",
  ):
    super().__init__(scope=scope)
    self.units = int(units)
    self.activation = check_activation(activation, scope)
    self.use_bias = use_bias
    self.kernel_initializer = kernel_initializer
    # See `precision`: float32 in and out, the product in this dtype;
    # variables in `weights_dtype` (None: the inputs'), which is then the
    # product's dtype too unless `compute_dtype` says otherwise.
    self.weights_dtype = precision.check_compute_dtype(
      weights_dtype, scope, "weights_dtype"
    )
    self.compute_dtype = precision.check_compute_dtype(
      compute_dtype or weights_dtype, scope
    )

  def create_variables(self, input_spaces):
    space = self.expect_space(input_spaces, "inputs", FloatBox, min_rank=1)
    self.kernel = self.add_variable(
      "kernel",
      (space.shape[-1], self.units),
      precision.weights_dtype_of(self.weights_dtype, space.dtype),
      self.kernel_initializer,
      torch_permutation=(1, 0),
    )
    self.bias = (
      self.add_variable(
        "bias",
        (self.units,),
        precision.weights_dtype_of(self.weights_dtype, space.dtype),
      )
      if self.use_bias
      else None
    )

  @api
  def call(self, inputs):
    return self._graph_fn_call(inputs)

  @graph_fn
  def _graph_fn_call(self, inputs):
    x, kernel, bias = precision.tf_cast(
      self.compute_dtype, inputs, self.kernel, self.bias
    )
    if x.shape.rank == 2:
      out = tf.matmul(x, kernel)
    else:
      out = tf.tensordot(x, kernel, axes=[[-1], [0]])
    if bias is not None:
      out = out + bias
    return tf.cast(tf_activation(self.activation)(out), inputs.dtype)

  @_graph_fn_call.torch
  def _graph_fn_call(self, inputs):
    x, kernel, bias = precision.torch_cast(
      self.compute_dtype, inputs, self.kernel, self.bias
    )
    out = torch_activation(self.activation)(F.linear(x, kernel, bias))
    return out.to(inputs.dtype)

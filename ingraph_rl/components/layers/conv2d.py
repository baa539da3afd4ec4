"""2-D convolution. Values are NHWC in both backends (that is what the
spaces say); the torch mirror stores its kernel as (out, in, kh, kw) and
permutes activations to NCHW around `F.conv2d`."""

import tensorflow as tf

from ingraph_rl.components.layers import image_ops, precision
from ingraph_rl.components.layers.activations import (
  check_activation,
  tf_activation,
  torch_activation,
)
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError
from ingraph_rl.spaces import FloatBox
from ingraph_rl.utils.lazy import F


def _pair(x):
  return (int(x), int(x)) if isinstance(x, (int, float)) else tuple(x)


class Conv2D(Component):
  """Conv2D over per-item [H, W, C] inputs with any leading ranks folded."""

  def __init__(
    self,
    filters,
    kernel_size,
    strides=1,
    padding="valid",
    activation=None,
    use_bias=True,
    kernel_initializer="glorot_uniform",
    compute_dtype=None,
    weights_dtype=None,
    scope="conv2d",
  ):
    super().__init__(scope=scope)
    if padding not in ("valid", "same"):
      raise BuildError(f"'{scope}': padding must be 'valid' or 'same'")
    self.filters = int(filters)
    self.kernel_size = _pair(kernel_size)
    self.strides = _pair(strides)
    self.padding = padding
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
    space = self.expect_space(input_spaces, "inputs", FloatBox, rank=3)
    self.num_leading = space.num_leading_ranks
    kh, kw = self.kernel_size
    self.kernel = self.add_variable(
      "kernel",
      (kh, kw, space.shape[-1], self.filters),
      precision.weights_dtype_of(self.weights_dtype, space.dtype),
      self.kernel_initializer,
      torch_permutation=(3, 2, 0, 1),
    )
    self.bias = (
      self.add_variable(
        "bias",
        (self.filters,),
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
    x, lead = image_ops.tf_fold(inputs, self.num_leading)
    x, kernel, bias = precision.tf_cast(
      self.compute_dtype, x, self.kernel, self.bias
    )
    out = tf.nn.conv2d(
      x, kernel, (1,) + self.strides + (1,), self.padding.upper()
    )
    if bias is not None:
      out = tf.nn.bias_add(out, bias)
    out = tf.cast(tf_activation(self.activation)(out), inputs.dtype)
    return image_ops.tf_unfold(out, lead)

  @_graph_fn_call.torch
  def _graph_fn_call(self, inputs):
    x, lead = image_ops.torch_fold_nchw(inputs, self.num_leading)
    if self.padding == "same":
      x = F.pad(
        x,
        image_ops.same_padding(
          x.shape[2], x.shape[3], self.kernel_size, self.strides
        ),
      )
    dtype = x.dtype
    x, kernel, bias = precision.torch_cast(
      self.compute_dtype, x, self.kernel, self.bias
    )
    out = F.conv2d(x, kernel, bias, stride=self.strides)
    return image_ops.torch_unfold_nchw(
      torch_activation(self.activation)(out).to(dtype), lead
    )

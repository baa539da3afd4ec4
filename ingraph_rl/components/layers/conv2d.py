"""2-D convolution. Values are NHWC in both backends (that is what the
spaces say); the torch mirror stores its kernel as (out, in, kh, kw) and
permutes activations to NCHW around `F.conv2d`."""

import math

import tensorflow as tf

from ingraph_rl.components.layers.activations import (check_activation,
                                                      tf_activation,
                                                      torch_activation)
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError
from ingraph_rl.spaces import FloatBox
from ingraph_rl.utils.lazy import F


def _pair(x):
  return (int(x), int(x)) if isinstance(x, (int, float)) else tuple(x)


class Conv2D(Component):
  """Conv2D over per-item [H, W, C] inputs with any leading ranks folded."""

  def __init__(self, filters, kernel_size, strides=1, padding="valid",
               activation=None, use_bias=True,
               kernel_initializer="glorot_uniform", scope="conv2d"):
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

  def create_variables(self, input_spaces):
    space = self.expect_space(input_spaces, "inputs", FloatBox, rank=3)
    self.num_leading = space.num_leading_ranks
    kh, kw = self.kernel_size
    self.kernel = self.add_variable(
        "kernel", (kh, kw, space.shape[-1], self.filters), space.dtype,
        self.kernel_initializer, torch_permutation=(3, 2, 0, 1))
    self.bias = self.add_variable("bias", (self.filters,), space.dtype) \
        if self.use_bias else None

  @api
  def call(self, inputs):
    return self._graph_fn_call(inputs)

  @graph_fn
  def _graph_fn_call(self, inputs):
    lead = tf.shape(inputs)[:self.num_leading]
    x = tf.reshape(inputs, tf.concat([[-1], tf.shape(inputs)[-3:]], 0))
    out = tf.nn.conv2d(x, self.kernel, (1,) + self.strides + (1,),
                       self.padding.upper())
    if self.bias is not None:
      out = tf.nn.bias_add(out, self.bias)
    out = tf_activation(self.activation)(out)
    return tf.reshape(out, tf.concat([lead, tf.shape(out)[1:]], 0))

  @_graph_fn_call.torch
  def _graph_fn_call(self, inputs):
    lead = inputs.shape[:self.num_leading]
    x = inputs.reshape((-1,) + tuple(inputs.shape[-3:])).permute(0, 3, 1, 2)
    if self.padding == "same":
      x = F.pad(x, self._same_padding(x.shape[2], x.shape[3]))
    out = F.conv2d(x, self.kernel, self.bias, stride=self.strides)
    out = torch_activation(self.activation)(out).permute(0, 2, 3, 1)
    return out.reshape(tuple(lead) + tuple(out.shape[1:]))

  def _same_padding(self, h, w):
    """TF's SAME padding (extra pixel at the bottom/right) as F.pad args."""
    pads = []
    for size, k, s in ((w, self.kernel_size[1], self.strides[1]),
                       (h, self.kernel_size[0], self.strides[0])):
      total = max((math.ceil(size / s) - 1) * s + k - size, 0)
      pads += [total // 2, total - total // 2]
    return pads

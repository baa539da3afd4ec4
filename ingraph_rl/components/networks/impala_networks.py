"""IMPALA's networks (Espeholt et al. 2018; deepmind/scalable_agent).

Both take float images [..., H, W, C]; casting uint8 frames and scaling by
1/255 is the caller's preprocessing. scalable_agent also feeds the clipped
reward and the one-hot last action into the LSTM; these networks do not
(concatenate them to the features yourself if needed).
"""

import tensorflow as tf

from ingraph_rl.components.layers import (
  LSTM,
  Conv2D,
  Dense,
  Flatten,
  MaxPool2D,
  ResidualBlock,
)
from ingraph_rl.components.networks.neural_network import NeuralNetwork
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.utils.lazy import F


class ImpalaSmallNetwork(NeuralNetwork):
  """The "shallow" IMPALA torso: conv 16x8x8/4 -> conv 32x4x4/2 (relu,
  'valid') -> flatten -> fc 256 relu. API: `call(inputs)`.

  He-uniform kernels: with Glorot's, the features of Pong frames (mostly
  background, scaled to [0, 1]) start 4x smaller and vary 4x less across
  states, and the agent took longer to start learning.
  """

  def __init__(
    self, compute_dtype=None, weights_dtype=None, scope="impala_small"
  ):
    relu = {"activation": "relu", "kernel_initializer": "he_uniform"}
    super().__init__(
      [
        {
          "type": "conv2d",
          "filters": 16,
          "kernel_size": 8,
          "strides": 4,
          **relu,
        },
        {
          "type": "conv2d",
          "filters": 32,
          "kernel_size": 4,
          "strides": 2,
          **relu,
        },
        {"type": "flatten"},
        {"type": "dense", "units": 256, **relu},
      ],
      compute_dtype=compute_dtype,
      weights_dtype=weights_dtype,
      scope=scope,
    )


# (filters, residual blocks) per stage of the deep network.
IMPALA_STAGES = ((16, 2), (32, 2), (32, 2))


def _deep_torso_parts(stages, units, compute_dtype, weights_dtype):
  """The ResNet stages and the flatten -> fc head of the deep network."""
  dtypes = dict(compute_dtype=compute_dtype, weights_dtype=weights_dtype)
  layers = []
  for filters, blocks in stages:
    i = len(layers)
    layers.append(
      Conv2D(
        filters,
        3,
        padding="same",
        scope=f"conv2d_{i}",
        **dtypes,
      )
    )
    layers.append(MaxPool2D(3, 2, "same", scope=f"max_pool2d_{i + 1}"))
    for _ in range(blocks):
      layers.append(
        ResidualBlock(
          filters,
          scope=f"residual_block_{len(layers)}",
          **dtypes,
        )
      )
  return (
    NeuralNetwork(layers, scope="stages"),
    NeuralNetwork(
      [
        Flatten(scope="flatten_0"),
        Dense(units, activation="relu", scope="dense_1", **dtypes),
      ],
      scope="head",
    ),
  )


class ImpalaDeepTorso(Component):
  """The deep IMPALA network without its LSTM: stages -> relu -> flatten
  -> fc `units` relu. API: `call(inputs)` on single frames [N, H, W, C]
  (for agents that add their own recurrent core). `compute_dtype` and
  `weights_dtype`: see `NeuralNetwork`."""

  def __init__(
    self,
    stages=IMPALA_STAGES,
    units=256,
    compute_dtype=None,
    weights_dtype=None,
    scope="impala_deep",
  ):
    super().__init__(scope=scope)
    self.stages, self.head = _deep_torso_parts(
      stages, units, compute_dtype, weights_dtype
    )

  @api
  def call(self, inputs):
    return self.head.call(self._graph_fn_relu(self.stages.call(inputs)))

  @graph_fn
  def _graph_fn_relu(self, x):
    return tf.nn.relu(x)

  @_graph_fn_relu.torch
  def _graph_fn_relu(self, x):
    return F.relu(x)


class ImpalaLargeNetwork(ImpalaDeepTorso):
  """The "deep" IMPALA network with its LSTM core.

  Per stage (filters, blocks) of `stages`: conv3x3/1 'same' -> max pool
  3x3/2 'same' -> `blocks` residual blocks. Then relu -> flatten -> fc
  `units` relu -> LSTM `lstm_units`.

  Sub-components: `stages` (a NeuralNetwork: `conv2d_<i>`, `max_pool2d_<i>`,
  `residual_block_<i>`), `head` (`flatten_0`, `dense_1`), `lstm`.

  APIs (fixed, dict-shaped):
    call(inputs, initial_state, resets=None) -> {"outputs": [B, T,
      lstm_units] (same major-ness as `inputs` [B, T, H, W, C]),
      "state": {"c", "h"} [B, lstm_units]}.
    zero_state(batch_size) -> {"c", "h"} zeros [batch_size, lstm_units].
  """

  def __init__(
    self,
    stages=IMPALA_STAGES,
    units=256,
    lstm_units=256,
    compute_dtype=None,
    scope="impala_large",
  ):
    super().__init__(stages, units, compute_dtype, scope=scope)
    self.lstm = LSTM(lstm_units, scope="lstm")

  @api
  def call(self, inputs, initial_state, resets=None):
    features = self.head.call(self._graph_fn_relu(self.stages.call(inputs)))
    return self.lstm.call(features, initial_state, resets)

  @api
  def zero_state(self, batch_size):
    return self.lstm.zero_state(batch_size)

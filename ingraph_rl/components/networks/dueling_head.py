"""Dueling Q head (Wang et al. 2016)."""

import tensorflow as tf

from ingraph_rl.components.layers import Dense
from ingraph_rl.components.networks.neural_network import NeuralNetwork
from ingraph_rl.core import Component, api, graph_fn


class DuelingHead(Component):
  """Q = V + A - mean(A) over features [..., F].

  Each stream is an optional hidden `Dense(units, relu)` (the paper uses
  512; None: no hidden layer) then a linear output: `value` (1 unit) and
  `advantage` (`num_actions` units). Scopes: `value/dense_0`,
  `value/dense_1` (or `value/dense_0` alone), same under `advantage`.

  APIs:
    call(inputs) -> q_values [..., num_actions].
    streams(inputs) -> {"q_values": [..., A], "value": [...],
      "advantages": [..., A]}.
  """

  def __init__(
    self,
    num_actions,
    units=None,
    kernel_initializer="glorot_uniform",
    scope="dueling_head",
  ):
    super().__init__(scope=scope)
    self.num_actions = int(num_actions)
    self.units = units

    def stream(out_units, name):
      layers = (
        []
        if units is None
        else [
          Dense(
            units,
            activation="relu",
            kernel_initializer=kernel_initializer,
            scope="dense_0",
          )
        ]
      )
      layers.append(
        Dense(
          out_units,
          kernel_initializer=kernel_initializer,
          scope=f"dense_{len(layers)}",
        )
      )
      return NeuralNetwork(layers, scope=name)

    self.value_stream = stream(1, "value")
    self.advantage_stream = stream(self.num_actions, "advantage")

  @api
  def call(self, inputs):
    return self.streams(inputs)["q_values"]

  @api
  def streams(self, inputs):
    return self._graph_fn_combine(
      self.value_stream.call(inputs), self.advantage_stream.call(inputs)
    )

  @graph_fn
  def _graph_fn_combine(self, value, advantages):
    q = value + advantages - tf.reduce_mean(advantages, -1, keepdims=True)
    return {
      "q_values": q,
      "value": tf.squeeze(value, -1),
      "advantages": advantages,
    }

  @_graph_fn_combine.torch
  def _graph_fn_combine(self, value, advantages):
    q = value + advantages - advantages.mean(-1, keepdim=True)
    return {"q_values": q, "value": value.squeeze(-1), "advantages": advantages}

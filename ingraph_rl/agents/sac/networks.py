"""SAC's networks: the tanh-squashed Gaussian actor, twin Q-functions and
the entropy temperature."""

import numpy as np
import tensorflow as tf

from ingraph_rl.components.distributions import SquashedGaussian
from ingraph_rl.components.layers import Dense
from ingraph_rl.components.networks import NeuralNetwork
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.utils.lazy import torch

# The actor's log std is squashed into this range (SpinUp's and CleanRL's).
LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


class Actor(Component):
  """`parameters(states)` -> [mean, log_std] halves (log std squashed into
  [LOG_STD_MIN, LOG_STD_MAX] with a tanh); `sample(states)` ->
  {"actions", "log_prob"} (one reparameterized draw); `deterministic(
  states)` -> `tanh(mean)` mapped onto the action box."""

  def __init__(self, network, low, high, seed=0, scope="actor"):
    super().__init__(scope=scope)
    self.torso = NeuralNetwork(list(network), scope="torso")
    self.head = Dense(2 * len(np.atleast_1d(low)), scope="head")
    self.distribution = SquashedGaussian(low, high, seed=seed)

  @api
  def parameters(self, states):
    return self._graph_fn_bound_log_std(self.head.call(self.torso.call(states)))

  @api
  def sample(self, states):
    return self.distribution.sample_with_log_prob(self.parameters(states))

  @api
  def deterministic(self, states):
    return self.distribution.deterministic(self.parameters(states))

  @graph_fn
  def _graph_fn_bound_log_std(self, out):
    mean, log_std = tf.split(out, 2, axis=-1)
    log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (
      tf.tanh(log_std) + 1.0
    )
    return tf.concat([mean, log_std], -1)

  @_graph_fn_bound_log_std.torch
  def _graph_fn_bound_log_std(self, out):
    mean, log_std = out.chunk(2, dim=-1)
    log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (
      torch.tanh(log_std) + 1.0
    )
    return torch.cat([mean, log_std], -1)


class QFunction(Component):
  """`call(states, actions)` -> Q [B]: an MLP on the concatenation."""

  def __init__(self, network, scope="q"):
    super().__init__(scope=scope)
    self.torso = NeuralNetwork(list(network), scope="torso")
    self.head = Dense(1, scope="head")

  @api
  def call(self, states, actions):
    q = self.head.call(self.torso.call(self._graph_fn_concat(states, actions)))
    return self._graph_fn_squeeze(q)

  @graph_fn
  def _graph_fn_concat(self, states, actions):
    return tf.concat([states, tf.cast(actions, states.dtype)], -1)

  @_graph_fn_concat.torch
  def _graph_fn_concat(self, states, actions):
    return torch.cat([states, actions.to(states.dtype)], -1)

  @graph_fn
  def _graph_fn_squeeze(self, q):
    return tf.squeeze(q, -1)

  @_graph_fn_squeeze.torch
  def _graph_fn_squeeze(self, q):
    return q.squeeze(-1)


class TwinQ(Component):
  """Two Q-functions: `call(states, actions)` -> {"q1", "q2"};
  `variables()` holds both (one optimizer steps them, as CleanRL's)."""

  def __init__(self, network, scope="critic"):
    super().__init__(scope=scope)
    self.q1 = QFunction(network, scope="q1")
    self.q2 = QFunction(network, scope="q2")

  @api
  def call(self, states, actions):
    return {
      "q1": self.q1.call(states, actions),
      "q2": self.q2.call(states, actions),
    }


class Temperature(Component):
  """The entropy temperature alpha = exp(log_alpha): `alpha()`; `loss(
  log_probs)` -> mean(-alpha * (log_probs + target_entropy)) with the log
  probs held constant (CleanRL's alpha loss: its gradient in log_alpha is
  -alpha * mean(log_probs + target_entropy)).

  `log_alpha` starts at `log(initial_alpha)`."""

  variable_args = ()

  def __init__(self, initial_alpha, target_entropy, scope="temperature"):
    super().__init__(scope=scope)
    with np.errstate(divide="ignore"):  # alpha 0: log_alpha -inf.
      self.initial_log_alpha = float(np.log(initial_alpha))
    self.target_entropy = float(target_entropy)

  def create_variables(self, input_spaces):
    self.log_alpha = self.add_variable(
      "log_alpha", (), np.float32, initializer=self.initial_log_alpha
    )

  @api
  def alpha(self):
    return self._graph_fn_alpha()

  @api
  def loss(self, log_probs):
    return self._graph_fn_loss(log_probs)

  @graph_fn
  def _graph_fn_alpha(self):
    return tf.stop_gradient(tf.exp(self.log_alpha))

  @_graph_fn_alpha.torch
  def _graph_fn_alpha(self):
    return torch.exp(self.log_alpha.detach())

  @graph_fn
  def _graph_fn_loss(self, log_probs):
    held = tf.stop_gradient(log_probs + self.target_entropy)
    return tf.reduce_mean(-tf.exp(self.log_alpha) * held)

  @_graph_fn_loss.torch
  def _graph_fn_loss(self, log_probs):
    held = (log_probs + self.target_entropy).detach()
    return (-torch.exp(self.log_alpha) * held).mean()

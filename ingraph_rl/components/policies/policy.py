"""A policy: network, action adapter and distribution, as one component."""

import tensorflow as tf

from ingraph_rl.components.distributions import Categorical
from ingraph_rl.components.layers import Dense
from ingraph_rl.components.networks import NeuralNetwork
from ingraph_rl.core import Component, api, graph_fn


class Policy(Component):
  """`get_action(states)` -> {"action", "logits", "log_prob"} plus "value"
  when the policy has a value head. The keys are fixed by the settings,
  never by the call.

  Args:
    network: a list spec for a NeuralNetwork, or a component with `call`.
    num_actions: size of the discrete action set (Categorical).
    value_head: add a linear state-value head on the network's features.
    deterministic: act greedily (argmax) instead of sampling.

      >>> p = Policy([{"type": "dense", "units": 16, "activation": "tanh"}], 3)
      >>> sorted(p.sub_components)
      ['action_adapter', 'categorical', 'network', 'value_head']
  """

  def __init__(
    self,
    network,
    num_actions,
    value_head=True,
    deterministic=False,
    seed=0,
    scope="policy",
  ):
    super().__init__(scope=scope)
    self.network = (
      NeuralNetwork(network, scope="network")
      if isinstance(network, (list, tuple))
      else network
    )
    self.action_adapter = Dense(num_actions, scope="action_adapter")
    self.value_head = Dense(1, scope="value_head") if value_head else None
    self.distribution = Categorical(seed=seed)
    self.deterministic = deterministic

  @api
  def get_action(self, states):
    features = self.network.call(states)
    logits = self.action_adapter.call(features)
    action = (
      self.distribution.deterministic(logits)
      if self.deterministic
      else self.distribution.sample(logits)
    )
    out = {
      "action": action,
      "logits": logits,
      "log_prob": self.distribution.log_prob(logits, action),
    }
    if self.value_head is not None:
      out["value"] = self._graph_fn_squeeze(self.value_head.call(features))
    return out

  @graph_fn
  def _graph_fn_squeeze(self, value):
    return tf.squeeze(value, -1)

  @_graph_fn_squeeze.torch
  def _graph_fn_squeeze(self, value):
    return value.squeeze(-1)

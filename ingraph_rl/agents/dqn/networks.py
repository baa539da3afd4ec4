"""The DQN Q-network: a torso from a list spec and a (dueling) head."""

from ingraph_rl.components.common import Synchronizable
from ingraph_rl.components.layers import Dense
from ingraph_rl.components.networks import DuelingHead, NeuralNetwork
from ingraph_rl.core import Component, api


class QNetwork(Component):
  """`call(states)` -> Q-values [B, num_actions]. `compute_dtype` and
  `weights_dtype` are the torso's (see `NeuralNetwork`); the head stays
  float32."""

  def __init__(
    self,
    torso_spec,
    num_actions,
    dueling,
    compute_dtype=None,
    weights_dtype=None,
    scope="q_network",
  ):
    super().__init__(scope=scope)
    self.torso = NeuralNetwork(
      list(torso_spec),
      compute_dtype=compute_dtype,
      weights_dtype=weights_dtype,
      scope="torso",
    )
    self.head = (
      DuelingHead(num_actions, scope="head")
      if dueling
      else Dense(num_actions, scope="head")
    )

  @classmethod
  def from_config(cls, config, scope, weights_dtype=None):
    """The network of a DQN or Ape-X config (`network`, `num_actions`,
    `dueling`, `compute_dtype`); `weights_dtype` (an actor's copy, never
    trained): the torso's weights and products in that dtype."""
    return cls(
      config.network,
      config.num_actions,
      config.dueling,
      weights_dtype or config.compute_dtype,
      weights_dtype,
      scope=scope,
    )

  @api
  def call(self, states):
    return self.head.call(self.torso.call(states))


class TargetQNetwork(Synchronizable, QNetwork):
  """A QNetwork whose weights follow another's through `sync`."""

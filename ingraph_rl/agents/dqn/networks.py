"""The DQN Q-network: a torso from a list spec and a (dueling) head."""

from ingraph_rl.components.common import Synchronizable
from ingraph_rl.components.layers import Dense
from ingraph_rl.components.networks import DuelingHead, NeuralNetwork
from ingraph_rl.core import Component, api


class QNetwork(Component):
  """`call(states)` -> Q-values [B, num_actions]."""

  def __init__(self, torso_spec, num_actions, dueling, scope="q_network"):
    super().__init__(scope=scope)
    self.torso = NeuralNetwork(list(torso_spec), scope="torso")
    self.head = (
      DuelingHead(num_actions, scope="head")
      if dueling
      else Dense(num_actions, scope="head")
    )

  @api
  def call(self, states):
    return self.head.call(self.torso.call(states))


class TargetQNetwork(Synchronizable, QNetwork):
  """A QNetwork whose weights follow another's through `sync`."""

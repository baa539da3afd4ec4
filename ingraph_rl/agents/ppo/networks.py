"""PPO's actor-critic: a torso (shared or one per head), a policy head
(categorical logits, or a Gaussian mean with a state-independent log std,
CleanRL's continuous PPO) and a value head, initialized as CleanRL's
`layer_init` does (orthogonal, gain sqrt(2) in the torso, 0.01 on the
policy head, 1 on the value head; zero biases). Reusable by any
policy-gradient agent (TRPO) through `ActorCritic` and `make_distribution`.
"""

import dataclasses
import math

import numpy as np
import tensorflow as tf

from ingraph_rl.components.distributions import Categorical, DiagGaussian
from ingraph_rl.components.layers import Dense
from ingraph_rl.components.networks import NATURE_DQN_SPEC, NeuralNetwork
from ingraph_rl.components.preprocessing import Cast, Divide, PreprocessorStack
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.utils.lazy import torch


@dataclasses.dataclass(frozen=True)
class Orthogonal:
  """An orthogonal initializer times `gain` (torch.nn.init.orthogonal_'s
  QR construction, on the kernel flattened to [fan_in, fan_out])."""

  gain: float = 1.0

  def __call__(self, shape, dtype, rng):
    rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    cols = int(shape[-1])
    a = rng.standard_normal((max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(a)
    q = q * np.sign(np.diag(r))
    if rows < cols:
      q = q.T
    return (self.gain * q[:rows, :cols]).reshape(shape).astype(dtype)


def torso_spec(config):
  """The torso's layer list: CleanRL's MLP (tanh) or its Atari torso
  (Nature DQN's convs and 512 ReLU units)."""
  init = Orthogonal(math.sqrt(2.0))
  if config.torso == "nature":
    layers = [dict(spec) for spec in NATURE_DQN_SPEC]
  else:
    layers = [
      {"type": "dense", "units": config.hidden_units, "activation": "tanh"}
    ] * config.hidden_layers
  return [
    dict(spec, kernel_initializer=init) if spec["type"] != "flatten" else spec
    for spec in layers
  ]


def make_distribution(config):
  """The action distribution of `config`'s policy (seeded by it)."""
  if config.continuous:
    return DiagGaussian(seed=config.seed, scope="distribution")
  return Categorical(seed=config.seed, scope="distribution")


class LogStd(Component):
  """A state-independent log std: `parameters(mean)` -> [mean, log_std]
  concatenated on the last axis (what `DiagGaussian` takes)."""

  variable_args = ()

  def __init__(self, action_dim, initial=0.0, scope="log_std"):
    super().__init__(scope=scope)
    self.action_dim, self.initial = int(action_dim), float(initial)

  def create_variables(self, input_spaces):
    self.log_std = self.add_variable(
      "log_std", (self.action_dim,), np.float32, self.initial
    )

  @api
  def parameters(self, mean):
    return self._graph_fn_parameters(mean)

  @graph_fn
  def _graph_fn_parameters(self, mean):
    log_std = tf.broadcast_to(self.log_std, tf.shape(mean))
    return tf.concat([mean, log_std], -1)

  @_graph_fn_parameters.torch
  def _graph_fn_parameters(self, mean):
    return torch.cat([mean, self.log_std.expand_as(mean)], -1)


class ActorCritic(Component):
  """`call(observations [B, ...])` -> {"parameters": the distribution's
  ([B, A] logits, or [B, 2 d] mean and log std), "values": [B]};
  `values(observations)`; `policy_variables()` / `value_variables()`: the
  two parts' variables (a shared torso counts as the policy's), for
  optimizers that move them apart (TRPO). uint8 observations (frames) are
  scaled to [0, 1] first."""

  def __init__(self, config, frames=False, scope="actor_critic"):
    super().__init__(scope=scope)
    spec = torso_spec(config)
    self.scale = (
      PreprocessorStack(Cast("float32"), Divide(255.0), scope="scale")
      if frames
      else None
    )
    self.policy_torso = NeuralNetwork(spec, scope="policy_torso")
    self.value_torso = (
      None if config.shared_torso else NeuralNetwork(spec, scope="value_torso")
    )
    outputs = config.action_dim if config.continuous else config.num_actions
    self.policy_head = Dense(
      outputs, kernel_initializer=Orthogonal(0.01), scope="policy_head"
    )
    self.value_head = Dense(
      1, kernel_initializer=Orthogonal(1.0), scope="value_head"
    )
    self.log_std = (
      LogStd(config.action_dim, config.initial_log_std)
      if config.continuous
      else None
    )

  @api
  def call(self, observations):
    x = observations if self.scale is None else self.scale.call(observations)
    policy_features = self.policy_torso.call(x)
    value_features = (
      policy_features if self.value_torso is None else self.value_torso.call(x)
    )
    parameters = self.policy_head.call(policy_features)
    if self.log_std is not None:
      parameters = self.log_std.parameters(parameters)
    values = self._graph_fn_squeeze(self.value_head.call(value_features))
    return {"parameters": parameters, "values": values}

  @api
  def values(self, observations):
    return self.call(observations)["values"]

  @api
  def policy_variables(self):
    """The policy's variables (torso, head, log std) by relative path: what
    a policy-only optimizer moves (TRPO's natural gradient)."""
    parts = {
      "policy_torso": self.policy_torso.variables(),
      "policy_head": self.policy_head.variables(),
    }
    if self.log_std is not None:
      parts["log_std"] = self.log_std.variables()
    return self._graph_fn_merge(parts)

  @api
  def value_variables(self):
    """The value function's own variables (its torso unless shared, its
    head) by relative path."""
    parts = {"value_head": self.value_head.variables()}
    if self.value_torso is not None:
      parts["value_torso"] = self.value_torso.variables()
    return self._graph_fn_merge(parts)

  @graph_fn(neutral=True)
  def _graph_fn_merge(self, parts):
    return {
      f"{scope}/{path}": v
      for scope, variables in parts.items()
      for path, v in variables.items()
    }

  @graph_fn
  def _graph_fn_squeeze(self, values):
    return values[..., 0]

  @_graph_fn_squeeze.torch
  def _graph_fn_squeeze(self, values):
    return values[..., 0]

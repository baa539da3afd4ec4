"""Generalized advantage estimation (Schulman et al. 2016), GAE(lambda), as
a reverse scan in the graph.

    delta_t = r_t + gamma * (1 - done_t) * V_{t+1} - V_t
    A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}
    returns = A + V

`done_t`: the episode ended with step t (terminated or truncated, as
CleanRL's PPO treats both), so nothing of step t + 1 flows back;
V_T is `bootstrap_value`, the value of the observation after the last step.
"""

import tensorflow as tf

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError
from ingraph_rl.utils.lazy import torch


class GAE(Component):
  """`advantages(rewards, values, dones, bootstrap_value)` ->
  {"advantages", "returns"}, batch-major: rewards, values, dones [B, T]
  (dones bool or 0/1), bootstrap_value [B]. No gradient flows through."""

  def __init__(self, gamma=0.99, gae_lambda=0.95, scope="gae"):
    super().__init__(scope=scope)
    if not 0.0 <= gamma <= 1.0 or not 0.0 <= gae_lambda <= 1.0:
      raise BuildError(f"'{scope}': gamma and gae_lambda must lie in [0, 1]")
    self.gamma, self.gae_lambda = float(gamma), float(gae_lambda)

  @api
  def advantages(self, rewards, values, dones, bootstrap_value):
    return self._graph_fn_advantages(rewards, values, dones, bootstrap_value)

  @graph_fn
  def _graph_fn_advantages(self, rewards, values, dones, bootstrap_value):
    rewards, values = tf.stop_gradient(rewards), tf.stop_gradient(values)
    discounts = self.gamma * (1.0 - tf.cast(dones, values.dtype))
    next_values = tf.concat(
      [values[:, 1:], tf.stop_gradient(bootstrap_value)[:, None]], 1
    )
    deltas = rewards + discounts * next_values - values
    # Scan over time (axis 1), last step first.
    elems = (tf.transpose(deltas), tf.transpose(discounts * self.gae_lambda))
    adv = tf.scan(
      lambda acc, x: x[0] + x[1] * acc,
      elems,
      initializer=tf.zeros_like(bootstrap_value),
      reverse=True,
    )
    adv = tf.transpose(adv)
    return {"advantages": adv, "returns": adv + values}

  @_graph_fn_advantages.torch
  def _graph_fn_advantages(self, rewards, values, dones, bootstrap_value):
    rewards, values = rewards.detach(), values.detach()
    discounts = self.gamma * (1.0 - dones.to(values.dtype))
    next_values = torch.cat(
      [values[:, 1:], bootstrap_value.detach()[:, None]], 1
    )
    deltas = rewards + discounts * next_values - values
    adv = torch.zeros_like(values)
    acc = torch.zeros_like(bootstrap_value)
    for t in reversed(range(values.shape[1])):
      acc = deltas[:, t] + discounts[:, t] * self.gae_lambda * acc
      adv[:, t] = acc
    return {"advantages": adv, "returns": adv + values}

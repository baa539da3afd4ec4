"""Ape-X's Q-learning core: the online and target Q-networks and the
n-step double-Q TD error, shared by the actors (initial priorities) and
the learner (loss and new priorities), so both compute the same numbers.
"""

import tensorflow as tf

from ingraph_rl.agents.dqn.networks import TargetQNetwork
from ingraph_rl.components.losses import DQNLoss
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.utils.lazy import torch

# Added to |TD| so no record gets priority 0 (it could never be sampled).
PRIORITY_EPSILON = 1e-6


class QLearning(Component):
  """APIs (fixed dict results):
    q_values(states) -> online Q(s, .) [B, num_actions].
    td(records, importance_weights) -> {"loss", "td_errors", "priorities",
      "mean_q"}: records are n-step transitions {"states", "actions",
      "rewards" (the n-step return), "next_states", "terminals",
      "discounts" (discount^m)}; td = target - Q(s, a) with the double-Q
      target r + (1 - terminal) * discount^m * Q_target(s', argmax_a
      Q_online(s', a)); priorities = |td| + 1e-6; loss = mean(weights *
      huber(td)).
    target_q_values(states) -> target Q(s, .) [B, num_actions].
    td_of_q_values(q, actions, rewards, terminals, next_q, discounts,
      ones) -> `td`'s results from Q-values computed elsewhere (an actor's
      acting passes and its batched target pass, reused for priorities).
    get_weights() -> {"online": {path: var}, "target": {path: var}}.
    set_weights(weights): loads both networks (an actor's copy).
    sync_target(): target <- online.

  Both networks are `Synchronizable`, so an actor's copy loads the
  learner's published weights with `set_weights`. `weights_dtype` (an
  actor's copy, `ApexConfig.actor_weights_dtype`): both torsos store their
  weights in that dtype, cast once per load, and run their products in it.
  """

  def __init__(self, config, preprocessor=None, weights_dtype=None, scope="q"):
    super().__init__(scope=scope)
    c = config
    self.preprocessor = preprocessor
    self.online = TargetQNetwork.from_config(c, "online", weights_dtype)
    self.target = TargetQNetwork.from_config(c, "target", weights_dtype)
    self.loss = DQNLoss(c.discount, c.n_step, c.double_q, c.huber_delta)

  def _preprocess(self, states):
    if self.preprocessor is None:
      return states
    return self.preprocessor.call(states)

  @api
  def q_values(self, states):
    return self.online.call(self._preprocess(states))

  @api
  def target_q_values(self, states):
    return self.target.call(self._preprocess(states))

  @api
  def td_of_q_values(
    self, q, actions, rewards, terminals, next_q, discounts, ones
  ):
    """`td`'s results from Q-values computed elsewhere: q and next_q are
    {"online", "target"} Q-values of the records' states and next states
    (only q's "online" is read); `ones`: the importance weights (all 1 for
    initial priorities)."""
    out = self.loss.loss(
      q["online"],
      actions,
      rewards,
      terminals,
      next_q["target"],
      next_q["online"],
      ones,
      discounts,
    )
    return self._graph_fn_results(out["loss"], out["td_errors"], q["online"])

  @api
  def td(self, records, importance_weights):
    q = self.online.call(self._preprocess(records["states"]))
    next_states = self._preprocess(records["next_states"])
    out = self.loss.loss(
      q,
      records["actions"],
      records["rewards"],
      records["terminals"],
      self.target.call(next_states),
      self.online.call(next_states),
      importance_weights,
      records["discounts"],
    )
    return self._graph_fn_results(out["loss"], out["td_errors"], q)

  @api
  def get_weights(self):
    return {
      "online": self.online.variables(),
      "target": self.target.variables(),
    }

  @api
  def set_weights(self, weights):
    online = self.online.sync(weights["online"])
    target = self.target.sync(weights["target"])
    return self._graph_fn_both(online, target)

  @api
  def sync_target(self):
    return self.target.sync(self.online.variables())

  @graph_fn
  def _graph_fn_results(self, loss, td_errors, q):
    return {
      "loss": loss,
      "td_errors": td_errors,
      "priorities": tf.abs(td_errors) + PRIORITY_EPSILON,
      "mean_q": tf.reduce_mean(q),
    }

  @_graph_fn_results.torch
  def _graph_fn_results(self, loss, td_errors, q):
    return {
      "loss": loss,
      "td_errors": td_errors,
      "priorities": td_errors.abs() + PRIORITY_EPSILON,
      "mean_q": q.mean(),
    }

  @graph_fn
  def _graph_fn_both(self, a, b):
    return tf.logical_and(a, b)

  @_graph_fn_both.torch
  def _graph_fn_both(self, a, b):
    return torch.logical_and(a, b)

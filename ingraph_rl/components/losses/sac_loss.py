"""Soft actor-critic losses (Haarnoja et al. 2018, with twin Qs): the soft
Bellman critic loss and the actor's loss."""

import tensorflow as tf

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.utils.lazy import torch


class SACLoss(Component):
  """Pure functions of given tensors (no variables):

  critic_loss(q1, q2, next_q1, next_q2, next_log_probs, rewards,
    terminals, alpha) -> {"loss", "qf1_loss", "qf2_loss", "targets"}:
      y = r + gamma * (1 - terminal) * (min(next_q1, next_q2) -
      alpha * next_log_prob), held constant; qf_i_loss = mean((q_i - y)^2);
      loss = qf1_loss + qf2_loss.
  actor_loss(log_probs, q1, q2, alpha) -> mean(alpha * log_prob -
    min(q1, q2)).

  Truncated episodes are not terminal: their transitions bootstrap.
  """

  def __init__(self, gamma=0.99, scope="sac_loss"):
    super().__init__(scope=scope)
    self.gamma = float(gamma)

  @api
  def critic_loss(
    self, q1, q2, next_q1, next_q2, next_log_probs, rewards, terminals, alpha
  ):
    return self._graph_fn_critic_loss(
      q1, q2, next_q1, next_q2, next_log_probs, rewards, terminals, alpha
    )

  @api
  def actor_loss(self, log_probs, q1, q2, alpha):
    return self._graph_fn_actor_loss(log_probs, q1, q2, alpha)

  @graph_fn
  def _graph_fn_critic_loss(
    self, q1, q2, next_q1, next_q2, next_log_probs, rewards, terminals, alpha
  ):
    soft = tf.minimum(next_q1, next_q2) - alpha * next_log_probs
    live = 1.0 - tf.cast(terminals, soft.dtype)
    targets = tf.stop_gradient(rewards + self.gamma * live * soft)
    qf1 = tf.reduce_mean(tf.square(q1 - targets))
    qf2 = tf.reduce_mean(tf.square(q2 - targets))
    return {
      "loss": qf1 + qf2,
      "qf1_loss": qf1,
      "qf2_loss": qf2,
      "targets": targets,
    }

  @_graph_fn_critic_loss.torch
  def _graph_fn_critic_loss(
    self, q1, q2, next_q1, next_q2, next_log_probs, rewards, terminals, alpha
  ):
    soft = torch.minimum(next_q1, next_q2) - alpha * next_log_probs
    live = 1.0 - terminals.to(soft.dtype)
    targets = (rewards + self.gamma * live * soft).detach()
    qf1 = ((q1 - targets) ** 2).mean()
    qf2 = ((q2 - targets) ** 2).mean()
    return {
      "loss": qf1 + qf2,
      "qf1_loss": qf1,
      "qf2_loss": qf2,
      "targets": targets,
    }

  @graph_fn
  def _graph_fn_actor_loss(self, log_probs, q1, q2, alpha):
    return tf.reduce_mean(alpha * log_probs - tf.minimum(q1, q2))

  @_graph_fn_actor_loss.torch
  def _graph_fn_actor_loss(self, log_probs, q1, q2, alpha):
    return (alpha * log_probs - torch.minimum(q1, q2)).mean()

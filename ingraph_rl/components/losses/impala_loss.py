"""The IMPALA loss: V-trace targets, policy gradient, baseline and entropy
terms over a time-major rollout (scalable_agent semantics: sums over time
and batch, not means)."""

import tensorflow as tf

from ingraph_rl.components.losses import vtrace
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.spaces import BoxSpace, FloatBox, IntBox
from ingraph_rl.utils.lazy import F, torch

# Argument -> (space kind, full rank with the leading ranks, layout).
_INPUTS = {
  "target_logits": (FloatBox, 3, "[T, B, A]"),
  "behaviour_logits": (FloatBox, 3, "[T, B, A]"),
  "actions": (IntBox, 2, "[T, B]"),
  "rewards": (FloatBox, 2, "[T, B]"),
  "dones": (BoxSpace, 2, "[T, B]"),
  "values": (FloatBox, 2, "[T, B]"),
  "bootstrap_value": (FloatBox, 1, "[B]"),
  "truncation_values": (FloatBox, 2, "[T, B]"),  # Optional.
}


class IMPALALoss(Component):
  """`loss(target_logits, behaviour_logits, actions, rewards, dones, values,
  bootstrap_value, truncation_values=None)` -> dict of scalars.

  Inputs are time-major: target_logits (the learner's policy) and
  behaviour_logits (the actors' policy) [T, B, A]; actions [T, B] taken by
  the actors; rewards [T, B] (already clipped: see RewardClipping); dones
  [T, B] (bool or 0/1: the episode ended with step t, so V(x_{t+1}) is not
  bootstrapped); values [T, B] = V(x_t) of the learner; bootstrap_value [B]
  = V(x_T); truncation_values [T, B] (optional): where the episode was
  truncated (cut short by a time limit, not terminal) with step t, the
  value of its true last observation, else 0.

    discounts = discounting * (1 - dones)
    rewards += discounting * truncation_values   (bootstrap the cut-off
                                                  return, nothing leaks
                                                  into the next episode)
    vs, pg_advantages = V-trace(...)             (no gradient through them)
    pg_loss = sum_{t,b} cross_entropy(target_logits, actions) * pg_adv
    baseline_loss = baseline_cost * 0.5 * sum_{t,b} (vs - values)^2
    entropy_loss = entropy_cost * sum_{t,b} -entropy(target_logits)
    loss = pg_loss + baseline_loss + entropy_loss

  Every term is the weighted one, so the three add up to `loss`. The sums
  (not means) follow scalable_agent, so its learning rates carry over; the
  gradient scales with T * B. Diagnostics (no gradient): mean_vs,
  mean_pg_advantage, mean_entropy, mean_rho (mean importance weight
  pi/mu before clipping).
  """

  def __init__(
    self,
    discounting=0.99,
    baseline_cost=0.5,
    entropy_cost=0.00025,
    clip_rho_threshold=1.0,
    clip_pg_rho_threshold=1.0,
    lambda_=1.0,
    scope="impala_loss",
  ):
    super().__init__(scope=scope)
    if not 0.0 <= discounting <= 1.0:
      raise BuildError(
        f"'{scope}': need 0 <= discounting <= 1, got {discounting}"
      )
    if not 0.0 <= lambda_ <= 1.0:
      raise BuildError(f"'{scope}': need 0 <= lambda_ <= 1, got {lambda_}")
    for name, value in (
      ("clip_rho_threshold", clip_rho_threshold),
      ("clip_pg_rho_threshold", clip_pg_rho_threshold),
    ):
      if value is not None and value <= 0:
        raise BuildError(f"'{scope}': {name} must be > 0 or None, got {value}")
    self.discounting = float(discounting)
    self.baseline_cost = float(baseline_cost)
    self.entropy_cost = float(entropy_cost)
    self.clip_rho_threshold = clip_rho_threshold
    self.clip_pg_rho_threshold = clip_pg_rho_threshold
    self.lambda_ = float(lambda_)

  def create_variables(self, input_spaces):
    # No variables: checks the spaces once, with names, before any tracing.
    for arg, (kind, full_rank, layout) in _INPUTS.items():
      if arg == "truncation_values" and arg not in input_spaces:
        continue
      space = self.expect_space(input_spaces, arg, kind)
      rank = space.num_leading_ranks + space.rank
      if rank != full_rank or (space.has_time_rank and not space.time_major):
        raise SpaceError(
          "wrong rank or layout",
          component=self.path,
          api="loss",
          argument=arg,
          expected=f"time-major {layout} (rank {full_rank} with the "
          f"leading ranks)",
          received=repr(space),
        )
    target = input_spaces["target_logits"]
    behaviour = input_spaces["behaviour_logits"]
    if target.shape != behaviour.shape:
      raise SpaceError(
        "number of actions differs from target_logits",
        component=self.path,
        api="loss",
        argument="behaviour_logits",
        expected=repr(target),
        received=repr(behaviour),
      )

  @api
  def loss(
    self,
    target_logits,
    behaviour_logits,
    actions,
    rewards,
    dones,
    values,
    bootstrap_value,
    truncation_values=None,
  ):
    return self._graph_fn_loss(
      target_logits,
      behaviour_logits,
      actions,
      rewards,
      dones,
      values,
      bootstrap_value,
      truncation_values,
    )

  def _settings(self):
    return dict(
      clip_rho_threshold=self.clip_rho_threshold,
      clip_pg_rho_threshold=self.clip_pg_rho_threshold,
      lambda_=self.lambda_,
    )

  @graph_fn
  def _graph_fn_loss(
    self,
    target_logits,
    behaviour_logits,
    actions,
    rewards,
    dones,
    values,
    bootstrap_value,
    truncation_values=None,
  ):
    dtype = values.dtype
    discounts = self.discounting * (1.0 - tf.cast(dones, dtype))
    if truncation_values is not None:
      rewards = tf.cast(rewards, dtype) + self.discounting * tf.cast(
        truncation_values, dtype
      )
    vt = vtrace.from_logits(
      behaviour_logits,
      target_logits,
      actions,
      discounts,
      rewards,
      values,
      bootstrap_value,
      **self._settings(),
    )
    # -log pi(a_t|x_t) keeps its gradient; the advantage is a constant.
    cross_entropy = -vt.target_action_log_probs
    pg_loss = tf.reduce_sum(cross_entropy * tf.stop_gradient(vt.pg_advantages))
    baseline_loss = (
      self.baseline_cost * 0.5 * tf.reduce_sum(tf.square(vt.vs - values))
    )
    log_policy = tf.nn.log_softmax(target_logits)
    entropy = -tf.reduce_sum(tf.exp(log_policy) * log_policy, -1)
    entropy_loss = self.entropy_cost * tf.reduce_sum(-entropy)
    return {
      "loss": pg_loss + baseline_loss + entropy_loss,
      "pg_loss": pg_loss,
      "baseline_loss": baseline_loss,
      "entropy_loss": entropy_loss,
      "mean_vs": tf.reduce_mean(vt.vs),
      "mean_pg_advantage": tf.reduce_mean(vt.pg_advantages),
      "mean_entropy": tf.stop_gradient(tf.reduce_mean(entropy)),
      "mean_rho": tf.stop_gradient(tf.reduce_mean(tf.exp(vt.log_rhos))),
    }

  @_graph_fn_loss.torch
  def _graph_fn_loss(
    self,
    target_logits,
    behaviour_logits,
    actions,
    rewards,
    dones,
    values,
    bootstrap_value,
    truncation_values=None,
  ):
    dtype = values.dtype
    discounts = self.discounting * (1.0 - dones.to(dtype))
    if truncation_values is not None:
      rewards = rewards.to(dtype) + self.discounting * truncation_values.to(
        dtype
      )
    vt = vtrace.torch_from_logits(
      behaviour_logits,
      target_logits,
      actions,
      discounts,
      rewards,
      values,
      bootstrap_value,
      **self._settings(),
    )
    cross_entropy = -vt.target_action_log_probs
    pg_loss = (cross_entropy * vt.pg_advantages.detach()).sum()
    baseline_loss = self.baseline_cost * 0.5 * (vt.vs - values).pow(2).sum()
    log_policy = F.log_softmax(target_logits, -1)
    entropy = -(log_policy.exp() * log_policy).sum(-1)
    entropy_loss = self.entropy_cost * (-entropy).sum()
    return {
      "loss": pg_loss + baseline_loss + entropy_loss,
      "pg_loss": pg_loss,
      "baseline_loss": baseline_loss,
      "entropy_loss": entropy_loss,
      "mean_vs": vt.vs.mean(),
      "mean_pg_advantage": vt.pg_advantages.mean(),
      "mean_entropy": entropy.detach().mean(),
      "mean_rho": torch.exp(vt.log_rhos.detach()).mean(),
    }

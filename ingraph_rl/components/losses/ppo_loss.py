"""The PPO loss (Schulman et al. 2017) with CleanRL's details: clipped
surrogate, optionally clipped value loss, entropy bonus, per-minibatch
advantage normalization, and the approximate KL and clip fraction."""

import tensorflow as tf

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError
from ingraph_rl.utils.lazy import torch

STATS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac")


class PPOLoss(Component):
  """`loss(log_probs, entropy, values, old_log_probs, old_values,
  advantages, returns)` -> {"loss", "policy_loss", "value_loss",
  "entropy", "approx_kl", "clipfrac"}, over one minibatch [B]:

    ratio = exp(log_probs - old_log_probs)
    adv   = (advantages - mean) / (std + 1e-8)   if norm_adv (std with
                                                 Bessel's correction,
                                                 torch's .std())
    policy_loss = mean(max(-adv * ratio, -adv * clip(ratio, 1 +- clip)))
                  (no clip_coef: mean(-adv * ratio), A2C's gradient)
    value_loss  = 0.5 * mean(max((v - R)^2, (old_v + clip(v - old_v,
                  +-clip) - R)^2))   if clip_vloss, else 0.5 * mean((v-R)^2)
    loss = policy_loss - ent_coef * mean(entropy) + vf_coef * value_loss
    approx_kl = mean((ratio - 1) - log ratio)   (Schulman's k3 estimator)
    clipfrac  = mean(|ratio - 1| > clip_coef)

  `entropy` is what is reported (the mean), not the weighted term.
  """

  def __init__(
    self,
    clip_coef=0.2,
    clip_vloss=True,
    ent_coef=0.01,
    vf_coef=0.5,
    norm_adv=True,
    scope="ppo_loss",
  ):
    super().__init__(scope=scope)
    if clip_vloss and clip_coef is None:
      raise BuildError(f"'{scope}': clip_vloss needs a clip_coef")
    self.clip_coef = None if clip_coef is None else float(clip_coef)
    self.clip_vloss = bool(clip_vloss)
    self.ent_coef, self.vf_coef = float(ent_coef), float(vf_coef)
    self.norm_adv = bool(norm_adv)

  @api
  def loss(
    self,
    log_probs,
    entropy,
    values,
    old_log_probs,
    old_values,
    advantages,
    returns,
  ):
    return self._graph_fn_loss(
      log_probs, entropy, values, old_log_probs, old_values, advantages, returns
    )

  @graph_fn
  def _graph_fn_loss(
    self, log_probs, entropy, values, old_log, old_values, adv, returns
  ):
    return self._formula(
      _TF, log_probs, entropy, values, old_log, old_values, adv, returns
    )

  @_graph_fn_loss.torch
  def _graph_fn_loss(
    self, log_probs, entropy, values, old_log, old_values, adv, returns
  ):
    return self._formula(
      _TORCH, log_probs, entropy, values, old_log, old_values, adv, returns
    )

  def _formula(self, xp, log_probs, entropy, values, old_log, old_v, adv, ret):
    old_log, old_v, adv, ret = (xp.stop(x) for x in (old_log, old_v, adv, ret))
    log_ratio = log_probs - old_log
    ratio = xp.exp(log_ratio)
    if self.norm_adv:
      adv = (adv - xp.mean(adv)) / (xp.std(adv) + 1e-8)
    if self.clip_coef is None:
      policy_loss = xp.mean(-adv * ratio)
    else:
      clipped = xp.clip(ratio, 1.0 - self.clip_coef, 1.0 + self.clip_coef)
      policy_loss = xp.mean(xp.maximum(-adv * ratio, -adv * clipped))
    unclipped = (values - ret) ** 2
    if self.clip_vloss:
      v_clipped = old_v + xp.clip(
        values - old_v, -self.clip_coef, self.clip_coef
      )
      value_loss = 0.5 * xp.mean(xp.maximum(unclipped, (v_clipped - ret) ** 2))
    else:
      value_loss = 0.5 * xp.mean(unclipped)
    mean_entropy = xp.mean(entropy)
    loss = (
      policy_loss - self.ent_coef * mean_entropy + self.vf_coef * value_loss
    )
    clip = 0.2 if self.clip_coef is None else self.clip_coef
    ratio_ng = xp.stop(ratio)
    return {
      "loss": loss,
      "policy_loss": policy_loss,
      "value_loss": value_loss,
      "entropy": mean_entropy,
      "approx_kl": xp.mean((ratio_ng - 1.0) - xp.stop(log_ratio)),
      "clipfrac": xp.mean(xp.float(xp.abs(ratio_ng - 1.0) > clip)),
    }


class _Ops:
  """The few elementwise and reducing ops of the formula, per backend."""

  def __init__(self, **ops):
    self.__dict__.update(ops)


def _tf_std(x):
  n = tf.cast(tf.size(x), x.dtype)
  mean = tf.reduce_mean(x)
  return tf.sqrt(tf.reduce_sum((x - mean) ** 2) / tf.maximum(n - 1.0, 1.0))


_TF = _Ops(
  stop=tf.stop_gradient,
  exp=tf.exp,
  mean=tf.reduce_mean,
  std=_tf_std,
  clip=tf.clip_by_value,
  maximum=tf.maximum,
  abs=tf.abs,
  float=lambda x: tf.cast(x, tf.float32),
)
_TORCH = _Ops(
  stop=lambda x: x.detach(),
  exp=lambda x: torch.exp(x),
  mean=lambda x: x.mean(),
  std=lambda x: x.std() if x.numel() > 1 else torch.zeros_like(x.sum()),
  clip=lambda x, lo, hi: torch.clamp(x, lo, hi),
  maximum=lambda a, b: torch.maximum(a, b),
  abs=lambda x: x.abs(),
  float=lambda x: x.float(),
)

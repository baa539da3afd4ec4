"""The TRPO agent: PPO's policy, value function, in-graph rollout and GAE;
the policy updated by OptimizedStep(NaturalGradient) (conjugate gradient
on Fisher-vector products, a max-KL step, a backtracking line search) and
the value function by Adam epochs over minibatches, the whole update ONE
graph call.

    builder = TRPOBuilder(TRPOConfig(num_actions=2, num_steps=128))
    agent = builder.make_agent(env=env).build()
    agent.execute("reset_env", 0)
    stats = agent.execute("update", agent.execute("rollout")["batch"])
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.agents.ppo.agent import (
  PPOAgent,
  tf_explained_variance,
  torch_explained_variance,
)
from ingraph_rl.agents.ppo.trpo_config import TRPOConfig
from ingraph_rl.components.optimizers import (
  Adam,
  MultiStep,
  NaturalGradient,
  OptimizedStep,
  SubsamplingStep,
)
from ingraph_rl.core import api, graph_fn, inline
from ingraph_rl.executors.checks import tf_check, torch_check
from ingraph_rl.spaces import Dict
from ingraph_rl.utils.lazy import torch

# What `update` returns.
STATS = (
  "policy_loss",
  "value_loss",
  "entropy",
  "line_search_fraction",
  "quadratic_kl",
  "explained_variance",
  "train_step",
  "frames",
)


EMPTY = "an empty batch: TRPO's update needs at least one sample"

# The actor-critic's sub-components of each (shared_torso is refused).
POLICY_PARTS = ("policy_torso/", "policy_head/", "log_std/")
VALUE_PARTS = ("value_torso/", "value_head/")


def _part(variables, parts):
  return {k: v for k, v in variables.items() if k.startswith(parts)}


def _part_space(parts):
  return lambda self, in_spaces: Dict(
    {k: in_spaces[0][k] for k in in_spaces[0].keys() if k.startswith(parts)}
  )


class TRPOAgent(PPOAgent):
  """PPOAgent's APIs with TRPO's `update(batch)` -> {STATS}: GAE(lambda),
  advantages normalized over the batch (`norm_adv`), then

    policy: OptimizedStep(NaturalGradient) on the surrogate
      -mean(exp(log_prob - old_log_prob) * advantage), the Fisher matrix
      the Hessian of KL(pi_sg || pi) (pi_sg: the policy with its
      gradient stopped, equal to pi where the Hessian is taken);
    value: MultiStep(SubsamplingStep(Adam)) on 0.5 * mean((V - returns)^2),
      `value_epochs` x `num_minibatches`.

  "policy_loss" and "entropy" are the batch's before the step,
  "value_loss" the last minibatch's, "train_step" the TRPO updates so far
  (also `get_train_step()`). An empty batch is refused (a SpaceError,
  nothing changed).
  No `minibatch_step` (PPO's).
  """

  def __init__(self, config, env=None, observation_space=None, scope="trpo"):
    if not isinstance(config, TRPOConfig):
      raise TypeError("config must be a TRPOConfig")
    super().__init__(config, env, observation_space, scope=scope)
    c = config
    self.policy_optimizer = OptimizedStep(
      NaturalGradient(c.max_kl, c.cg_iterations, c.cg_damping),
      max_iterations=c.line_search_steps,
      accept_ratio=c.accept_ratio,
      scope="policy_optimizer",
    )
    self.value_optimizer = MultiStep(
      SubsamplingStep(
        Adam(c.value_learning_rate, epsilon=c.adam_epsilon),
        c.num_minibatches,
        seed=c.seed,
      ),
      c.value_epochs,
      scope="value_optimizer",
    )

  @classmethod
  def internal_apis(cls):
    return super().internal_apis() | {"policy_loss", "value_loss"}

  def create_variables(self, input_spaces):
    super().create_variables(input_spaces)
    self.updates = self.add_variable("updates", (), np.int64, trainable=False)

  # --- losses (what the optimizers evaluate) ------------------------------

  @api
  def policy_loss(self, batch):
    parameters = self.model.network.call(batch["observations"])["parameters"]
    d = self.distribution
    return self._graph_fn_surrogate(
      d.log_prob(parameters, batch["actions"]),
      batch["log_probs"],
      batch["advantages"],
      d.kl(self._graph_fn_stop(parameters), parameters),
      d.entropy(parameters),
    )

  @api
  def value_loss(self, batch):
    return self._graph_fn_value_loss(
      self.model.network.values(batch["observations"]), batch["returns"]
    )

  # --- the update ------------------------------------------------------------

  @api
  def update(self, batch):
    gae = self.gae.advantages(
      batch["rewards"],
      batch["values"],
      batch["dones"],
      batch["bootstrap_value"],
    )
    samples = self._graph_fn_normalize(
      self._graph_fn_fold(batch, gae["advantages"], gae["returns"])
    )
    weights = self.model.network.variables()
    p = self.policy_optimizer.minimize(
      inline(self.policy_loss), self._graph_fn_policy_weights(weights), samples
    )
    v = self.value_optimizer.minimize(
      inline(self.value_loss), self._graph_fn_value_weights(weights), samples
    )
    return self._graph_fn_trpo_stats(p, v, samples)

  @api
  def get_train_step(self):
    return self._graph_fn_train_step()

  # --- graph functions -------------------------------------------------------

  # The actor-critic's variables by part (TF-layout spaces, as
  # `variables()` declares them: the optimizers' slots take their shapes).
  @graph_fn(neutral=True, output_space=_part_space(POLICY_PARTS))
  def _graph_fn_policy_weights(self, variables):
    return _part(variables, POLICY_PARTS)

  @graph_fn(neutral=True, output_space=_part_space(VALUE_PARTS))
  def _graph_fn_value_weights(self, variables):
    return _part(variables, VALUE_PARTS)

  @graph_fn
  def _graph_fn_stop(self, x):
    return tf.stop_gradient(x)

  @_graph_fn_stop.torch
  def _graph_fn_stop(self, x):
    return x.detach()

  @graph_fn
  def _graph_fn_normalize(self, samples):
    # Everything the update writes depends on the samples, so on this.
    ok = tf_check(
      tf.size(samples["returns"]) > 0, self, "update", "batch", EMPTY
    )
    with tf.control_dependencies([ok]):
      samples = {k: tf.identity(v) for k, v in samples.items()}
    adv = samples["advantages"]
    if self.config.norm_adv:  # Bessel's std, as PPO's loss and torch's.
      n = tf.cast(tf.size(adv), tf.float32)
      std = tf.sqrt(tf.math.reduce_variance(adv) * n / tf.maximum(n - 1.0, 1.0))
      adv = (adv - tf.reduce_mean(adv)) / (std + 1e-8)
    return dict(samples, advantages=adv)

  @_graph_fn_normalize.torch
  def _graph_fn_normalize(self, samples):
    torch_check(samples["returns"].numel() > 0, self, "update", "batch", EMPTY)
    adv = samples["advantages"]
    if self.config.norm_adv:
      adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    return dict(samples, advantages=adv)

  @graph_fn
  def _graph_fn_surrogate(self, log_probs, old_log_probs, adv, kl, entropy):
    ratio = tf.exp(log_probs - old_log_probs)
    return {
      "loss": -tf.reduce_mean(ratio * adv),
      "kl": tf.reduce_mean(kl),
      "entropy": tf.reduce_mean(entropy),
    }

  @_graph_fn_surrogate.torch
  def _graph_fn_surrogate(self, log_probs, old_log_probs, adv, kl, entropy):
    ratio = torch.exp(log_probs - old_log_probs)
    return {
      "loss": -(ratio * adv).mean(),
      "kl": kl.mean(),
      "entropy": entropy.mean(),
    }

  @graph_fn
  def _graph_fn_value_loss(self, values, returns):
    return {"loss": 0.5 * tf.reduce_mean((values - returns) ** 2)}

  @_graph_fn_value_loss.torch
  def _graph_fn_value_loss(self, values, returns):
    return {"loss": 0.5 * ((values - returns) ** 2).mean()}

  @graph_fn
  def _graph_fn_train_step(self):
    return tf.identity(self.updates)

  @_graph_fn_train_step.torch
  def _graph_fn_train_step(self):
    return self.updates.clone()

  @graph_fn
  def _graph_fn_trpo_stats(self, p, v, samples):
    with tf.control_dependencies(tf.nest.flatten((p, v))):
      frames = self.frames.assign_add(
        tf.cast(tf.shape(samples["returns"])[0], tf.int64)
      )
      updates = self.updates.assign_add(1)
    return {
      "policy_loss": p["loss"],
      "value_loss": v["loss"],
      "entropy": p["entropy"],
      "line_search_fraction": p["line_search_fraction"],
      "quadratic_kl": p["quadratic_kl"],
      "explained_variance": tf_explained_variance(
        samples["returns"], samples["values"]
      ),
      "train_step": updates,
      "frames": frames,
    }

  @_graph_fn_trpo_stats.torch
  def _graph_fn_trpo_stats(self, p, v, samples):
    with torch.no_grad():
      self.frames += samples["returns"].shape[0]
      self.updates += 1
    return {
      "policy_loss": p["loss"],
      "value_loss": v["loss"],
      "entropy": p["entropy"],
      "line_search_fraction": p["line_search_fraction"],
      "quadratic_kl": p["quadratic_kl"],
      "explained_variance": torch_explained_variance(
        samples["returns"], samples["values"]
      ),
      "train_step": self.updates.clone(),
      "frames": self.frames.clone(),
    }

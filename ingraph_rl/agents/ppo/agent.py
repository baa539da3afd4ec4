"""The PPO agent: acting, an in-graph rollout over a vector env and the
whole multi-epoch update, each ONE graph call.

Built through `PPOBuilder` (agents/ppo/builder.py), which declares its root
APIs and their input spaces:

    builder = PPOBuilder(PPOConfig(num_actions=2, num_steps=128))
    agent = builder.make_agent(env=env).build()
    agent.execute("reset_env", 0)
    out = agent.execute("rollout")          # num_steps vector steps, 1 call
    stats = agent.execute("update", out["batch"])   # epochs x minibatches
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.agents.ppo.config import PPOConfig
from ingraph_rl.agents.ppo.networks import ActorCritic, make_distribution
from ingraph_rl.agents.ppo.normalization import RunningMeanStd
from ingraph_rl.components.common import Synchronizable
from ingraph_rl.components.losses.gae import GAE
from ingraph_rl.components.losses.ppo_loss import STATS, PPOLoss
from ingraph_rl.components.optimizers import Adam, MultiStep, SubsamplingStep
from ingraph_rl.core import Component, api, graph_fn, inline
from ingraph_rl.environments import in_graph
from ingraph_rl.errors import BuildError
from ingraph_rl.executors import gradients
from ingraph_rl.spaces import FloatBox
from ingraph_rl.utils.lazy import torch

# A minibatch's fields, in `minibatch_step`'s argument order.
MINIBATCH_FIELDS = (
  "observations",
  "actions",
  "log_probs",
  "values",
  "advantages",
  "returns",
)


def stored_observation_space(observation_space, config):
  """The observations a batch holds: float32 where the agent normalizes
  them or the env gives float64, else the env's (uint8 frames stay
  uint8)."""
  space = observation_space
  if config.normalize_observations or space.dtype == np.float64:
    return FloatBox(tuple(space.shape))
  return space


class PPOModel(Synchronizable, Component):
  """The weights the policy acts with: the actor-critic and (with
  `normalize_observations`) the observation statistics. `get_weights` /
  `set_weights` move them together (`sync`)."""

  def __init__(self, config, frames, observation_shape, scope="model"):
    super().__init__(scope=scope)
    self.network = ActorCritic(config, frames=frames)
    self.obs_rms = (
      RunningMeanStd(observation_shape, scope="obs_rms")
      if config.normalize_observations
      else None
    )

  @api
  def normalize(self, observations):
    if self.obs_rms is None:
      return self._graph_fn_float32(observations)
    return self.obs_rms.normalize(observations)

  @api
  def observe(self, observations):
    """Normalized observations, the statistics updated with them first."""
    if self.obs_rms is None:
      return self._graph_fn_float32(observations)
    return self.obs_rms.update_normalize(observations)

  @graph_fn
  def _graph_fn_float32(self, observations):
    # float64 observations (MuJoCo's) as float32; frames stay uint8.
    if observations.dtype == tf.float64:
      return tf.cast(observations, tf.float32)
    return observations

  @_graph_fn_float32.torch
  def _graph_fn_float32(self, observations):
    if observations.dtype == torch.float64:
      return observations.float()
    return observations


class AnnealedRate(Component):
  """A learning rate that falls linearly from `learning_rate` to 0 over
  `num_updates` updates (CleanRL's anneal_lr: constant within an update,
  lr * (1 - k / num_updates) in update k = 0, 1, ...): `value(step)` (the
  optimizer's schedule API; its step count is not the update count) and
  `advance()`."""

  variable_args = ()

  def __init__(self, learning_rate, num_updates, scope="annealed_rate"):
    super().__init__(scope=scope)
    self.learning_rate, self.num_updates = float(learning_rate), num_updates

  def create_variables(self, input_spaces):
    self.updates = self.add_variable("updates", (), np.int64, trainable=False)

  @api
  def value(self, step):
    del step
    return self._graph_fn_value()

  @api
  def advance(self):
    return self._graph_fn_advance()

  @graph_fn
  def _graph_fn_value(self):
    frac = 1.0 - tf.cast(self.updates, tf.float32) / self.num_updates
    return self.learning_rate * tf.maximum(frac, 0.0)

  @_graph_fn_value.torch
  def _graph_fn_value(self):
    frac = 1.0 - float(self.updates) / self.num_updates
    return torch.tensor(self.learning_rate * max(frac, 0.0))

  @graph_fn
  def _graph_fn_advance(self):
    return self.updates.assign_add(1)

  @_graph_fn_advance.torch
  def _graph_fn_advance(self):
    with torch.no_grad():
      self.updates += 1
    return self.updates.clone()


class PPOAgent(Component):
  """PPO (and A2C as a config choice) with CleanRL's details.

  APIs (fixed dict results):
    get_actions(observations [B, ...], explore) -> {"actions", "log_probs",
      "values"}: raw env observations (normalized inside with the
      running statistics, not updated); explore False: the mode (argmax,
      or the Gaussian mean).
    minibatch_step(mb_observations, mb_actions, mb_log_probs, mb_values,
      mb_advantages, mb_returns) -> the minibatch's loss stats and
      "grad_norm", after one Adam step (what `update` loops over).
    update(batch) -> {"policy_loss", "value_loss", "entropy",
      "approx_kl", "clipfrac", "grad_norm" (the last minibatch step's, as
      CleanRL logs all but clipfrac), "explained_variance" (of the batch),
      "epochs" (run), "learning_rate", "train_step" (Adam steps so far),
      "frames" (samples trained on so far)}: GAE(lambda) over the batch,
      then MultiStep(SubsamplingStep(Adam)): `update_epochs` epochs, each
      a fresh shuffle cut into `num_minibatches` minibatches (every sample
      once), one Adam step each; with `target_kl`, no further epoch once
      an epoch's last minibatch's approximate KL exceeds it. ONE graph
      call. `batch` is batch-major, one row per env:
      observations [B, T, ...] (normalized where the agent normalizes),
      actions [B, T(, d)], log_probs, values, rewards (scaled where it
      scales), dones [B, T], bootstrap_value [B] (V of the observation
      after the last step).
    get_weights() -> {path: value} of `PPOModel` (network, obs statistics);
      set_weights(weights); get_train_step() -> Adam steps so far.
  With an env (any `VectorEnv`; Box actions are clipped to its bounds
  before the env step, the batch keeps the sampled ones):
    reset_env(seed) -> first observations; rollout() -> {"batch",
      "stats"}: `num_steps` vector steps in ONE graph call (tf.while_loop),
      stats {"episodes", "return_sum", "length_sum" (raw rewards, the
      episodes that ended), "env_steps" (the agent's total)}.
  """

  def __init__(self, config, env=None, observation_space=None, scope="ppo"):
    super().__init__(scope=scope)
    if not isinstance(config, PPOConfig):
      raise TypeError("config must be a PPOConfig")
    c = self.config = config
    self.env = env  # Not a component: stepped via numpy_function.
    space = (
      observation_space
      if observation_space is not None
      else env.observation_space
    )
    self.observation_space = space
    frames = space.dtype == np.uint8 and len(space.shape) == 3
    self.model = PPOModel(c, frames, tuple(space.shape))
    self.distribution = make_distribution(c)
    self.return_rms = (
      RunningMeanStd((), scope="return_rms") if c.normalize_rewards else None
    )
    self.gae = GAE(c.gamma, c.gae_lambda)
    self.loss = PPOLoss(
      c.clip_coef, c.clip_vloss, c.ent_coef, c.vf_coef, c.norm_adv
    )
    # PPO's update, composed (TensorForce's form): update_epochs x
    # (a fresh shuffle cut into num_minibatches x one Adam step), with
    # target_kl checked on each epoch's last minibatch. Adam owns the
    # annealed rate (one parent per component).
    annealed = (
      AnnealedRate(c.learning_rate, c.num_updates)
      if c.anneal_lr and c.num_updates
      else None
    )
    adam = Adam(
      annealed or c.learning_rate,
      epsilon=c.adam_epsilon,
      clip_global_norm=c.max_grad_norm,
    )
    self.optimizer = MultiStep(
      SubsamplingStep(adam, c.num_minibatches, seed=c.seed),
      c.update_epochs,
      stop_key=None if c.target_kl is None else "approx_kl",
      stop_above=c.target_kl,
    )
    if env is not None:
      self._check_env(env)

  def _check_env(self, env):
    c = self.config
    if c.num_steps * env.num_envs < c.num_minibatches:
      raise BuildError(
        f"PPOAgent: num_envs * num_steps = {env.num_envs * c.num_steps} "
        f"samples cannot fill num_minibatches={c.num_minibatches}"
      )
    space = env.action_space
    if c.continuous:
      shape = tuple(getattr(space, "shape", ()))
      if shape != (c.action_dim,):
        raise BuildError(
          f"PPOAgent: action_dim={c.action_dim} but the env's actions "
          f"are {space!r}"
        )
      self.action_low = np.asarray(space.low, np.float32)
      self.action_high = np.asarray(space.high, np.float32)
    elif getattr(space, "num_categories", None) != c.num_actions:
      raise BuildError(
        f"PPOAgent: num_actions={c.num_actions} but the env's actions "
        f"are {space!r}"
      )

  # --- building ------------------------------------------------------------

  variable_args = ()

  def create_variables(self, input_spaces):
    self.frames = self.add_variable("frames", (), np.int64, trainable=False)
    if self.env is None:
      return
    n, space = self.env.num_envs, self.observation_space
    dtype = stored_observation_space(space, self.config).dtype
    self.last_obs = self.add_variable(
      "last_obs", (n,) + tuple(space.shape), dtype, trainable=False
    )
    self.discounted_return = self.add_variable(
      "discounted_return", (n,), np.float32, trainable=False
    )
    self.env_steps = self.add_variable(
      "env_steps", (), np.int64, trainable=False
    )

  # --- acting ----------------------------------------------------------------

  @api
  def get_actions(self, observations, explore=True):
    return self._act(self.model.normalize(observations), explore)

  @api
  def sample_actions(self, observations):
    """`get_actions` on normalized observations, exploring: the rollout's."""
    return self._act(observations, True)

  @classmethod
  def internal_apis(cls):
    return super().internal_apis() | {
      "sample_actions",
      "minibatch_loss",
      "observe_observations",
      "scale_rewards",
    }

  def _act(self, observations, explore):
    out = self.model.network.call(observations)
    parameters = out["parameters"]
    if explore is True:
      # The rollout's: no mode computed and dropped every step.
      actions = self.distribution.sample(parameters)
    else:
      actions = self._graph_fn_select(
        explore,
        self.distribution.sample(parameters),
        self.distribution.deterministic(parameters),
      )
    return {
      "actions": actions,
      "log_probs": self.distribution.log_prob(parameters, actions),
      "values": out["values"],
    }

  @graph_fn
  def _graph_fn_select(self, explore, sampled, greedy):
    return tf.where(tf.cast(explore, tf.bool), sampled, greedy)

  @_graph_fn_select.torch
  def _graph_fn_select(self, explore, sampled, greedy):
    return sampled if bool(explore) else greedy

  # --- learning --------------------------------------------------------------

  @api
  def minibatch_loss(self, minibatch):
    """The PPO loss and its stats on one minibatch (a dict of
    MINIBATCH_FIELDS, [M, ...]): what the optimizers evaluate."""
    out = self.model.network.call(minibatch["observations"])
    parameters = out["parameters"]
    return self.loss.loss(
      self.distribution.log_prob(parameters, minibatch["actions"]),
      self.distribution.entropy(parameters),
      out["values"],
      minibatch["log_probs"],
      minibatch["values"],
      minibatch["advantages"],
      minibatch["returns"],
    )

  @api
  def minibatch_step(
    self,
    mb_observations,
    mb_actions,
    mb_log_probs,
    mb_values,
    mb_advantages,
    mb_returns,
  ):
    """One Adam step on one minibatch [M, ...] (the stats from before the
    step, as CleanRL logs them): the inner optimizer of `update`, driven
    from outside (the Python-loop baseline of
    benchmarks/ppo_throughput.py)."""
    minibatch = self._graph_fn_minibatch(
      mb_observations,
      mb_actions,
      mb_log_probs,
      mb_values,
      mb_advantages,
      mb_returns,
    )
    return self.optimizer.inner.inner.minimize(
      inline(self.minibatch_loss), self.model.network.variables(), minibatch
    )

  @api
  def update(self, batch):
    gae = self.gae.advantages(
      batch["rewards"],
      batch["values"],
      batch["dones"],
      batch["bootstrap_value"],
    )
    samples = self._graph_fn_fold(batch, gae["advantages"], gae["returns"])
    stats = self.optimizer.minimize(
      inline(self.minibatch_loss), self.model.network.variables(), samples
    )
    annealed = self.optimizer.inner.inner.lr_schedule
    lr = (
      annealed.value(0)
      if annealed is not None
      else self._graph_fn_constant_lr()
    )
    advanced = annealed.advance() if annealed is not None else None
    return self._graph_fn_update_stats(
      stats, samples, lr, self.get_train_step(), advanced
    )

  @api
  def get_weights(self):
    return self.model.variables()

  @api
  def set_weights(self, weights):
    return self.model.sync(weights)

  @api
  def get_train_step(self):
    return self.optimizer.inner.inner.get_iterations()

  @graph_fn(neutral=True)
  def _graph_fn_minibatch(self, *fields):
    return dict(zip(MINIBATCH_FIELDS, fields))

  @graph_fn
  def _graph_fn_fold(self, batch, advantages, returns):
    fields = dict(
      {k: batch[k] for k in MINIBATCH_FIELDS[:4]},
      advantages=advantages,
      returns=returns,
    )
    # [B, T, ...] -> [B * T, ...]
    return {
      k: tf.reshape(x, tf.concat([[-1], tf.shape(x)[2:]], 0))
      for k, x in fields.items()
    }

  @_graph_fn_fold.torch
  def _graph_fn_fold(self, batch, advantages, returns):
    fields = dict(
      {k: batch[k] for k in MINIBATCH_FIELDS[:4]},
      advantages=advantages,
      returns=returns,
    )
    return {k: x.reshape((-1,) + tuple(x.shape[2:])) for k, x in fields.items()}

  @graph_fn
  def _graph_fn_constant_lr(self):
    return tf.constant(self.config.learning_rate)

  @_graph_fn_constant_lr.torch
  def _graph_fn_constant_lr(self):
    return torch.tensor(self.config.learning_rate)

  @graph_fn
  def _graph_fn_update_stats(self, stats, samples, lr, train_step, advanced):
    deps = [] if advanced is None else [advanced]
    with tf.control_dependencies(deps + tf.nest.flatten(stats)):
      frames = self.frames.assign_add(
        tf.cast(tf.shape(samples["returns"])[0], tf.int64)
      )
      out = {k: tf.identity(stats[k]) for k in STATS + ("grad_norm",)}
      out["epochs"] = tf.identity(stats["steps"])
      out["train_step"] = tf.identity(train_step)
    out["explained_variance"] = tf_explained_variance(
      samples["returns"], samples["values"]
    )
    out.update(learning_rate=lr, frames=frames)
    return out

  @_graph_fn_update_stats.torch
  def _graph_fn_update_stats(self, stats, samples, lr, train_step, advanced):
    with torch.no_grad():
      self.frames += samples["returns"].shape[0]
    out = {k: stats[k] for k in STATS + ("grad_norm",)}
    out["epochs"] = stats["steps"]
    out["train_step"] = train_step
    out["explained_variance"] = torch_explained_variance(
      samples["returns"], samples["values"]
    )
    out.update(learning_rate=lr, frames=self.frames.clone())
    return out

  # --- the in-graph rollout --------------------------------------------------

  @api
  def observe_observations(self, observations):
    return self.model.observe(observations)

  @api
  def scale_rewards(self, returns, rewards):
    return self.return_rms.update_scale(returns, rewards)

  @api
  def reset_env(self, seed):
    obs = self._graph_fn_reset(seed)
    return self._graph_fn_set_last_obs(obs, self.model.observe(obs))

  @api
  def rollout(self):
    out = self._graph_fn_rollout(
      inline(self.sample_actions),
      inline(self.observe_observations),
      inline(self.scale_rewards) if self.return_rms is not None else None,
    )
    bootstrap = self.model.network.values(out["next_observations"])
    return self._graph_fn_pack(out, bootstrap)

  @graph_fn
  def _graph_fn_reset(self, seed):
    return in_graph.tf_reset(self.env, seed)

  @graph_fn
  def _graph_fn_set_last_obs(self, obs, normalized):
    ops = [
      self.last_obs.assign(normalized),
      self.discounted_return.assign(tf.zeros_like(self.discounted_return)),
    ]
    with tf.control_dependencies(ops):
      return tf.identity(obs)

  @graph_fn
  def _graph_fn_rollout(self, act, observe, scale):
    c, env = self.config, self.env
    T, n = c.num_steps, env.num_envs
    first_obs = self.last_obs.read_value()

    def array(dtype, shape):
      return tf.TensorArray(dtype, size=T, element_shape=[n] + list(shape))

    action_shape = [c.action_dim] if c.continuous else []
    arrays = {
      "observations": array(first_obs.dtype, first_obs.shape[1:]),
      "actions": array(tf.float32 if c.continuous else tf.int64, action_shape),
      "log_probs": array(tf.float32, []),
      "values": array(tf.float32, []),
      "rewards": array(tf.float32, []),
      "dones": array(tf.bool, []),
    }
    totals = {
      "episodes": tf.constant(0, tf.int64),
      "return_sum": tf.constant(0.0),
      "length_sum": tf.constant(0, tf.int64),
    }

    def body(t, obs, ret, totals, arrays):
      out = act(obs)
      actions = out["actions"]
      env_actions = (
        tf.clip_by_value(actions, self.action_low, self.action_high)
        if c.continuous
        else actions
      )
      # The env step waits for the rest of the act: else TF's executor
      # hands it (an expensive op) to another thread while this one runs
      # the log prob, a hop (and a spinning idle thread) per step.
      with tf.control_dependencies(tf.nest.flatten(out)):
        step = in_graph.tf_step(env, env_actions)
      next_obs = observe(step.obs)
      rewards = step.rewards
      if scale is not None:
        # gymnasium's NormalizeReward: the return restarts at termination.
        ret = ret * c.gamma * (1.0 - tf.cast(step.terminated, tf.float32))
        ret = ret + rewards
        rewards = scale(ret, rewards)
      done = step.terminated | step.truncated
      record = {
        "observations": obs,
        "actions": actions,
        "log_probs": out["log_probs"],
        "values": out["values"],
        "rewards": rewards,
        "dones": done,
      }
      arrays = {k: arrays[k].write(t, record[k]) for k in arrays}
      totals = {
        "episodes": totals["episodes"] + tf.reduce_sum(tf.cast(done, tf.int64)),
        "return_sum": totals["return_sum"]
        + tf.reduce_sum(tf.where(done, step.episode_returns, 0.0)),
        "length_sum": totals["length_sum"]
        + tf.reduce_sum(
          tf.cast(tf.where(done, step.episode_lengths, 0), tf.int64)
        ),
      }
      return t + 1, next_obs, ret, totals, arrays

    with gradients.tf_no_recording():
      _, obs, ret, totals, arrays = tf.while_loop(
        lambda t, *_: t < T,
        body,
        (
          tf.constant(0),
          first_obs,
          self.discounted_return.read_value(),
          totals,
          arrays,
        ),
        parallel_iterations=1,
      )
    ops = [
      self.last_obs.assign(obs),
      self.discounted_return.assign(ret),
    ]
    with tf.control_dependencies(ops):
      # [T, n, ...] -> batch-major [n, T, ...].
      batch = {k: _swap01(a.stack()) for k, a in arrays.items()}
      totals = {k: tf.identity(v) for k, v in totals.items()}
      totals["env_steps"] = self.env_steps.assign_add(n * T)
    return {"batch": batch, "stats": totals, "next_observations": obs}

  @graph_fn
  def _graph_fn_pack(self, out, bootstrap):
    batch = dict(out["batch"], bootstrap_value=bootstrap)
    return {"batch": batch, "stats": dict(out["stats"])}


def _swap01(x):
  return tf.transpose(x, [1, 0] + list(range(2, len(x.shape))))


def tf_explained_variance(returns, values):
  """1 - Var[returns - values] / Var[returns] (CleanRL's; NaN where the
  returns do not vary)."""
  var = tf.math.reduce_variance(returns)
  return tf.where(
    var == 0.0,
    tf.constant(np.nan, tf.float32),
    1.0 - tf.math.reduce_variance(returns - values) / var,
  )


def torch_explained_variance(returns, values):
  """`tf_explained_variance` in torch."""
  var = _torch_variance(returns)
  if float(var) == 0.0:
    return torch.tensor(float("nan"))
  return 1.0 - _torch_variance(returns - values) / var


def _torch_variance(x):
  # tf.math.reduce_variance's formula: NaN on an empty batch, as there,
  # where torch's var() warns about the degrees of freedom.
  return torch.mean(torch.square(x - torch.mean(x)))

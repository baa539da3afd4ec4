"""The SAC agent: act, observe and the three updates as graph APIs, plus an
in-graph training loop over a vector environment (one graph call for N
env steps: act, env step, store, and a whole SAC update per step).

Built through `SACBuilder` (agents/sac/builder.py):

    builder = SACBuilder(SACConfig(action_low=(-2.0,), action_high=(2.0,)))
    executor = builder.make_agent(env=env).build()
    _ = executor.execute("reset_env", 0)
    stats = executor.execute("train", 1000)   # 1000 vector steps, 1 call
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.agents.sac.config import SACConfig
from ingraph_rl.agents.sac.networks import Actor, Temperature, TwinQ
from ingraph_rl.components.losses import SACLoss
from ingraph_rl.components.memories import ReplayMemory
from ingraph_rl.components.optimizers import Adam, Synchronization
from ingraph_rl.core import Component, api, graph_fn, inline
from ingraph_rl.environments import in_graph
from ingraph_rl.utils.lazy import torch

# What `update` and `train` report (fixed keys); see SACAgent.
UPDATE_KEYS = ("qf_loss", "qf1_values", "actor_loss", "alpha", "alpha_loss")


class SACAgent(Component):
  """Soft actor-critic (Haarnoja et al. 2018) with twin Qs, Polyak-averaged
  target Qs and an automatically tuned temperature, scheduled as CleanRL's
  `sac_continuous_action.py`.

  APIs (fixed dict results):
    get_actions(states, explore) -> {"actions"}: a squashed-Gaussian draw,
      or (explore False) tanh of the mean, on the action box.
    observe(states, actions, rewards, next_states, terminals) -> size.
    update_critic(states, actions, rewards, next_states, terminals) ->
      {"qf_loss" (CleanRL's: the mean of the two), "qf1_loss",
      "qf2_loss", "qf1_values", "qf2_values", "alpha"}: one Adam step of
      both Qs on the soft Bellman loss (targets from the target Qs and a
      fresh action of the actor at the next states).
    update_actor(states) -> {"actor_loss", "entropy"}: one Adam step of
      the actor on mean(alpha log pi - min Q) (the Qs held).
    update_alpha(states) -> {"alpha_loss", "alpha"} (with autotune): one
      Adam step of log alpha on mean(-alpha (log pi + target entropy)).
    sync_targets() -> synced: every `target_network_frequency`-th call
      target <- tau Q + (1 - tau) target (a `Synchronization`).
    copy_targets() -> True: target <- Q (the first update does it).
    update() -> {"qf_loss", "qf1_values", "actor_loss", "alpha",
      "alpha_loss", "actor_updated"}: one SAC update on a sampled batch,
      as CleanRL schedules it: the critic step; every `policy_frequency`
      updates that many actor (and temperature) steps on the same batch;
      every `target_network_frequency` updates a target move. The actor's
      figures are 0 where it did not step.
    get_weights() -> the actor's variables by relative path.
    get_train_step() -> int64 updates so far (the critic optimizer's).
  With an environment (any `VectorEnv` of a box action space), also:
    reset_env(seed) -> first observations;
    train(num_steps) -> {"episodes", "return_sum", "length_sum",
      "updates", "actor_updates", "qf_loss_sum", "qf1_values_sum",
      "actor_loss_sum", "alpha_loss_sum", "alpha", "env_steps"}: a
      tf.while_loop of `num_steps` vector steps in ONE graph call: uniform
      random actions until `learning_starts` env steps, then the actor's;
      once past `learning_starts` one `update()` per vector step; env
      step; store. The update comes before the store so that the env
      step overlaps it (its batch is drawn from the transitions before
      this step's: CleanRL draws from those and this one). A call that
      fails part-way leaves the loop out of step with the env:
      `reset_env` before the next call.

  Observations are cast to float32 (MuJoCo's are float64). Truncated
  episodes are not terminal: the memory stores the true last observation
  (`final_obs`) and the target bootstraps.
  """

  def __init__(self, config, env=None, scope="sac"):
    super().__init__(scope=scope)
    if not isinstance(config, SACConfig):
      raise TypeError("config must be a SACConfig")
    self.config = c = config
    self.env = env  # Not a component: stepped via numpy_function.
    self.actor = Actor(c.network, c.action_low, c.action_high, seed=c.seed)
    self.critic = TwinQ(c.network, scope="critic")
    self.target_critic = TwinQ(c.network, scope="target_critic")
    # Polyak averaging every target_network_frequency updates; the hard
    # copy starts the targets as the Qs (CleanRL's load_state_dict).
    self.target_sync = Synchronization(
      c.target_network_frequency, c.tau, scope="target_sync"
    )
    self.target_copy = Synchronization(1, 1.0, scope="target_copy")
    # CleanRL's autotune starts at log alpha 0.
    self.temperature = Temperature(
      1.0 if c.autotune else c.alpha, c.target_entropy
    )
    self.loss = SACLoss(c.gamma)
    self.memory = ReplayMemory(c.buffer_size, seed=c.seed, scope="memory")
    self.q_optimizer = Adam(c.q_lr, epsilon=c.adam_epsilon, scope="q_optimizer")
    self.policy_optimizer = Adam(
      c.policy_lr, epsilon=c.adam_epsilon, scope="policy_optimizer"
    )
    # CleanRL's temperature optimizer takes the Q learning rate.
    self.alpha_optimizer = (
      Adam(c.q_lr, epsilon=c.adam_epsilon, scope="alpha_optimizer")
      if c.autotune
      else None
    )
    self.low = np.asarray(c.action_low, np.float32)
    self.high = np.asarray(c.action_high, np.float32)

  variable_args = ()

  def create_variables(self, input_spaces):
    self.updates = self.add_variable("updates", (), np.int64, trainable=False)
    if self.env is None:
      return
    obs = self.env.observation_space
    n = self.env.num_envs
    self.last_obs = self.add_variable(
      "last_obs", (n,) + tuple(obs.shape), np.float32, trainable=False
    )
    self.env_steps = self.add_variable(
      "env_steps", (), np.int64, trainable=False
    )
    seed = self.config.seed + 1  # Apart from the actor's noise.
    self.rng = self.add_resource(
      "rng",
      tf=lambda: tf.random.Generator.from_seed(seed),
      torch=lambda: torch.Generator().manual_seed(seed),
    )

  # --- acting and learning ---------------------------------------------------

  @api
  def get_actions(self, states, explore=True):
    params = self.actor.parameters(states)
    sampled = self.actor.distribution.sample(params)
    mode = self.actor.distribution.deterministic(params)
    return {"actions": self._graph_fn_select(explore, sampled, mode)}

  @api
  def observe(self, states, actions, rewards, next_states, terminals):
    return self.memory.insert(
      {
        "states": states,
        "actions": actions,
        "rewards": rewards,
        "next_states": next_states,
        "terminals": terminals,
      }
    )

  @api
  def update_critic(self, states, actions, rewards, next_states, terminals):
    alpha = self.temperature.alpha()
    following = self.actor.sample(next_states)
    targets = self.target_critic.call(next_states, following["actions"])
    q = self.critic.call(states, actions)
    out = self.loss.critic_loss(
      q["q1"],
      q["q2"],
      targets["q1"],
      targets["q2"],
      following["log_prob"],
      rewards,
      terminals,
      alpha,
    )
    self.q_optimizer.step(out["loss"], self.critic.variables())
    return {
      "qf_loss": self._graph_fn_half(out["loss"]),
      "qf1_loss": out["qf1_loss"],
      "qf2_loss": out["qf2_loss"],
      "qf1_values": self._graph_fn_mean(q["q1"]),
      "qf2_values": self._graph_fn_mean(q["q2"]),
      "alpha": alpha,
    }

  @api
  def update_actor(self, states):
    alpha = self.temperature.alpha()
    pi = self.actor.sample(states)
    q = self.critic.call(states, pi["actions"])
    loss = self.loss.actor_loss(pi["log_prob"], q["q1"], q["q2"], alpha)
    self.policy_optimizer.step(loss, self.actor.variables())
    return {
      "actor_loss": loss,
      "entropy": self._graph_fn_mean(self._graph_fn_neg(pi["log_prob"])),
    }

  @api
  def update_alpha(self, states):
    # A fresh draw of the updated actor (CleanRL's), held by the loss.
    loss = self.temperature.loss(self.actor.sample(states)["log_prob"])
    self.alpha_optimizer.step(loss, self.temperature.variables())
    return {"alpha_loss": loss, "alpha": self.temperature.alpha()}

  @api
  def sync_targets(self):
    return self.target_sync.sync(
      self.target_critic.variables(), self.critic.variables()
    )["synced"]

  @api
  def copy_targets(self):
    return self.target_copy.sync(
      self.target_critic.variables(), self.critic.variables()
    )["synced"]

  @api
  def update(self):
    batch = self.memory.sample(self.config.batch_size)["records"]
    return self._graph_fn_learn(
      batch,
      inline(self.update_critic),
      inline(self.update_actor),
      inline(self.update_alpha) if self.config.autotune else None,
      inline(self.sync_targets),
      inline(self.copy_targets),
    )

  @api
  def get_weights(self):
    return self.actor.variables()

  @api
  def get_train_step(self):
    return self.q_optimizer.get_iterations()

  # --- small graph functions -------------------------------------------------

  @graph_fn
  def _graph_fn_select(self, explore, sampled, mode):
    if isinstance(explore, bool):  # A Python default (the loop's act).
      return sampled if explore else mode
    return tf.where(explore, sampled, mode)

  @_graph_fn_select.torch
  def _graph_fn_select(self, explore, sampled, mode):
    return sampled if bool(explore) else mode

  @graph_fn
  def _graph_fn_half(self, x):
    return 0.5 * x

  @_graph_fn_half.torch
  def _graph_fn_half(self, x):
    return 0.5 * x

  @graph_fn
  def _graph_fn_neg(self, x):
    return -x

  @_graph_fn_neg.torch
  def _graph_fn_neg(self, x):
    return -x

  @graph_fn
  def _graph_fn_mean(self, x):
    return tf.reduce_mean(x)

  @_graph_fn_mean.torch
  def _graph_fn_mean(self, x):
    return x.mean()

  # --- the update schedule ---------------------------------------------------

  def _records(self, batch):
    return (
      batch["states"],
      batch["actions"],
      batch["rewards"],
      batch["next_states"],
      batch["terminals"],
    )

  @graph_fn
  def _graph_fn_learn(self, batch, critic, actor, alpha, sync, copy):
    c = self.config
    # After the batch (and its checks: an empty memory changes nothing).
    with tf.control_dependencies(tf.nest.flatten(batch)):
      first = tf.equal(self.updates.read_value(), 0)
    # The targets start as copies of the Qs (CleanRL's load_state_dict).
    copied = tf.cond(first, lambda: copy(), lambda: tf.constant(False))
    with tf.control_dependencies([copied]):
      q = critic(*self._records(batch))
    with tf.control_dependencies([q["qf_loss"]]):
      n = self.updates.assign_add(1)
    pf = c.policy_frequency

    def policy_steps():
      def body(i, actor_sum, alpha_sum):
        a = actor(batch["states"])
        if alpha is None:
          alpha_loss = tf.constant(0.0)
        else:
          with tf.control_dependencies([a["actor_loss"]]):
            alpha_loss = alpha(batch["states"])["alpha_loss"]
        return i + 1, actor_sum + a["actor_loss"], alpha_sum + alpha_loss

      _, actor_sum, alpha_sum = tf.while_loop(
        lambda i, *_: i < pf,
        body,
        (tf.constant(0), tf.constant(0.0), tf.constant(0.0)),
        parallel_iterations=1,
      )
      return actor_sum / pf, alpha_sum / pf

    updated = tf.equal(n % pf, 0)
    actor_loss, alpha_loss = tf.cond(
      updated, policy_steps, lambda: (tf.constant(0.0), tf.constant(0.0))
    )
    with tf.control_dependencies([actor_loss, alpha_loss]):
      synced = sync()  # Its Synchronization counts to the frequency.
    with tf.control_dependencies([synced]):
      return {
        "qf_loss": tf.identity(q["qf_loss"]),
        "qf1_values": tf.identity(q["qf1_values"]),
        "actor_loss": tf.identity(actor_loss),
        "alpha": tf.identity(q["alpha"]),
        "alpha_loss": tf.identity(alpha_loss),
        "actor_updated": tf.identity(updated),
      }

  @_graph_fn_learn.torch
  def _graph_fn_learn(self, batch, critic, actor, alpha, sync, copy):
    c = self.config
    if int(self.updates) == 0:
      copy()
    q = critic(*self._records(batch))
    with torch.no_grad():
      self.updates += 1
    n = int(self.updates)
    actor_loss = alpha_loss = 0.0
    updated = n % c.policy_frequency == 0
    if updated:
      for _ in range(c.policy_frequency):
        actor_loss += float(actor(batch["states"])["actor_loss"].detach())
        if alpha is not None:
          alpha_loss += float(alpha(batch["states"])["alpha_loss"].detach())
      actor_loss /= c.policy_frequency
      alpha_loss /= c.policy_frequency
    sync()  # Its Synchronization counts to the frequency.
    return {
      "qf_loss": q["qf_loss"].detach(),
      "qf1_values": q["qf1_values"].detach(),
      "actor_loss": torch.tensor(actor_loss),
      "alpha": q["alpha"].detach(),
      "alpha_loss": torch.tensor(alpha_loss),
      "actor_updated": torch.tensor(updated),
    }

  # --- the in-graph loop -----------------------------------------------------

  @api
  def reset_env(self, seed):
    return self._graph_fn_reset_env(seed)

  @api
  def train(self, num_steps):
    return self._graph_fn_train(
      num_steps,
      inline(self.get_actions),
      inline(self.observe),
      inline(self.update),
    )

  @graph_fn
  def _graph_fn_reset_env(self, seed):
    obs = tf.cast(in_graph.tf_reset(self.env, seed), tf.float32)
    self.last_obs.assign(obs)
    return tf.identity(obs)

  @_graph_fn_reset_env.torch
  def _graph_fn_reset_env(self, seed):
    obs = in_graph.torch_reset(self.env, int(seed)).float()
    with torch.no_grad():
      self.last_obs.copy_(obs)
    return obs.clone()

  def _zero_totals(self, zero_int, zero_float):
    out = {k: zero_int for k in ("episodes", "length_sum", "updates")}
    out["actor_updates"] = zero_int
    for k in ("return_sum", "qf_loss_sum", "qf1_values_sum"):
      out[k] = zero_float
    for k in ("actor_loss_sum", "alpha_loss_sum", "alpha"):
      out[k] = zero_float
    return out

  @graph_fn
  def _graph_fn_train(self, num_steps, act, observe, update):
    c, n = self.config, self.env.num_envs
    dim = len(self.low)

    def random_actions():
      # Straight from the generator: a deferred draw (checks.tf_draw)
      # would repeat one seed until the call ends.
      return self.rng.uniform([n, dim], self.low, self.high, dtype=tf.float32)

    def learn():
      out = update()
      return (
        tf.constant(1, tf.int64),
        tf.cast(out["actor_updated"], tf.int64),
        out["qf_loss"],
        out["qf1_values"],
        out["actor_loss"],
        out["alpha_loss"],
        out["alpha"],
      )

    def rest(alpha):
      zero = tf.constant(0, tf.int64)
      return (zero, zero, 0.0, 0.0, 0.0, 0.0, alpha)

    def body(i, totals, obs):
      before = self.env_steps.read_value()
      random = before < c.learning_starts
      actions = tf.cond(random, random_actions, lambda: act(obs)["actions"])
      # The update runs BEFORE this step's transition is stored, so the
      # env step (which needs only the actions) overlaps it; its batch
      # comes from the transitions before this one. The act above reads
      # the actor before the update writes it, as in CleanRL. (The first
      # step has nothing stored yet to sample, whatever num_envs.)
      started = (before > 0) & (before + n > c.learning_starts)
      learned = tf.cond(started, learn, lambda: rest(totals["alpha"]))
      step = in_graph.tf_step(self.env, actions)
      final = tf.cast(step.final_obs, tf.float32)
      stored = observe(obs, actions, step.rewards, final, step.terminated)
      with tf.control_dependencies([stored]):
        self.env_steps.assign_add(n)
      done = step.terminated | step.truncated
      new = dict(
        zip(
          (
            "updates",
            "actor_updates",
            "qf_loss_sum",
            "qf1_values_sum",
            "actor_loss_sum",
            "alpha_loss_sum",
          ),
          learned[:-1],
        )
      )
      new["episodes"] = tf.reduce_sum(tf.cast(done, tf.int64))
      new["return_sum"] = tf.reduce_sum(step.episode_returns)
      new["length_sum"] = tf.reduce_sum(tf.cast(step.episode_lengths, tf.int64))
      out = {k: totals[k] + v for k, v in new.items()}
      out["alpha"] = learned[-1]
      return i + 1, out, tf.cast(step.obs, tf.float32)

    zeros = self._zero_totals(tf.constant(0, tf.int64), tf.constant(0.0))
    _, totals, obs = tf.while_loop(
      lambda i, *_: i < num_steps,
      body,
      (tf.constant(0), zeros, self.last_obs.read_value()),
      parallel_iterations=1,
    )
    self.last_obs.assign(obs)
    totals["env_steps"] = tf.identity(self.env_steps)
    return totals

  @_graph_fn_train.torch
  def _graph_fn_train(self, num_steps, act, observe, update):
    c, n = self.config, self.env.num_envs
    totals = self._zero_totals(0, 0.0)
    low, high = torch.as_tensor(self.low), torch.as_tensor(self.high)
    for _ in range(int(num_steps)):
      obs = self.last_obs.clone()
      if int(self.env_steps) < c.learning_starts:
        u = torch.rand((n, len(self.low)), generator=self.rng)
        actions = low + (high - low) * u
      else:
        actions = act(obs)["actions"].detach()
      # The update before the store, as the TF loop orders them.
      before = int(self.env_steps)
      if before > 0 and before + n > c.learning_starts:
        # `update` differentiates in APIs it inlines: the executor, which
        # looks one inline deep, runs `train` without autograd.
        with torch.enable_grad():
          out = update()
        totals["updates"] += 1
        totals["actor_updates"] += int(out["actor_updated"])
        for k in ("qf_loss", "qf1_values", "actor_loss", "alpha_loss"):
          totals[k + "_sum"] += float(out[k])
        totals["alpha"] = float(out["alpha"])
      step = in_graph.torch_step(self.env, actions)
      observe(
        obs, actions, step.rewards, step.final_obs.float(), step.terminated
      )
      with torch.no_grad():
        self.env_steps += n
        self.last_obs.copy_(step.obs.float())
      done = step.terminated | step.truncated
      totals["episodes"] += int(done.sum())
      totals["return_sum"] += float(step.episode_returns.sum())
      totals["length_sum"] += int(step.episode_lengths.sum())
    out = {k: torch.tensor(v) for k, v in totals.items()}
    out["env_steps"] = self.env_steps.clone()
    return out

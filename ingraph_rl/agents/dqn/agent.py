"""The DQN agent: act, observe, update and sync as graph APIs, plus an
in-graph training loop over a vector environment.

Built through `DQNBuilder` (agents/dqn/builder.py), which declares its
root APIs and their input spaces:

    builder = DQNBuilder(DQNConfig(num_actions=2))
    executor = builder.make_agent(env=env).build()
    _ = executor.execute("reset_env", 0)
    stats = executor.execute("train", 200)   # 200 vector steps, 1 call
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.agents.dqn.config import DQNConfig
from ingraph_rl.agents.dqn.networks import QNetwork, TargetQNetwork
from ingraph_rl.components.explorations import EpsilonGreedy, LinearDecay
from ingraph_rl.components.losses import DQNLoss
from ingraph_rl.components.memories import (
  FrameStackReplay,
  NStepAccumulator,
  PrioritizedReplay,
  ReplayMemory,
)
from ingraph_rl.components.optimizers import Adam
from ingraph_rl.core import Component, api, graph_fn, inline
from ingraph_rl.environments import in_graph
from ingraph_rl.errors import BuildError
from ingraph_rl.spaces import BoxSpace
from ingraph_rl.utils.lazy import torch


class DQNAgent(Component):
  """DQN with double-Q, dueling, n-step, prioritized and frame-stack replay
  options.

  APIs (fixed dict results):
    get_actions(states, explore) -> {"actions", "q_values", "epsilon"}
    observe(states, actions, rewards, next_states, terminals) -> size; with
      n_step > 1 also `truncated` (last): steps go through an
      `NStepAccumulator` (one row per env, `num_envs` rows every call) and
      the memory stores n-step transitions with their bootstrap discounts
      (with frame_stack_replay also `truncated`, see below).
    update() -> {"loss", "grad_norm", "mean_q"}: sample a batch, the loss,
      (prioritized) new priorities |td| + 1e-6, and one optimizer step. A
      refused update (an empty memory, non-finite priorities) is a
      SpaceError that changes nothing: not the weights, the optimizer's
      step count and slots, the priorities or the RNG.
    sync_target() -> True
    get_weights() -> the online Q-network's variables by relative path.
    get_train_step() -> int64 number of updates so far (the optimizer's
      step count).
  With an environment (any `VectorEnv`), also:
    reset_env(seed) -> first observations; train(num_steps) -> {"episodes",
      "return_sum", "length_sum", "loss_sum", "updates", "env_steps"}: a
      tf.while_loop of `num_steps` vector steps (act, step the env, update
      every `update_every`, sync every `target_sync_every`) in ONE graph
      call. A vector step's transitions go in at the start of the next
      (beside its act, off the path from one env step to the next) and at
      the end of the call, so the update samples the memory as it was
      before the vector step's transitions go in and runs beside the env
      step. A call that fails part-way (an env error, a refused update)
      leaves the loop out of step with the env: `reset_env` before the
      next call.

  `env_groups=2` (the env a `GroupedVectorEnv` of groups A and B)
  double-buffers the loop as the IMPALA stepper does: in each vector step
  the Q-network acts on B's observations while A's envs step, then on A's
  next observations while B's envs step. `observe` still gets the whole
  vector step (A's envs, then B's), so memories, stats, update and sync
  counts and the epsilon schedule (one step per vector step) are those of
  one group for the same actions. Only the random draws differ, and A's
  next actions come before the vector step's update: where one falls, A
  acts on weights one update older (Sample Factory's policy lag). The
  torch build steps the groups as one env.

  `optimizer`: any optimizer with the callable form
  (`components.optimizers`, e.g. `Evolutionary`) in place of Adam: `update`
  then hands it `batch_loss` (the TD loss of the sampled batch, targets
  computed once at the weights the update starts from), and its "grad_norm"
  is 0 unless the optimizer reports one (TensorForce's interchangeable
  optimizers). Not with prioritized replay.

  Truncated episodes are not terminal: the memory stores the true last
  observation (`final_obs`) as next state and the target bootstraps. With
  n_step > 1 no transition crosses an episode end: at an end the pending
  steps become transitions of fewer steps, bootstrapping with discount^m
  from `final_obs` (or not at all when terminated); `reset_env` drops
  pending steps.

  With `frame_stack_replay` (stacked-frame observations [H, W, stack]) a
  `FrameStackReplay` replaces accumulator and memory: `observe` inserts
  ONE step per env (`num_envs` rows every call, in the same env order;
  `truncated` is an input, `next_states` is not stored: the next call's
  `states` are) and `update` samples n-step transitions from it, the same
  as the accumulator's except at truncations: with no final observation
  stored they end the episode without bootstrap (as in Dopamine), and so
  do the episodes `reset_env` cuts. Its memory holds each frame once:
  about 1 / (2 * stack) of the bytes of the transitions.
  """

  def __init__(
    self,
    config,
    env=None,
    preprocessor=None,
    scope="dqn",
    observation_space=None,
    optimizer=None,
  ):
    super().__init__(scope=scope)
    if not isinstance(config, DQNConfig):
      raise TypeError("config must be a DQNConfig")
    self.config = config
    self.env = env  # Not a component: stepped via numpy_function.
    if preprocessor is not None:
      self.preprocessor = preprocessor
    else:
      self.preprocessor = None
    c = config
    self.groups = self._env_groups(c, env)
    self.online = QNetwork.from_config(c, "online")
    self.target = TargetQNetwork.from_config(c, "target")
    self.exploration = EpsilonGreedy(
      c.num_actions,
      LinearDecay(c.epsilon_from, c.epsilon_to, c.epsilon_steps),
      seed=c.seed,
    )
    self.num_envs = (
      c.num_envs if c.num_envs is not None else getattr(env, "num_envs", None)
    )
    self.frame_stack = c.frame_stack_replay
    self.accumulator = None
    if self.frame_stack:
      self.memory = self._make_frame_stack_replay(
        c,
        env,
        observation_space
        if observation_space is not None
        else getattr(env, "observation_space", None),
      )
    else:
      self.memory = (
        PrioritizedReplay(
          c.replay_capacity, c.alpha, c.beta, seed=c.seed, scope="memory"
        )
        if c.prioritized
        else ReplayMemory(c.replay_capacity, seed=c.seed, scope="memory")
      )
      if c.n_step > 1:
        self.accumulator = self._make_accumulator(c, env)
    self._check_first_update(c, env)
    self.loss = DQNLoss(c.discount, c.n_step, c.double_q, c.huber_delta)
    self.callable_update = optimizer is not None
    if self.callable_update and c.prioritized:
      raise BuildError(
        "DQNAgent: a given optimizer (the callable form) does not support "
        "prioritized replay"
      )
    self.optimizer = (
      optimizer
      if optimizer is not None
      else Adam(
        c.learning_rate,
        epsilon=c.adam_epsilon,
        clip_global_norm=c.clip_grad_norm,
      )
    )

  def _env_groups(self, c, env):
    """The env's groups the loop steps in turn (one: the env itself)."""
    if env is None or c.env_groups == 1:
      return (env,)
    groups = tuple(getattr(env, "groups", ()))
    if len(groups) != c.env_groups:
      raise BuildError(
        f"DQNAgent: env_groups={c.env_groups} needs an env of that many "
        f"groups (a GroupedVectorEnv, environments/env_groups.py), got a "
        f"{type(env).__name__} of {len(groups)} groups"
      )
    return groups

  def _check_streams(self, c, env, what):
    """Checks the per-env streams of `what` (an n-step window, a frame
    ring): their number is known and agrees with the env."""
    if self.num_envs is None:
      raise BuildError(
        f"DQNAgent: {what}; give DQNConfig(num_envs=...) (rows per observe "
        f"call) or an env"
      )
    if env is not None and self.num_envs != env.num_envs:
      raise BuildError(
        f"DQNAgent: config.num_envs={c.num_envs} but the env has {env.num_envs}"
      )

  def _check_first_update(self, c, env):
    """`train`'s first update (at learning_starts env steps) samples the
    memory before that vector step goes in, so it must hold something by
    then: n-step windows store step t once step t + n - 1 is in, a
    FrameStackReplay samples it once t + n is."""
    if env is None:
      return
    lag = c.n_step + (1 if c.frame_stack_replay else 0)
    if c.learning_starts <= lag * env.num_envs:
      what = "n_step + 1" if c.frame_stack_replay else "n_step"
      raise BuildError(
        f"DQNAgent: learning_starts must exceed ({what}) * num_envs = "
        f"{lag * env.num_envs}, so the memory can sample at the first update "
        f"(it runs before that vector step is stored)"
      )

  def _make_accumulator(self, c, env):
    self._check_streams(c, env, "n_step > 1 keeps per-env n-step windows")
    return NStepAccumulator(c.n_step, c.discount, self.num_envs, scope="n_step")

  def _make_frame_stack_replay(self, c, env, space):
    if c.prioritized:  # DQNConfig refuses it too.
      raise BuildError(
        "DQNAgent: frame_stack_replay does not support prioritized replay"
      )
    if (
      not isinstance(space, BoxSpace)
      or len(space.shape) != 3
      or space.dtype.kind not in "iuf"
    ):
      raise BuildError(
        f"DQNAgent: frame_stack_replay needs stacked-frame observations, a "
        f"numeric box of shape [H, W, stack] (the stack last), got {space!r}"
      )
    self._check_streams(c, env, "frame_stack_replay keeps one ring per env")
    return FrameStackReplay(
      c.replay_capacity,
      self.num_envs,
      stack=space.shape[-1],
      seed=c.seed,
      n_step=c.n_step,
      discount=c.discount,
      scope="memory",
    )

  # --- building --------------------------------------------------------------

  def create_variables(self, input_spaces):
    if self.env is None:
      return
    obs = self.env.observation_space
    n = self.env.num_envs
    self.last_obs = self.add_variable(
      "last_obs", (n,) + obs.shape, obs.dtype, trainable=False
    )
    self.vector_steps = self.add_variable(
      "vector_steps", (), np.int64, trainable=False
    )

  variable_args = ()

  # --- acting and learning ---------------------------------------------------

  def _preprocess(self, states):
    return (
      states if self.preprocessor is None else self.preprocessor.call(states)
    )

  @api
  def get_actions(self, states, explore=True):
    return self._actions(states, explore, advance=True)

  @api
  def get_held_actions(self, states):
    """`get_actions(states)` (exploring) without the epsilon schedule's
    step: the grouped loop's calls but the last of a vector step. Not a
    root API unless named in `api_names`."""
    return self._actions(states, True, advance=False)

  @classmethod
  def internal_apis(cls):
    return super().internal_apis() | {"get_held_actions", "batch_loss"}

  def _actions(self, states, explore, advance):
    q_values = self.online.call(self._preprocess(states))
    out = self.exploration.get_action(q_values, explore, advance=advance)
    return {
      "actions": out["action"],
      "q_values": q_values,
      "epsilon": out["epsilon"],
    }

  @api
  def observe(
    self, states, actions, rewards, next_states, terminals, truncated=None
  ):
    return self._observe(
      states, actions, rewards, next_states, terminals, truncated
    )

  @api
  def observe_step(
    self, states, actions, rewards, next_states, terminals, truncated
  ):
    """`observe` with `truncated` always an input: what the in-graph loop
    inlines (an inlined API keeps Python defaults)."""
    return self._observe(
      states, actions, rewards, next_states, terminals, truncated
    )

  def _observe(
    self, states, actions, rewards, next_states, terminals, truncated
  ):
    if self.frame_stack:
      # One step per env; the next call's states are these next_states.
      ends = (
        terminals
        if truncated is None
        else self._graph_fn_episode_ends(terminals, truncated)
      )
      return self.memory.insert(
        {
          "states": states,
          "actions": actions,
          "rewards": rewards,
          "terminals": ends,
        }
      )
    if self.accumulator is None:
      return self.memory.insert(
        {
          "states": states,
          "actions": actions,
          "rewards": rewards,
          "next_states": next_states,
          "terminals": terminals,
        }
      )
    return self.memory.insert(
      self.accumulator.push(
        states, actions, rewards, next_states, terminals, truncated
      )
    )

  @api
  def update(self):
    c = self.config
    batch = self.memory.sample(c.batch_size)
    # FrameStackReplay returns the transitions themselves.
    records = batch if self.frame_stack else batch["records"]
    if self.callable_update:
      return self._minimize(records)
    q_values = self.online.call(self._preprocess(records["states"]))
    next_states = self._preprocess(records["next_states"])
    weights = (
      batch["weights"]
      if c.prioritized
      else self._graph_fn_ones(records["rewards"])
    )
    # n-step records carry discount^m (m < n after an episode end).
    discounts = (
      records["discounts"]
      if self.accumulator is not None or self.frame_stack
      else None
    )
    out = self.loss.loss(
      q_values,
      records["actions"],
      records["rewards"],
      records["terminals"],
      self.target.call(next_states),
      self.online.call(next_states),
      weights,
      discounts,
    )
    loss = out["loss"]
    if c.prioritized:
      # New priorities first: their checks (finite, > 0) then run before
      # the optimizer writes anything, so a refused update changes nothing.
      done = self.memory.update_priorities(
        batch["indices"], self._graph_fn_priorities(out["td_errors"])
      )
      loss = self._graph_fn_after(loss, done)
    stats = self.optimizer.step(loss, self.online.variables())
    return {
      "loss": out["loss"],
      "grad_norm": stats["grad_norm"],
      "mean_q": self._graph_fn_mean(q_values),
    }

  def _minimize(self, records):
    """`update` with an optimizer of the callable form: the targets once,
    then the optimizer evaluates `batch_loss` as often as it needs."""
    next_states = self._preprocess(records["next_states"])
    batch = {
      key: records[key] for key in ("states", "actions", "rewards", "terminals")
    }
    batch["target_q"] = self.target.call(next_states)
    batch["online_next_q"] = self.online.call(next_states)
    if self.accumulator is not None or self.frame_stack:
      batch["discounts"] = records["discounts"]
    stats = self.optimizer.minimize(
      inline(self.batch_loss), self.online.variables(), batch
    )
    grad_norm = (
      stats["grad_norm"]
      if "grad_norm" in self.optimizer.stats_spec({})
      else self._graph_fn_zero(stats["loss"])
    )
    return {
      "loss": stats["loss"],
      "grad_norm": grad_norm,
      "mean_q": stats["mean_q"],
    }

  @api
  def batch_loss(self, batch):
    """{"loss", "mean_q"} of a sampled batch at the current weights (the
    targets are in the batch): what a callable-form optimizer evaluates."""
    q_values = self.online.call(self._preprocess(batch["states"]))
    out = self.loss.loss(
      q_values,
      batch["actions"],
      batch["rewards"],
      batch["terminals"],
      batch["target_q"],
      batch["online_next_q"],
      self._graph_fn_ones(batch["rewards"]),
      batch["discounts"]
      if self.accumulator is not None or self.frame_stack
      else None,
    )
    return {"loss": out["loss"], "mean_q": self._graph_fn_mean(q_values)}

  @graph_fn
  def _graph_fn_zero(self, like):
    return tf.zeros_like(like)

  @_graph_fn_zero.torch
  def _graph_fn_zero(self, like):
    return torch.zeros_like(like)

  @api
  def sync_target(self):
    return self.target.sync(self.online.variables())

  @api
  def get_weights(self):
    return self.online.variables()

  @api
  def get_train_step(self):
    return self.optimizer.get_iterations()

  @graph_fn
  def _graph_fn_after(self, value, done):
    """`value`, once `done` is computed (an ordering, no arithmetic)."""
    with tf.control_dependencies([done]):
      return tf.identity(value)

  @_graph_fn_after.torch
  def _graph_fn_after(self, value, done):
    return value  # Eager: `done` ran already.

  @graph_fn
  def _graph_fn_episode_ends(self, terminals, truncated):
    return tf.logical_or(terminals, truncated)

  @_graph_fn_episode_ends.torch
  def _graph_fn_episode_ends(self, terminals, truncated):
    return terminals | truncated

  @graph_fn
  def _graph_fn_ones(self, like):
    return tf.ones_like(like)

  @_graph_fn_ones.torch
  def _graph_fn_ones(self, like):
    return torch.ones_like(like)

  @graph_fn
  def _graph_fn_priorities(self, td_errors):
    return tf.abs(td_errors) + 1e-6

  @_graph_fn_priorities.torch
  def _graph_fn_priorities(self, td_errors):
    return td_errors.abs() + 1e-6

  @graph_fn
  def _graph_fn_mean(self, x):
    return tf.reduce_mean(x)

  @_graph_fn_mean.torch
  def _graph_fn_mean(self, x):
    return x.mean()

  # --- the in-graph loop -------------------------------------------------

  @api
  def reset_env(self, seed):
    if self.accumulator is not None:
      # Pending steps of the cut episodes must not join the new ones.
      self.accumulator.clear()
    if self.frame_stack:
      # Nor may the stored windows reach into the new episodes.
      self.memory.end_episodes()
    return self._graph_fn_reset_env(seed)

  @api
  def train(self, num_steps):
    grouped = len(self.groups) > 1
    return self._graph_fn_train(
      num_steps,
      inline(self.get_actions),
      inline(self.get_held_actions) if grouped else None,
      inline(self.observe_step),
      inline(self.update),
      inline(self.sync_target),
    )

  @graph_fn
  def _graph_fn_reset_env(self, seed):
    obs = in_graph.tf_reset(self.env, seed)
    self.last_obs.assign(obs)
    return tf.identity(obs)

  @_graph_fn_reset_env.torch
  def _graph_fn_reset_env(self, seed):
    obs = in_graph.torch_reset(self.env, int(seed))
    with torch.no_grad():
      self.last_obs.copy_(obs)
    return obs

  def _due(self, steps, every, n):
    """Whether a multiple of `every` env steps was crossed by this call."""
    return (steps // every) != ((steps - n) // every)

  def _grouped_step(self, act, hold, obs, pending, more):
    """One vector step of the groups: `pending` (group 0's actions, chosen
    while the last group's envs stepped) -> (all actions, the whole
    step, group 0's next actions if `more` else zeros). All but the last
    group to act in a vector step act with `hold` (`get_held_actions`):
    the epsilon schedule takes one step per vector step, as with one
    group."""
    sizes = [group.num_envs for group in self.groups]
    parts = tf.split(obs, sizes)
    # Groups 1.. act beside group 0's env step. Data flow alone overlaps
    # them: TF's automatic control dependencies chain the env steps (and
    # other stateful ops without resources), not the Q-network.
    actions = [pending] + [hold(x)["actions"] for x in parts[1:-1]]
    actions.append(act(parts[-1])["actions"])
    steps = [
      in_graph.tf_step(group, a, name=f"env_step_{g}")
      for g, (group, a) in enumerate(zip(self.groups, actions))
    ]
    # Group 0 acts on its next observations beside the other groups' env
    # steps; not after the last vector step (the next call acts then).
    pending = tf.cond(
      more,
      lambda: hold(steps[0].obs)["actions"],
      lambda: tf.zeros([sizes[0]], tf.int64),
    )
    step = type(steps[0])(*(tf.concat(xs, 0) for xs in zip(*steps)))
    return tf.concat(actions, 0), step, pending

  @graph_fn
  def _graph_fn_train(self, num_steps, act, hold, observe, update, sync):
    c, n = self.config, self.env.num_envs
    grouped = len(self.groups) > 1

    def observed(transition):
      """`observe(*transition)` -> True once it ran (a tf.cond output)."""
      with tf.control_dependencies(tf.nest.flatten(observe(*transition))):
        return tf.constant(True)

    def body(i, totals, obs, held, *pending):
      # `held`: the last vector step's transitions. They go in here, beside
      # this step's act (which needs only `obs`), not on the path from one
      # env step to the next; the update below still samples the memory as
      # it was before this step's transitions go in.
      tf.cond(i > 0, lambda: observed(held), lambda: tf.constant(False))
      if grouped:
        actions, step, next_actions = self._grouped_step(
          act, hold, obs, pending[0], i + 1 < num_steps
        )
        pending = (next_actions,)
      else:
        actions = act(obs)["actions"]
        step = in_graph.tf_step(self.env, actions)
      # Nothing of the update waits for the env step: TF runs the two side
      # by side (automatic control dependencies order the update after the
      # act's reads of the weights and the observe's writes of the memory).
      vsteps = self.vector_steps.read_value() + 1
      learn = (vsteps * n >= c.learning_starts) & (vsteps % c.update_every == 0)
      loss = tf.cond(learn, lambda: update()["loss"], lambda: 0.0)
      vsteps = self.vector_steps.assign_add(1)
      synced = tf.cond(
        vsteps % c.target_sync_every == 0,
        lambda: sync(),
        lambda: tf.constant(False),
      )
      done = step.terminated | step.truncated
      with tf.control_dependencies([synced]):
        new = {
          "episodes": tf.reduce_sum(tf.cast(done, tf.int64)),
          "return_sum": tf.reduce_sum(step.episode_returns),
          "length_sum": tf.reduce_sum(tf.cast(step.episode_lengths, tf.int64)),
          "loss_sum": loss,
          "updates": tf.cast(learn, tf.int64),
        }
      held = step.transition(obs, actions)
      totals = {k: totals[k] + v for k, v in new.items()}
      return (i + 1, totals, step.obs, held) + pending

    zeros = {
      "episodes": tf.constant(0, tf.int64),
      "return_sum": 0.0,
      "length_sum": tf.constant(0, tf.int64),
      "loss_sum": 0.0,
      "updates": tf.constant(0, tf.int64),
    }
    obs = self.last_obs.read_value()
    none = tf.zeros([n], tf.bool)
    nothing_held = (
      tf.zeros_like(obs),
      tf.zeros([n], tf.int64),
      tf.zeros([n], tf.float32),
      tf.zeros_like(obs),
      none,
      none,
    )
    pending = ()
    if grouped:  # Group 0's actions for the first vector step.
      pending = (hold(obs[: self.groups[0].num_envs])["actions"],)
    _, totals, obs, held, *_ = tf.while_loop(
      lambda i, *_: i < num_steps,
      body,
      (tf.constant(0), zeros, obs, nothing_held) + pending,
      parallel_iterations=1,
    )
    ran = tf.cond(
      num_steps > 0, lambda: observed(held), lambda: tf.constant(False)
    )
    with tf.control_dependencies([ran]):
      self.last_obs.assign(obs)
    totals["env_steps"] = self.vector_steps * n
    return totals

  @_graph_fn_train.torch
  def _graph_fn_train(self, num_steps, act, hold, observe, update, sync):
    del hold  # The torch build steps the groups as one env.
    c, n = self.config, self.env.num_envs
    totals = {
      "episodes": 0,
      "return_sum": 0.0,
      "length_sum": 0,
      "loss_sum": 0.0,
      "updates": 0,
    }
    for _ in range(int(num_steps)):
      obs = self.last_obs.clone()
      actions = act(obs)["actions"]
      step = in_graph.torch_step(self.env, actions)
      vsteps = int(self.vector_steps) + 1
      # As in TF: the update before this step's transitions go in.
      if vsteps * n >= c.learning_starts and vsteps % c.update_every == 0:
        totals["loss_sum"] += float(update()["loss"].detach())
        totals["updates"] += 1
      observe(*step.transition(obs, actions))
      with torch.no_grad():
        self.last_obs.copy_(step.obs)
        self.vector_steps += 1
      if vsteps % c.target_sync_every == 0:
        sync()
      done = step.terminated | step.truncated
      totals["episodes"] += int(done.sum())
      totals["return_sum"] += float(step.episode_returns.sum())
      totals["length_sum"] += int(step.episode_lengths.sum())
    out = {k: torch.tensor(v) for k, v in totals.items()}
    out["env_steps"] = self.vector_steps * n
    return out

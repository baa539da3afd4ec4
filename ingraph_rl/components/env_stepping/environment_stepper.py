"""The environment stepper: T steps of policy -> action -> env step in ONE
graph call (a `tf.while_loop`), returning an IMPALA-style rollout; with
`env_groups=2` two groups of envs double-buffered, one group's env step
beside the policy on the other's observations.

The environment's state lives in variables between calls: the last
observation (one variable per leaf of a Dict observation, strings
included), reward, done, truncation flags and bootstrap value, the last
action and its logits, the policy's recurrent state, and the running
episode return and length. Env stepping goes through `tf.numpy_function`
(see `environments/in_graph.py`), so the stepper is never part of an
exported SavedModel.
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.core import Component, api, graph_fn, inline
from ingraph_rl.environments import in_graph
from ingraph_rl.errors import BuildError
from ingraph_rl.executors import gradients
from ingraph_rl.spaces import BoolBox, BoxSpace, Dict, FloatBox, IntBox, TextBox


def tree_path(key):
  """A flattened space's key (a path tuple or a name) as a tuple."""
  return key if isinstance(key, tuple) else (key,)


# Fields of a rollout, each time-major [T + 1, num_envs, ...].
ROLLOUT_FIELDS = (
  "observations",
  "rewards",
  "dones",
  "actions",
  "logits",
  "truncated",
  "bootstrap_value",
)


def _with_steps(space, steps):
  """`space` (a box, or a Dict of boxes) with a leading dim `steps` on every
  leaf, bounds dropped (queues check shapes and dtypes only)."""
  if isinstance(space, Dict):
    return Dict({k: _with_steps(s, steps) for k, s in space.items()})
  if not isinstance(space, BoxSpace):
    raise TypeError(f"no rollout leaf for {space!r}")
  return type(space)(shape=(steps,) + tuple(space.shape), dtype=space.dtype)


def rollout_space(observation_space, num_actions, unroll_length):
  """The space of one env's `unroll()` rollout, per field [T + 1, ...]
  (without "initial_state", which has the policy's state space)."""
  steps = int(unroll_length) + 1
  fields = {
    "observations": _with_steps(observation_space, steps),
    "rewards": FloatBox((steps,)),
    "dones": BoolBox((steps,)),
    "actions": IntBox(num_actions, shape=(steps,), dtype=np.int64),
    "logits": FloatBox((steps, num_actions)),
    "truncated": BoolBox((steps,)),
    "bootstrap_value": FloatBox((steps,)),
  }
  assert tuple(fields) == ROLLOUT_FIELDS
  return Dict(fields)


def _empty_strings(shape, dtype, rng):
  del dtype, rng
  out = np.empty(shape, dtype=object)
  out.fill(b"")
  return out


def _nest_map(fn, *nests):
  return tf.nest.map_structure(fn, *nests)


def _split(nest, sizes):
  """A nest of [N, ...] tensors -> per group, the nest of its [size, ...]
  rows."""
  if len(sizes) == 1:
    return [nest]
  parts = [tf.split(x, sizes) for x in tf.nest.flatten(nest)]
  return [
    tf.nest.pack_sequence_as(nest, [p[g] for p in parts])
    for g in range(len(sizes))
  ]


def _concat(nests, axis):
  """Per group nests -> one, concatenated along `axis` (the env axis)."""
  if len(nests) == 1:
    return nests[0]
  return _nest_map(lambda *xs: tf.concat(xs, axis), *nests)


class EnvironmentStepper(Component):
  """Steps a `VectorEnv` with a policy, `unroll_length` steps per call.

  `policy` is a component with the APIs `act(observations [B, 1, ...],
  state, resets [B, 1], last_rewards [B, 1], last_actions [B, 1])` -> a
  dict with at least "action" [B, 1], "logits" [B, 1, A] and "state" (a
  nest of [B, ...]), and (for `bootstrap_on_truncation`) `values(...)` (the
  same arguments) -> [B, 1]. `state_space` is the state's space (with a
  batch rank) and fixes the recurrent-state variables. Observations may be
  a Dict (nest) of boxes, text leaves included.

  `env_groups=2` double-buffers (Sample Factory's scheme): `env` is then a
  `GroupedVectorEnv` of groups A and B (`environments/env_groups.py`), and
  each step the policy acts on B's observations while A's envs step, then
  on A's next ones while B's envs step (independent ops of one graph run
  at once on TF's inter-op threads). Rollouts, stats and carried state are
  as with one group, the env axis holding A's envs then B's; only the
  random draws of the sampling differ.

  The policy sees at step t observation t, the reward that came with it
  and the action that led to it: exactly the rollout's rewards[t] and
  actions[t], so a learner feeding those recomputes the actor's logits.

  APIs:
    act(observations, state, resets, last_rewards, last_actions): the
      policy's `act` (a root API builds the policy's variables).
    set_policy_weights(weights): the policy's `set_weights`.
    reset(seed) -> first observations [N, ...]: resets every env (seed < 0:
      unseeded) and the carried state (done flags True, so the policy's
      state is zeroed before the first step; last reward and action 0).
    unroll() -> {"rollout", "stats"}:
      rollout: time-major [T + 1, N, ...] "observations", "rewards",
        "dones" (terminated or truncated), "actions", "logits",
        "truncated" (the episode was cut short, not terminal: truncated
        and not terminated), "bootstrap_value" (where truncated, with
        `bootstrap_on_truncation`: the policy's value of the episode's
        true last observation, `final_obs`, from the recurrent state after
        the step, without a reset; else 0), and "initial_state" (the
        policy state before step 0, [N, ...]).
        Index 0 is the last step of the previous unroll; at index t the
        action and logits are those that LED to observation t (chosen at
        observation t - 1), and reward t, done t, truncated t and
        bootstrap value t came with observation t (IMPALA's layout). With
        same-step autoreset, observation t is the first of a new episode
        where done t is True.
      stats: "episodes" (finished in this call), "return_sum",
        "length_sum" (of those episodes), "env_steps" (N * T), and per
        env [N]: "episodes_per_env" int64, "return_sum_per_env" float32,
        "length_sum_per_env" int64.
  """

  def __init__(
    self,
    env,
    policy,
    state_space,
    num_actions,
    unroll_length,
    bootstrap_on_truncation=True,
    env_groups=1,
    scope="environment_stepper",
  ):
    super().__init__(scope=scope)
    if unroll_length < 1:
      raise BuildError(
        f"'{scope}': unroll_length must be >= 1, got {unroll_length}"
      )
    self.env = env  # Stepped via numpy_function.
    if env_groups == 1:
      self.groups = (env,)
    else:
      self.groups = tuple(getattr(env, "groups", ()))
      if env_groups < 1 or len(self.groups) != env_groups:
        raise BuildError(
          f"'{scope}': env_groups={env_groups} needs an env of that many "
          f"groups (a GroupedVectorEnv: make_actor_env(..., "
          f"env_groups={env_groups})), got a {type(env).__name__} of "
          f"{len(self.groups)} groups"
        )
    self.policy = policy
    self.state_space = state_space
    self.num_actions = int(num_actions)
    self.unroll_length = int(unroll_length)
    self.bootstrap_on_truncation = bool(bootstrap_on_truncation)
    self.num_envs = env.num_envs

  variable_args = ()

  def create_variables(self, input_spaces):
    n, obs = self.num_envs, self.env.observation_space

    def var(name, shape, dtype, initializer="zeros"):
      return self.add_variable(name, shape, dtype, initializer, trainable=False)

    def name(prefix, key):
      return "_".join((prefix,) + tuple(map(str, tree_path(key))))

    self.obs_vars = {
      key: var(
        name("last_obs", key),
        (n,) + tuple(space.shape),
        space.dtype,
        _empty_strings if isinstance(space, TextBox) else "zeros",
      )
      for key, space in obs.flatten()
    }
    self.last_reward = var("last_reward", (n,), np.float32)
    self.last_done = var("last_done", (n,), np.bool_)
    self.last_action = var("last_action", (n,), np.int64)
    self.last_logits = var("last_logits", (n, self.num_actions), np.float32)
    self.last_truncated = var("last_truncated", (n,), np.bool_)
    self.last_bootstrap = var("last_bootstrap_value", (n,), np.float32)
    self.episode_return = var("episode_return", (n,), np.float32)
    self.episode_length = var("episode_length", (n,), np.int32)
    self.state_vars = {
      key: var(name("state", key), (n,) + tuple(space.shape), space.dtype)
      for key, space in self.state_space.flatten()
    }

  def _read(self, space, variables):
    return space.unflatten_value(
      [variables[k].read_value() for k, _ in space.flatten()]
    )

  def _assign(self, space, variables, value):
    leaves = space.flatten_value(value)
    return [
      variables[k].assign(v) for (k, _), v in zip(space.flatten(), leaves)
    ]

  @api
  def act(self, observations, state, resets, last_rewards, last_actions):
    return self.policy.act(
      observations, state, resets, last_rewards, last_actions
    )

  @api
  def set_policy_weights(self, weights):
    return self.policy.set_weights(weights)

  @api
  def reset(self, seed):
    return self._graph_fn_reset(seed)

  @api
  def unroll(self):
    values = (
      inline(self.policy.values) if self.bootstrap_on_truncation else None
    )
    return self._graph_fn_unroll(inline(self.act), values)

  @graph_fn
  def _graph_fn_reset(self, seed):
    obs = in_graph.tf_reset(self.env, seed)
    n = self.num_envs
    ops = self._assign(self.env.observation_space, self.obs_vars, obs)
    ops += [
      self.last_reward.assign(tf.zeros([n])),
      self.last_done.assign(tf.ones([n], tf.bool)),
      self.last_action.assign(tf.zeros([n], tf.int64)),
      self.last_logits.assign(tf.zeros([n, self.num_actions])),
      self.last_truncated.assign(tf.zeros([n], tf.bool)),
      self.last_bootstrap.assign(tf.zeros([n])),
      self.episode_return.assign(tf.zeros([n])),
      self.episode_length.assign(tf.zeros([n], tf.int32)),
    ]
    ops += [v.assign(tf.zeros_like(v)) for v in self.state_vars.values()]
    with tf.control_dependencies(ops):
      return _nest_map(tf.identity, obs)

  @graph_fn
  def _graph_fn_unroll(self, act, values):
    T, n, A = self.unroll_length, self.num_envs, self.num_actions
    obs_space = self.env.observation_space
    first = {
      "observations": self._read(obs_space, self.obs_vars),
      "rewards": self.last_reward.read_value(),
      "dones": self.last_done.read_value(),
      "actions": self.last_action.read_value(),
      "logits": self.last_logits.read_value(),
      "truncated": self.last_truncated.read_value(),
      "bootstrap_value": self.last_bootstrap.read_value(),
    }
    initial_state = self._read(self.state_space, self.state_vars)
    # Per env: what the policy acts on next, and the running stats.
    carried = {
      "obs": first["observations"],
      "done": first["dones"],
      "reward": first["rewards"],
      "action": first["actions"],
      "state": initial_state,
      "ep_ret": self.episode_return.read_value(),
      "ep_len": self.episode_length.read_value(),
      "episodes": tf.zeros([n], tf.int64),
      "return_sum": tf.zeros([n]),
      "length_sum": tf.zeros([n], tf.int64),
    }
    sizes = [env.num_envs for env in self.groups]
    groups = _split(carried, sizes)
    for c, size in zip(groups, sizes):
      c["arrays"] = _nest_map(
        lambda v, size=size: tf.TensorArray(
          v.dtype,
          size=T,
          element_shape=tf.TensorShape([size]).concatenate(v.shape[1:]),
        ),
        first,
      )

    def step_in(x):
      return x[:, None]  # [n] -> [n, T = 1].

    def policy(c):
      out = act(
        _nest_map(step_in, c["obs"]),
        c["state"],
        step_in(c["done"]),
        step_in(c["reward"]),
        step_in(c["action"]),
      )
      return {
        "action": out["action"][:, 0],
        "logits": out["logits"][:, 0],
        "state": out["state"],
      }

    def no_policy(c):
      size = c["action"].shape[0]
      return {
        "action": tf.zeros([size], tf.int64),
        "logits": tf.zeros([size, A]),
        "state": c["state"],
      }

    def bootstrap_values(step, state, action):
      # V(final_obs): the episode goes on from the post-step state, with
      # the reward and action that came with final_obs.
      truncated = step.truncated & ~step.terminated
      size = action.shape[0]
      if values is None:
        return truncated, tf.zeros([size])

      def value():
        v = values(
          _nest_map(step_in, step.final_obs),
          state,
          tf.zeros([size, 1], tf.bool),
          step_in(step.rewards),
          step_in(action),
        )[:, 0]
        return tf.where(truncated, v, 0.0)

      return truncated, tf.cond(
        tf.reduce_any(truncated), value, lambda: tf.zeros([size])
      )

    def env_step(g, t, c, out):
      """Group g's env step with the policy's `out`: its carry after."""
      name = "env_step" if len(sizes) == 1 else f"env_step_{g}"
      step = in_graph.tf_step(self.groups[g], out["action"], name=name)
      new_done = step.terminated | step.truncated
      truncated, bootstrap = bootstrap_values(step, out["state"], out["action"])
      ep_ret = c["ep_ret"] + step.rewards
      ep_len = c["ep_len"] + 1
      ended = tf.cast(new_done, tf.int64)
      record = {
        "observations": step.obs,
        "rewards": step.rewards,
        "dones": new_done,
        "actions": out["action"],
        "logits": out["logits"],
        "truncated": truncated,
        "bootstrap_value": bootstrap,
      }
      return {
        "obs": step.obs,
        "done": new_done,
        "reward": step.rewards,
        "action": out["action"],
        "state": out["state"],
        "ep_ret": tf.where(new_done, 0.0, ep_ret),
        "ep_len": tf.where(new_done, 0, ep_len),
        "episodes": c["episodes"] + ended,
        "return_sum": c["return_sum"] + tf.where(new_done, ep_ret, 0.0),
        "length_sum": c["length_sum"] + tf.cast(ep_len, tf.int64) * ended,
        "arrays": _nest_map(lambda a, x: a.write(t, x), c["arrays"], record),
      }

    def body(t, pending, groups):
      # `pending`: group 0's policy output for step t, computed while the
      # last group's envs stepped. Groups 1.. act now, overlapping group
      # 0's env step. Data flow alone orders the groups: TF's automatic
      # control dependencies chain only the env steps (numpy_functions)
      # and the sampler's generator ops, in this program order.
      outs = [pending] + [policy(c) for c in groups[1:]]
      groups = tuple(
        env_step(g, t, c, out) for g, (c, out) in enumerate(zip(groups, outs))
      )
      # Not after the last step: the next unroll acts on that observation
      # (with the weights it is given).
      pending = tf.cond(
        t + 1 < T,
        lambda: policy(groups[0]),
        lambda: no_policy(groups[0]),
      )
      return t + 1, pending, groups

    with gradients.tf_no_recording():  # No gradient goes through it.
      _, _, groups = tf.while_loop(
        lambda t, *_: t < T,
        body,
        (tf.constant(0), policy(groups[0]), tuple(groups)),
        parallel_iterations=1,
      )
    # [T, n, ...]: group 0's envs, then group 1's, ...
    arrays = _concat(
      [_nest_map(lambda a: a.stack(), c.pop("arrays")) for c in groups], 1
    )
    rollout = _nest_map(lambda x, a: tf.concat([x[None], a], 0), first, arrays)
    final = _concat(groups, 0)
    last = _nest_map(lambda x: x[-1], rollout)
    ops = self._assign(obs_space, self.obs_vars, final["obs"])
    ops += [
      self.last_reward.assign(last["rewards"]),
      self.last_done.assign(final["done"]),
      self.last_action.assign(last["actions"]),
      self.last_logits.assign(last["logits"]),
      self.last_truncated.assign(last["truncated"]),
      self.last_bootstrap.assign(last["bootstrap_value"]),
      self.episode_return.assign(final["ep_ret"]),
      self.episode_length.assign(final["ep_len"]),
    ]
    ops += self._assign(self.state_space, self.state_vars, final["state"])
    with tf.control_dependencies(ops):
      rollout = _nest_map(tf.identity, rollout)
      rollout["initial_state"] = _nest_map(tf.identity, initial_state)
      out_stats = {
        "episodes": tf.reduce_sum(final["episodes"]),
        "return_sum": tf.reduce_sum(final["return_sum"]),
        "length_sum": tf.reduce_sum(final["length_sum"]),
        "env_steps": tf.constant(n * T, tf.int64),
        "episodes_per_env": tf.identity(final["episodes"]),
        "return_sum_per_env": tf.identity(final["return_sum"]),
        "length_sum_per_env": tf.identity(final["length_sum"]),
      }
    return {"rollout": rollout, "stats": out_stats}

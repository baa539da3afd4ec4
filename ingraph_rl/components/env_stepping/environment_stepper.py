"""The environment stepper: T steps of policy -> action -> env step in ONE
graph call (a `tf.while_loop`), returning an IMPALA-style rollout.

The environment's state lives in variables between calls: the last
observation, reward and done flags, the last action and its logits, the
policy's recurrent state, and the running episode return and length. Env
stepping goes through `tf.numpy_function` (see `environments/in_graph.py`),
so the stepper is never part of an exported SavedModel.
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.core import Component, api, graph_fn, inline
from ingraph_rl.environments import in_graph
from ingraph_rl.errors import BuildError

def tree_path(key):
  """A flattened space's key (a path tuple or a name) as a tuple."""
  return key if isinstance(key, tuple) else (key,)


# Fields of a rollout, each time-major [T + 1, num_envs, ...].
ROLLOUT_FIELDS = ("observations", "rewards", "dones", "actions", "logits")


class EnvironmentStepper(Component):
  """Steps a `VectorEnv` with a policy, `unroll_length` steps per call.

  `policy` is a component with the API `act(observations [B, 1, ...],
  state, resets [B, 1])` -> a dict with at least "action" [B, 1], "logits"
  [B, 1, A] and "state" (a nest of [B, ...]); `state_space` is the state's
  space (with a batch rank) and fixes the recurrent-state variables.

  APIs:
    act(observations, state, resets): the policy's `act` (a root API
      builds the policy's variables).
    set_policy_weights(weights): the policy's `set_weights`.
    reset(seed) -> first observations [N, ...]: resets every env (seed < 0:
      unseeded) and the carried state (done flags True, so the policy's
      state is zeroed before the first step).
    unroll() -> {"rollout", "stats"}:
      rollout: time-major [T + 1, N, ...] "observations", "rewards",
        "dones" (terminated or truncated), "actions", "logits", and
        "initial_state" (the policy state before step 0, [N, ...]).
        Index 0 is the last step of the previous unroll; at index t the
        action and logits are those that LED to observation t (chosen at
        observation t - 1), and reward t and done t came with observation
        t (IMPALA's layout). With same-step autoreset, observation t is the
        first of a new episode where done t is True.
      stats: "episodes" (finished in this call), "return_sum",
        "length_sum" (of those episodes), "env_steps" (N * T).
  """

  def __init__(self, env, policy, state_space, num_actions, unroll_length,
               scope="environment_stepper"):
    super().__init__(scope=scope)
    if unroll_length < 1:
      raise BuildError(f"'{scope}': unroll_length must be >= 1, got "
                       f"{unroll_length}")
    self.env = env                    # Stepped via numpy_function.
    self.policy = policy
    self.state_space = state_space
    self.num_actions = int(num_actions)
    self.unroll_length = int(unroll_length)
    self.num_envs = env.num_envs

  variable_args = ()

  def create_variables(self, input_spaces):
    n, obs = self.num_envs, self.env.observation_space

    def var(name, shape, dtype):
      return self.add_variable(name, shape, dtype, trainable=False)

    self.last_obs = var("last_obs", (n,) + tuple(obs.shape), obs.dtype)
    self.last_reward = var("last_reward", (n,), np.float32)
    self.last_done = var("last_done", (n,), np.bool_)
    self.last_action = var("last_action", (n,), np.int64)
    self.last_logits = var("last_logits", (n, self.num_actions), np.float32)
    self.episode_return = var("episode_return", (n,), np.float32)
    self.episode_length = var("episode_length", (n,), np.int32)
    self.state_vars = {
        key: var("state_" + "_".join(map(str, tree_path(key))),
                 (n,) + tuple(space.shape), space.dtype)
        for key, space in self.state_space.flatten()}

  def _state(self):
    return self.state_space.unflatten_value(
        [self.state_vars[k].read_value() for k, _ in
         self.state_space.flatten()])

  def _assign_state(self, state):
    leaves = self.state_space.flatten_value(state)
    return [self.state_vars[k].assign(v) for (k, _), v in
            zip(self.state_space.flatten(), leaves)]

  @api
  def act(self, observations, state, resets):
    return self.policy.act(observations, state, resets)

  @api
  def set_policy_weights(self, weights):
    return self.policy.set_weights(weights)

  @api
  def reset(self, seed):
    return self._graph_fn_reset(seed)

  @api
  def unroll(self):
    return self._graph_fn_unroll(inline(self.act))

  @graph_fn
  def _graph_fn_reset(self, seed):
    obs = in_graph.tf_reset(self.env, seed)
    n = self.num_envs
    ops = [self.last_obs.assign(obs),
           self.last_reward.assign(tf.zeros([n])),
           self.last_done.assign(tf.ones([n], tf.bool)),
           self.last_action.assign(tf.zeros([n], tf.int64)),
           self.last_logits.assign(tf.zeros([n, self.num_actions])),
           self.episode_return.assign(tf.zeros([n])),
           self.episode_length.assign(tf.zeros([n], tf.int32))]
    ops += [v.assign(tf.zeros_like(v)) for v in self.state_vars.values()]
    with tf.control_dependencies(ops):
      return tf.identity(obs)

  @graph_fn
  def _graph_fn_unroll(self, act):
    T = self.unroll_length
    first = {"observations": self.last_obs.read_value(),
             "rewards": self.last_reward.read_value(),
             "dones": self.last_done.read_value(),
             "actions": self.last_action.read_value(),
             "logits": self.last_logits.read_value()}
    initial_state = self._state()
    arrays = {k: tf.TensorArray(v.dtype, size=T, element_shape=v.shape)
              for k, v in first.items()}
    zero = tf.constant(0, tf.int64)
    stats0 = {"episodes": zero, "return_sum": tf.constant(0.0),
              "length_sum": zero}

    def body(t, obs, done, state, ep_ret, ep_len, stats, arrays):
      out = act(obs[:, None], state, done[:, None])
      action, logits = out["action"][:, 0], out["logits"][:, 0]
      step = in_graph.tf_step(self.env, action)
      new_done = step.terminated | step.truncated
      ep_ret = ep_ret + step.rewards
      ep_len = ep_len + 1
      ended = tf.cast(new_done, tf.int64)
      stats = {"episodes": stats["episodes"] + tf.reduce_sum(ended),
               "return_sum": stats["return_sum"] + tf.reduce_sum(
                   tf.where(new_done, ep_ret, 0.0)),
               "length_sum": stats["length_sum"] + tf.reduce_sum(
                   tf.cast(ep_len, tf.int64) * ended)}
      ep_ret = tf.where(new_done, 0.0, ep_ret)
      ep_len = tf.where(new_done, 0, ep_len)
      record = {"observations": step.obs, "rewards": step.rewards,
                "dones": new_done, "actions": action, "logits": logits}
      arrays = {k: arrays[k].write(t, record[k]) for k in arrays}
      return (t + 1, step.obs, new_done, out["state"], ep_ret, ep_len, stats,
              arrays)

    loop_vars = (tf.constant(0), first["observations"], first["dones"],
                 initial_state, self.episode_return.read_value(),
                 self.episode_length.read_value(), stats0, arrays)
    (_, obs, done, state, ep_ret, ep_len, stats, arrays) = tf.while_loop(
        lambda t, *_: t < T, body, loop_vars, parallel_iterations=1)
    rollout = {k: tf.concat([first[k][None], arrays[k].stack()], 0)
               for k in first}
    last = {k: rollout[k][-1] for k in first}
    ops = [self.last_obs.assign(obs), self.last_reward.assign(
        last["rewards"]), self.last_done.assign(done),
           self.last_action.assign(last["actions"]),
           self.last_logits.assign(last["logits"]),
           self.episode_return.assign(ep_ret),
           self.episode_length.assign(ep_len)] + self._assign_state(state)
    with tf.control_dependencies(ops):
      rollout = {k: tf.identity(v) for k, v in rollout.items()}
      rollout["initial_state"] = tf.nest.map_structure(tf.identity,
                                                       initial_state)
      stats = dict(stats, env_steps=tf.constant(
          self.num_envs * T, tf.int64))
    return {"rollout": rollout, "stats": stats}

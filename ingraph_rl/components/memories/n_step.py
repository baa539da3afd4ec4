"""N-step transitions, accumulated per environment before they reach a memory.

Why here and not at sampling time: computing n-step returns from a ring
when sampling would tie the memory to a layout (steps of env i at ring
positions t * num_envs + i), break for inserts of other sizes, need care at
the write head (the newest n - 1 steps of each env have no n-step return
yet) and at ring wrap-around, and cost n gathers per sampled record. An
accumulator in front of the memory keeps the memory oblivious: it stores
finished (s_t, a_t, R, s_{t+m}, terminal, discount) records, so uniform and
prioritized replay work unchanged, and each record costs the same to sample
as a 1-step one. The price is a dynamic insert size (0 to n * num_envs rows
per step), which the memories handle.
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError
from ingraph_rl.executors.checks import (
  tf_check,
  tf_leading_sizes,
  torch_check,
)
from ingraph_rl.executors.torch_spaces import torch_dtype
from ingraph_rl.spaces import BoolBox, BoxSpace, Dict, FloatBox
from ingraph_rl.utils.lazy import torch


class NStepAccumulator(Component):
  """Turns a stream of vector-env steps into n-step transitions.

  Keeps, per environment, the (state, action, reward) of its last n - 1
  steps in variables. Each `push` of one step of all `num_envs` envs emits:
    - for an env whose episode goes on: the transition that began n steps
      ago, once n steps are pending (m = n);
    - for an env whose episode ended at this step (terminated or
      truncated): ALL its pending transitions, the older ones first, with
      shortened m (n, n-1, ..., 1 as far as pending); nothing is kept.
  A transition never crosses an episode end. Each emitted row is
    (s_t, a_t, R = sum_{k<m} discount^k r_{t+k}, s_{t+m},
     terminal = the episode terminated at step t+m-1, discount^m),
  where s_{t+m} is the `next_states` of the newest step: pass the true last
  observation (`final_obs`) there, so a truncated (time-limited) episode
  bootstraps from it. Terminated and truncated at once counts as terminated.

  APIs (fixed return structures):
    push(states, actions, rewards, next_states, terminals, truncated) ->
      {"states", "actions", "rewards", "next_states", "terminals",
      "discounts"} with a leading dim of 0 to n * num_envs rows, ordered by
      env, then oldest first. Every argument must have `num_envs` rows (one
      per env, in the same order every call); another size is a SpaceError
      that changes nothing.
    clear() -> number of pending steps dropped (int32): forget all pending
      steps, e.g. when the environments are reset mid-episode.

  With n = 1 it emits each step as the plain 1-step transition.

      >>> from ingraph_rl.executors.tensorflow import TFExecutor
      >>> from ingraph_rl.spaces import BoolBox, FloatBox, IntBox
      >>> s = FloatBox((4,), add_batch_rank=True)
      >>> ex = TFExecutor(NStepAccumulator(3, 0.9, num_envs=2), {
      ...     "states": s, "next_states": s, "actions": IntBox(
      ...     2, add_batch_rank=True), "rewards": FloatBox(add_batch_rank=True),
      ...     "terminals": BoolBox(add_batch_rank=True),
      ...     "truncated": BoolBox(add_batch_rank=True)})
      >>> s = np.zeros((2, 4), np.float32)
      >>> out = ex.execute("push", s, np.array([0, 1], np.int32),
      ...                  np.array([1.0, 2.0], np.float32), s,
      ...                  np.array([False, True]), np.array([False, False]))
      >>> out["rewards"].numpy(), out["discounts"].numpy()  # Env 1 ended.
      (array([2.], dtype=float32), array([0.9], dtype=float32))
  """

  variable_args = ("states", "actions")

  def __init__(self, n_step, discount, num_envs, scope="n_step"):
    super().__init__(scope=scope)
    if int(n_step) < 1 or int(num_envs) < 1 or not 0.0 <= discount <= 1.0:
      raise BuildError(
        f"'{scope}': need n_step >= 1, num_envs >= 1 and "
        f"0 <= discount <= 1, got {n_step}, {num_envs}, "
        f"{discount}"
      )
    self.n_step = int(n_step)
    self.discount = float(discount)
    self.num_envs = int(num_envs)
    # Slot j of the window holds the step n - 1 - j steps before the newest;
    # a transition starting there spans m = n - j steps.
    self.slot_discounts = np.array(
      [self.discount ** (self.n_step - j) for j in range(self.n_step)],
      np.float32,
    )

  def create_variables(self, input_spaces):
    states = self.expect_space(input_spaces, "states", BoxSpace)
    actions = self.expect_space(input_spaces, "actions", BoxSpace)
    self.states_space = states.strip_ranks()
    self.actions_space = actions.strip_ranks()
    window = (self.num_envs, self.n_step)
    # Right-aligned windows: the newest step is in the last slot, so a push
    # is one shift; slots older than the pending steps hold stale values
    # that are never emitted.
    self.window_states = self.add_variable(
      "window_states", window + states.shape, states.dtype, trainable=False
    )
    self.window_actions = self.add_variable(
      "window_actions", window + actions.shape, actions.dtype, trainable=False
    )
    self.window_rewards = self.add_variable(
      "window_rewards", window, np.float32, trainable=False
    )
    self.pending = self.add_variable(
      "pending", (self.num_envs,), np.int32, trainable=False
    )

  def _output_space(self):
    return Dict(
      states=self.states_space.with_batch_rank(),
      actions=self.actions_space.with_batch_rank(),
      rewards=FloatBox(add_batch_rank=True),
      next_states=self.states_space.with_batch_rank(),
      terminals=BoolBox(add_batch_rank=True),
      discounts=FloatBox(add_batch_rank=True),
    )

  def _size_reason(self, sizes):
    return (
      f"n-step accumulation keeps {self.num_envs} environment "
      f"streams: every argument needs {self.num_envs} rows (one per "
      f"env, every step), got {sizes}"
    )

  # --- APIs ------------------------------------------------------------------

  @api
  def push(self, states, actions, rewards, next_states, terminals, truncated):
    return self._graph_fn_push(
      states, actions, rewards, next_states, terminals, truncated
    )

  @api
  def clear(self):
    return self._graph_fn_clear()

  # --- TF bodies -----------------------------------------------------------

  @graph_fn(output_space=lambda self: self._output_space())
  def _graph_fn_push(
    self, states, actions, rewards, next_states, terminals, truncated
  ):
    num_envs = self.num_envs
    args = [states, actions, rewards, next_states, terminals, truncated]
    sizes = tf_leading_sizes(args)
    ok = tf.reduce_all(sizes == num_envs)
    check = tf_check(
      ok, self, "push", "states", self._size_reason("a different number")
    )
    # A bad batch must change nothing and fail with the check's message.
    # A control dependency alone does not do that (grappler drops it, and a
    # shape error of the concat wins), so the push runs under a cond.
    with tf.control_dependencies([check]):
      return tf.cond(
        ok,
        lambda: self._tf_push(*args),
        lambda: self._tf_nothing(states, actions),
      )

  def _tf_push(
    self, states, actions, rewards, next_states, terminals, truncated
  ):
    n = self.n_step
    win_s = tf.concat([self.window_states[:, 1:], states[:, None]], 1)
    win_a = tf.concat([self.window_actions[:, 1:], actions[:, None]], 1)
    win_r = tf.concat(
      [self.window_rewards[:, 1:], tf.cast(rewards, tf.float32)[:, None]], 1
    )
    length = self.pending + 1  # [E], <= n.
    done = terminals | truncated
    # Discounted sums from each slot to the newest, newest first.
    returns = [win_r[:, n - 1]]
    for j in range(n - 2, -1, -1):
      returns.append(win_r[:, j] + self.discount * returns[-1])
    returns = tf.stack(returns[::-1], 1)  # [E, n].
    slots = tf.range(n)[None, :]
    emit = (slots >= n - length[:, None]) & (done[:, None] | (slots == 0))
    where = tf.where(emit)  # [K, 2].
    env = where[:, 0]
    out = {
      "states": tf.gather_nd(win_s, where),
      "actions": tf.gather_nd(win_a, where),
      "rewards": tf.gather_nd(returns, where),
      "next_states": tf.gather(next_states, env),
      "terminals": tf.gather(terminals, env),
      "discounts": tf.gather(self.slot_discounts, where[:, 1]),
    }
    self.window_states.assign(win_s)
    self.window_actions.assign(win_a)
    self.window_rewards.assign(win_r)
    self.pending.assign(tf.where(done, 0, tf.minimum(length, n - 1)))
    return out

  def _tf_nothing(self, states, actions):
    return {
      "states": states[:0],
      "actions": actions[:0],
      "rewards": tf.zeros([0]),
      "next_states": states[:0],
      "terminals": tf.zeros([0], tf.bool),
      "discounts": tf.zeros([0]),
    }

  @graph_fn
  def _graph_fn_clear(self):
    dropped = tf.reduce_sum(self.pending)
    with tf.control_dependencies([dropped]):
      self.pending.assign(tf.zeros_like(self.pending))
    return dropped

  # --- torch bodies ----------------------------------------------------------

  def _torch_empty(self):
    def empty(space):
      return torch.zeros((0,) + space.shape, dtype=torch_dtype(space))

    return {
      "states": empty(self.states_space),
      "actions": empty(self.actions_space),
      "rewards": torch.zeros(0),
      "next_states": empty(self.states_space),
      "terminals": torch.zeros(0, dtype=torch.bool),
      "discounts": torch.zeros(0),
    }

  @_graph_fn_push.torch
  def _graph_fn_push(
    self, states, actions, rewards, next_states, terminals, truncated
  ):
    n, num_envs = self.n_step, self.num_envs
    sizes = [
      int(x.shape[0])
      for x in (states, actions, rewards, next_states, terminals, truncated)
    ]
    ok = all(s == num_envs for s in sizes)
    torch_check(ok, self, "push", "states", self._size_reason(sizes))
    if not ok:
      # Only in the torch build passes (checks are off there), whose
      # samples have other batch sizes: the declared space stands.
      return self._torch_empty()
    win_s = torch.cat([self.window_states[:, 1:], states[:, None]], 1)
    win_a = torch.cat(
      [
        self.window_actions[:, 1:],
        actions[:, None].to(self.window_actions.dtype),
      ],
      1,
    )
    win_r = torch.cat(
      [self.window_rewards[:, 1:], rewards.to(torch.float32)[:, None]], 1
    )
    length = self.pending + 1
    done = terminals | truncated
    returns = [win_r[:, n - 1]]
    for j in range(n - 2, -1, -1):
      returns.append(win_r[:, j] + self.discount * returns[-1])
    returns = torch.stack(returns[::-1], 1)
    slots = torch.arange(n)[None, :]
    emit = (slots >= n - length[:, None]) & (done[:, None] | (slots == 0))
    where = torch.nonzero(emit)  # Row-major, as tf.where.
    env, slot = where[:, 0], where[:, 1]
    out = {
      "states": win_s[env, slot].clone(),
      "actions": win_a[env, slot].clone(),
      "rewards": returns[env, slot],
      "next_states": next_states[env].clone(),
      "terminals": terminals[env].clone(),
      "discounts": torch.from_numpy(self.slot_discounts)[slot],
    }
    with torch.no_grad():
      self.window_states.copy_(win_s)
      self.window_actions.copy_(win_a)
      self.window_rewards.copy_(win_r)
      self.pending.copy_(torch.where(done, 0, torch.clamp(length, max=n - 1)))
    return out

  @_graph_fn_clear.torch
  def _graph_fn_clear(self):
    dropped = self.pending.sum().to(torch.int32)
    with torch.no_grad():
      self.pending.zero_()
    return dropped

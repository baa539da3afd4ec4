"""The Ape-X actor: ONE graph call per rollout fragment steps its vector
env `rollout_fragment_length` times with its own epsilon, turns the steps
into n-step transitions, computes their initial priorities |TD| with its
copy of the online and target networks, and enqueues them on a replay
shard's insert queue.

On Atari frames the Q-network is most of an actor's CPU, and it costs
less per frame in large batches (Nature CNN here: 479 us per frame at
batch 8, 191 at batch 200). So each observation goes through the online
network ONCE, when the actor acts on it, and the target network ONCE PER
ROLLOUT, over all the fragment's bootstrap observations in one batch. A
second n-step accumulator carries each state's online Q-values and its
bootstrap observation's index in that batch beside the transitions (same
actions, rewards and episode ends, so its rows line up with theirs), and
the priorities come from them. Only where an episode was truncated does
the true final observation (not the reset one the env returns) get an
online pass of its own.
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.agents.apex import queues
from ingraph_rl.components.explorations import Constant, EpsilonGreedy
from ingraph_rl.components.memories import NStepAccumulator
from ingraph_rl.core import Component, api, graph_fn, inline
from ingraph_rl.environments import in_graph
from ingraph_rl.spaces import FloatBox, IntBox


class QValueWindows(NStepAccumulator):
  """An `NStepAccumulator` over [online Q-values | frame index] (num_actions
  + 1 floats) of the states instead of the states; the index locates a
  bootstrap observation in the rollout's target batch (-1: none). Fed the
  same actions, rewards and episode ends as the transitions' accumulator,
  its rows line up with theirs. Only the actor pushes to it, so its spaces
  are fixed here rather than learnt from an API call."""

  variable_args = ()

  def __init__(self, n_step, discount, num_envs, num_actions):
    super().__init__(n_step, discount, num_envs, scope="n_step_q")
    self.fixed_spaces = {
      "states": FloatBox((num_actions + 1,), add_batch_rank=True),
      "actions": IntBox(num_actions, dtype=np.int64, add_batch_rank=True),
    }

  def create_variables(self, input_spaces):
    super().create_variables(dict(input_spaces, **self.fixed_spaces))


class ApexPolicy(Component):
  """Acting alone (no env, no queues): the policy an actor runs, and what
  export and evaluation build.

  APIs:
    get_actions(states, explore) -> {"actions", "q_values", "epsilon"}:
      epsilon-greedy on the online network's Q-values (greedy without
      explore), epsilon fixed (`ApexConfig.actor_epsilons`): one rate, or
      one per env (row j of a batch uses rate j mod num_envs), then
      "epsilon" is that vector.
    set_weights(weights): the online network of the learner's
      `get_weights()` ({"online", "target"}).
  """

  def __init__(self, config, q, epsilon, scope="actor"):
    super().__init__(scope=scope)
    self.config = config
    self.epsilon = (
      tuple(map(float, epsilon))
      if isinstance(epsilon, (list, tuple))
      else float(epsilon)
    )
    self.q = q
    self.exploration = EpsilonGreedy(
      config.num_actions, Constant(self.epsilon), seed=config.seed
    )

  @api
  def get_actions(self, states, explore=True):
    q_values = self.q.q_values(states)
    out = self.exploration.get_action(q_values, explore)
    return {
      "actions": out["action"],
      "q_values": q_values,
      "epsilon": out["epsilon"],
    }

  @api
  def set_weights(self, weights):
    # Acting needs the online network only.
    return self.q.online.sync(weights["online"])


class ApexActor(ApexPolicy):
  """APIs:
    get_actions(states, explore) -> {"actions", "q_values", "epsilon"}.
    reset_env(seed) -> first observations (drops pending n-step windows).
    observe(states, actions, rewards, next_states, terminals, truncated)
      -> the n-step rows these steps complete (as `NStepAccumulator.push`;
      the Q-value windows advance with them, so a later rollout's
      priorities stay aligned).
    priorities(records) -> |TD| + 1e-6 of records (both networks run on
      the records' frames: the check of what `rollout` computes from its
      acting passes and its batched target pass).
    rollout(shard) -> {"episodes", "return_sum", "length_sum", "env_steps",
      "transitions", "priority_sum", "queue_size"}: one fragment, its
      transitions enqueued on shard `shard`'s insert queue (the caller
      picks shards round-robin). "env_steps" counts this call's steps.
    set_weights(weights): the learner's `get_weights()` ({"online",
      "target"}).

  epsilon: this actor's fixed exploration rate, or one per env
    (`ApexConfig.actor_epsilons`).
  """

  def __init__(
    self, config, env, q, epsilon, record_space, names, scope="actor"
  ):
    super().__init__(config, q, epsilon, scope=scope)
    c = config
    self.env = env  # Not a component: stepped via numpy_function.
    self.accumulator = NStepAccumulator(c.n_step, c.discount, env.num_envs)
    # The same windows over [online Q | frame index] of the states.
    self.q_accumulator = QValueWindows(
      c.n_step, c.discount, env.num_envs, c.num_actions
    )
    self.insert_queues = [
      queues.insert_queue(record_space, c, names, i, scope=f"shard_{i}_inserts")
      for i in range(names.num_shards)
    ]

  variable_args = ()

  def create_variables(self, input_spaces):
    obs = self.env.observation_space
    self.last_obs = self.add_variable(
      "last_obs", (self.env.num_envs,) + obs.shape, obs.dtype, trainable=False
    )

  @api
  def reset_env(self, seed):
    cleared = self.accumulator.clear()
    cleared_q = self.q_accumulator.clear()
    return self._graph_fn_reset_env(seed, cleared, cleared_q)

  @api
  def set_weights(self, weights):
    # Priorities need the target network too.
    return self.q.set_weights(weights)

  @api
  def observe(
    self, states, actions, rewards, next_states, terminals, truncated
  ):
    rows = self.accumulator.push(
      states, actions, rewards, next_states, terminals, truncated
    )
    # Keeps the Q-value windows in step with the transitions' windows.
    q_rows = self.q_accumulator.push(
      self._graph_fn_unindexed(self.q.q_values(states)),
      actions,
      rewards,
      self._graph_fn_unindexed(self.q.q_values(next_states)),
      terminals,
      truncated,
    )
    return self._graph_fn_after(rows, q_rows["rewards"])

  @graph_fn
  def _graph_fn_unindexed(self, q):
    return indexed(q, -tf.ones(tf.shape(q)[:1]))

  @graph_fn
  def _graph_fn_after(self, rows, done):
    with tf.control_dependencies([done]):
      return tf.nest.map_structure(tf.identity, rows)

  @api
  def priorities(self, records):
    return self.q.td(records, self._graph_fn_ones(records["rewards"]))[
      "priorities"
    ]

  @graph_fn
  def _graph_fn_ones(self, like):
    return tf.ones_like(like)

  @api
  def rollout(self, shard):
    return self._graph_fn_rollout(
      shard,
      inline(self.q.q_values),
      inline(self.q.target_q_values),
      inline(self.exploration.get_action),
      inline(self.accumulator.push),
      inline(self.q_accumulator.push),
      inline(self.q.td_of_q_values),
      [inline(q.enqueue_many) for q in self.insert_queues],
    )

  @graph_fn
  def _graph_fn_reset_env(self, seed, *cleared):
    with tf.control_dependencies(cleared):
      obs = in_graph.tf_reset(self.env, seed)
    self.last_obs.assign(obs)
    return tf.identity(obs)

  @staticmethod
  def _arrays(space, k):
    """TensorArrays of a step's rows (0 to n_step * num_envs of them)."""
    return {
      key: tf.TensorArray(
        leaf.dtype,
        size=k,
        infer_shape=False,
        element_shape=tf.TensorShape([None]).concatenate(leaf.shape),
      )
      for key, leaf in space.items()
    }

  @graph_fn
  def _graph_fn_rollout(
    self, shard, online_q, target_q, explore, push, push_q, td_of_q, enqueues
  ):
    n = self.env.num_envs
    k = self.config.rollout_fragment_length
    num_actions = self.config.num_actions
    obs_space = self.env.observation_space
    out_space = self.accumulator._output_space()
    arrays = self._arrays(out_space, k)
    q_keys = ("states", "next_states")
    q_arrays = {
      key: tf.TensorArray(
        tf.float32,
        size=k,
        infer_shape=False,
        element_shape=tf.TensorShape([None, num_actions + 1]),
      )
      for key in q_keys
    }
    # Each step's bootstrap observations, for one target pass at the end.
    frames = tf.TensorArray(
      obs_space.dtype, size=k, element_shape=(n,) + obs_space.shape
    )

    def body(i, arrays, q_arrays, frames, totals, q_now):
      obs = self.last_obs.read_value()
      actions = explore(q_now)["action"]
      step = in_graph.tf_step(self.env, actions)
      # The next acting pass; where an episode ended, step.obs is the new
      # episode's first observation: a truncated transition bootstraps from
      # the true final one (its own pass, rarely run), a terminated one
      # not at all (its next-state values are masked).
      q_next = online_q(step.obs)
      truncated_only = step.truncated & ~step.terminated
      q_final = tf.cond(
        tf.reduce_any(truncated_only),
        lambda: online_q(step.final_obs),
        lambda: tf.zeros_like(q_next),
      )
      done = step.terminated | step.truncated
      q_boot = tf.where(done[:, None], q_final, q_next)
      # step.final_obs is every env's bootstrap observation; it lands at
      # rows i * n .. i * n + n - 1 of the target batch.
      frames = frames.write(i, step.final_obs)
      rows = push(*step.transition(obs, actions))
      q_rows = push_q(
        indexed(q_now, -tf.ones([n])),
        actions,
        step.rewards,
        indexed(q_boot, tf.cast(i * n + tf.range(n), tf.float32)),
        step.terminated,
        step.truncated,
      )
      arrays = {key: arrays[key].write(i, rows[key]) for key in arrays}
      q_arrays = {key: q_arrays[key].write(i, q_rows[key]) for key in q_keys}
      with tf.control_dependencies([rows["rewards"]]):
        assign = self.last_obs.assign(step.obs)
      with tf.control_dependencies([assign]):
        new = {
          "episodes": tf.reduce_sum(tf.cast(done, tf.int64)),
          "return_sum": tf.reduce_sum(step.episode_returns),
          "length_sum": tf.reduce_sum(tf.cast(step.episode_lengths, tf.int64)),
        }
      totals = {key: totals[key] + new[key] for key in totals}
      return i + 1, arrays, q_arrays, frames, totals, q_next

    zeros = {
      "episodes": tf.constant(0, tf.int64),
      "return_sum": tf.constant(0.0),
      "length_sum": tf.constant(0, tf.int64),
    }
    q_first = online_q(self.last_obs.read_value())
    _, arrays, q_arrays, frames, totals, _ = tf.while_loop(
      lambda i, *_: i < k,
      body,
      (tf.constant(0), arrays, q_arrays, frames, zeros, q_first),
      parallel_iterations=1,
    )
    records = {key: array.concat() for key, array in arrays.items()}
    for key, space in out_space.items():
      records[key].set_shape((None,) + space.shape)
    count = tf.shape(records["rewards"])[0]
    # A transition completed in this call bootstraps from an observation
    # of this call, so every next-state index is one of this batch's rows.
    targets = target_q(tf.reshape(frames.stack(), (k * n,) + obs_space.shape))
    q_states = q_arrays["states"].concat()[:, :num_actions]
    q_next_states = q_arrays["next_states"].concat()
    next_index = tf.cast(q_next_states[:, num_actions], tf.int32)
    priorities = td_of_q(
      {"online": q_states, "target": tf.zeros_like(q_states)},
      records["actions"],
      records["rewards"],
      records["terminals"],
      {
        "online": q_next_states[:, :num_actions],
        "target": tf.gather(targets, next_index),
      },
      records["discounts"],
      tf.ones([count]),
    )["priorities"]
    row = {"records": records, "priority": priorities}
    size = tf.switch_case(
      tf.cast(shard, tf.int32),
      [lambda enqueue=enqueue: enqueue(row) for enqueue in enqueues],
    )
    return dict(
      totals,
      env_steps=tf.constant(n * k, tf.int64),
      transitions=count,
      priority_sum=tf.reduce_sum(priorities),
      queue_size=size,
    )


def indexed(q, index):
  """[q | index]: Q-values [B, A] and a float index [B] as [B, A + 1]."""
  return tf.concat([q, index[:, None]], axis=-1)

"""The Ape-X actor: ONE graph call per rollout fragment steps its vector
env `rollout_fragment_length` times with its own epsilon, turns the steps
into n-step transitions, computes their initial priorities |TD| with its
copy of the online and target networks, and enqueues them on a replay
shard's insert queue.
"""

import tensorflow as tf

from ingraph_rl.agents.apex import queues
from ingraph_rl.components.explorations import Constant, EpsilonGreedy
from ingraph_rl.components.memories import NStepAccumulator
from ingraph_rl.components.queues import FIFOQueue
from ingraph_rl.core import Component, api, graph_fn, inline
from ingraph_rl.environments import in_graph


class ApexPolicy(Component):
  """Acting alone (no env, no queues): the policy an actor runs, and what
  export and evaluation build.

  APIs:
    get_actions(states, explore) -> {"actions", "q_values", "epsilon"}:
      epsilon-greedy on the online network's Q-values (greedy without
      explore), epsilon fixed (`ApexConfig.actor_epsilon`).
    set_weights(weights): the online network of the learner's
      `get_weights()` ({"online", "target"}).
  """

  def __init__(self, config, q, epsilon, scope="actor"):
    super().__init__(scope=scope)
    self.config = config
    self.epsilon = float(epsilon)
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
    rollout(shard) -> {"episodes", "return_sum", "length_sum", "env_steps",
      "transitions", "priority_sum", "queue_size"}: one fragment, its
      transitions enqueued on shard `shard`'s insert queue (the caller
      picks shards round-robin). "env_steps" counts this call's steps.
    set_weights(weights): the learner's `get_weights()` ({"online",
      "target"}).

  epsilon: this actor's fixed exploration rate (`ApexConfig.actor_epsilon`).
  """

  def __init__(
    self, config, env, q, epsilon, record_space, names, scope="actor"
  ):
    super().__init__(config, q, epsilon, scope=scope)
    c = config
    self.env = env  # Not a component: stepped via numpy_function.
    self.accumulator = NStepAccumulator(c.n_step, c.discount, env.num_envs)
    row = queues.insert_row_space(record_space)
    self.insert_queues = [
      FIFOQueue(
        row,
        c.insert_queue_capacity,
        shared_name=names.inserts(i),
        scope=f"shard_{i}_inserts",
      )
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
    self.accumulator.clear()
    return self._graph_fn_reset_env(seed)

  @api
  def set_weights(self, weights):
    # Priorities need the target network too.
    return self.q.set_weights(weights)

  @api
  def observe(
    self, states, actions, rewards, next_states, terminals, truncated
  ):
    return self.accumulator.push(
      states, actions, rewards, next_states, terminals, truncated
    )

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
      inline(self.exploration.get_action),
      inline(self.accumulator.push),
      inline(self.q.td),
      [inline(q.enqueue_many) for q in self.insert_queues],
    )

  @graph_fn
  def _graph_fn_reset_env(self, seed):
    obs = in_graph.tf_reset(self.env, seed)
    self.last_obs.assign(obs)
    return tf.identity(obs)

  @graph_fn
  def _graph_fn_rollout(self, shard, q_values, explore, push, td, enqueues):
    n = self.env.num_envs
    k = self.config.rollout_fragment_length
    # The transitions of a step: 0 to n_step * num_envs rows.
    out_space = self.accumulator._output_space()
    arrays = {
      key: tf.TensorArray(
        space.dtype,
        size=k,
        infer_shape=False,
        element_shape=tf.TensorShape([None]).concatenate(space.shape),
      )
      for key, space in out_space.items()
    }

    def body(i, arrays, totals):
      obs = self.last_obs.read_value()
      actions = explore(q_values(obs))["action"]
      step = in_graph.tf_step(self.env, actions)
      rows = push(
        obs,
        actions,
        step.rewards,
        step.final_obs,
        step.terminated,
        step.truncated,
      )
      arrays = {key: arrays[key].write(i, rows[key]) for key in arrays}
      with tf.control_dependencies([rows["rewards"]]):
        assign = self.last_obs.assign(step.obs)
      done = step.terminated | step.truncated
      with tf.control_dependencies([assign]):
        new = {
          "episodes": tf.reduce_sum(tf.cast(done, tf.int64)),
          "return_sum": tf.reduce_sum(step.episode_returns),
          "length_sum": tf.reduce_sum(tf.cast(step.episode_lengths, tf.int64)),
        }
      return i + 1, arrays, {key: totals[key] + new[key] for key in totals}

    zeros = {
      "episodes": tf.constant(0, tf.int64),
      "return_sum": tf.constant(0.0),
      "length_sum": tf.constant(0, tf.int64),
    }
    _, arrays, totals = tf.while_loop(
      lambda i, *_: i < k,
      body,
      (tf.constant(0), arrays, zeros),
      parallel_iterations=1,
    )
    records = {key: array.concat() for key, array in arrays.items()}
    for key, space in out_space.items():
      records[key].set_shape((None,) + space.shape)
    count = tf.shape(records["rewards"])[0]
    priorities = td(records, tf.ones([count]))["priorities"]
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

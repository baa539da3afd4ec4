"""The IMPALA actor: an environment stepper whose rollouts go onto the
learner's queue, all in one graph call per unroll.

Actor and learner are separate root components (separate executors) that
share only two things: the queue, by its `shared_name` (a raw `FIFOQueueV2`
resource, so it is the same queue in this process and, under a cluster
device, across processes), and the weights, which the learner publishes
through `get_weights` and an actor takes through `set_weights` before an
unroll.
"""

import tensorflow as tf

from ingraph_rl.components.env_stepping import EnvironmentStepper
from ingraph_rl.components.queues import FIFOQueue
from ingraph_rl.core import Component, api, graph_fn


class IMPALAActor(Component):
  """APIs:
    act(observations [B, T, ...], state, resets [B, T], last_rewards
      float32 [B, T], last_actions int64 [B, T]) -> the policy's
      {"action", "greedy_action", "logits", "values", "state"} (see
      `IMPALANetwork.unroll` for the inputs).
    reset_env(seed) -> first observations.
    unroll() -> {"episodes", "return_sum", "length_sum", "env_steps",
      "episodes_per_env", "return_sum_per_env", "length_sum_per_env",
      "queue_size"}: one stepper unroll, enqueued as `num_envs` rollouts
      (the per-env stats are [num_envs], by env index).
    set_weights(weights): the learner's `get_weights()` output.

  Built through `IMPALABuilder.make_actor` (agents/impala/builder.py),
  which declares its API list and input spaces.
  """

  def __init__(
    self,
    config,
    env,
    policy,
    state_space,
    record_space,
    queue_name,
    scope="actor",
  ):
    """policy: an `IMPALAPolicy`; state_space: its recurrent state (batch
    rank); record_space: one queued rollout (`IMPALABuilder.record_space`);
    queue_name: the learner's queue."""
    super().__init__(scope=scope)
    self.config = config
    self.env = env
    self.stepper = EnvironmentStepper(
      env,
      policy,
      state_space,
      config.num_actions,
      config.unroll_length,
      bootstrap_on_truncation=config.bootstrap_on_truncation,
      env_groups=config.env_groups,
    )
    self.record_space = record_space
    self.queue = FIFOQueue(
      record_space, config.queue_capacity, shared_name=queue_name
    )

  @api
  def act(self, observations, state, resets, last_rewards, last_actions):
    return self.stepper.act(
      observations, state, resets, last_rewards, last_actions
    )

  @api
  def reset_env(self, seed):
    return self.stepper.reset(seed)

  @api
  def unroll(self):
    out = self.stepper.unroll()
    size = self.queue.enqueue_many(self._graph_fn_batch_major(out["rollout"]))
    return self._graph_fn_stats(out["stats"], size)

  @api
  def set_weights(self, weights):
    return self.stepper.set_policy_weights(weights)

  @graph_fn(output_space=lambda self: self.record_space.with_batch_rank())
  def _graph_fn_batch_major(self, rollout):
    def swap(x):
      return tf.transpose(x, [1, 0] + list(range(2, x.shape.rank)))

    out = {
      k: tf.nest.map_structure(swap, v)
      for k, v in rollout.items()
      if k != "initial_state"
    }
    if "initial_state" in self.record_space:
      out["initial_state"] = rollout["initial_state"]
    return out

  @graph_fn
  def _graph_fn_stats(self, stats, queue_size):
    return dict(stats, queue_size=queue_size)

"""The IMPALA actor: an environment stepper whose rollouts go onto the
learner's queue, all in one graph call per unroll.

Actor and learner are separate root components (separate executors) that
share only two things: the queue, by its `shared_name` (a raw `FIFOQueueV2`
resource, so it is the same queue in this process and, under a cluster
device, across processes), and the weights, which the learner publishes
through `get_weights` and an actor takes through `set_weights` before an
unroll.
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.agents.impala.networks import (IMPALAPolicy, make_network,
                                               policy_input_spaces)
from ingraph_rl.components.env_stepping import EnvironmentStepper
from ingraph_rl.components.queues import FIFOQueue
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.spaces import BoolBox, Dict, FloatBox, IntBox

DEFAULT_QUEUE_NAME = "impala_rollouts"


def _prepend(space, size):
  """`space` (a box, or a Dict of boxes) with a leading dim `size` on every
  leaf, bounds dropped: the queue checks shapes and dtypes only."""
  if isinstance(space, Dict):
    return Dict({k: _prepend(s, size) for k, s in space.items()})
  return type(space)(shape=(size,) + tuple(space.shape), dtype=space.dtype)


def rollout_space(config, observation_space):
  """The space of ONE queued rollout (per env): [T + 1, ...] leaves (the
  `EnvironmentStepper`'s rollout fields; observations keep their Dict
  structure) and, for an LSTM policy, "initial_state", the state before
  step 0."""
  steps = config.unroll_length + 1
  fields = dict(observations=_prepend(observation_space, steps),
                rewards=FloatBox((steps,)), dones=BoolBox((steps,)),
                actions=IntBox(config.num_actions, shape=(steps,),
                               dtype=np.int64),
                logits=FloatBox((steps, config.num_actions)),
                truncated=BoolBox((steps,)),
                bootstrap_value=FloatBox((steps,)))
  if config.lstm_units:
    # Only recurrent policies queue a state: TF's queues crash on
    # zero-sized components.
    state = FloatBox((config.lstm_units,))
    fields["initial_state"] = Dict(c=state, h=state)
  return Dict(**fields)


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

  >>> from ingraph_rl.agents.impala import IMPALAConfig
  >>> from ingraph_rl.environments import make_vector_env
  >>> env = make_vector_env("CartPole-v1", num_envs=2)
  >>> actor = IMPALAActor(IMPALAConfig(num_actions=2, unroll_length=5), env)
  >>> ex = actor.build()
  >>> _ = ex.execute("reset_env", 0)
  >>> int(ex.execute("unroll")["queue_size"])
  2
  """

  def __init__(self, config, env, queue_name=DEFAULT_QUEUE_NAME,
               scope="actor"):
    super().__init__(scope=scope)
    self.config = config
    self.env = env
    network = make_network(config, env.observation_space)
    self.stepper = EnvironmentStepper(
        env, IMPALAPolicy(network, seed=config.seed), network.state_space(),
        config.num_actions, config.unroll_length,
        bootstrap_on_truncation=config.bootstrap_on_truncation)
    self.record_space = rollout_space(config, env.observation_space)
    self.queue = FIFOQueue(self.record_space, config.queue_capacity,
                           shared_name=queue_name)

  def root_input_spaces(self, weights_space=None):
    spaces = dict(policy_input_spaces(self.config, self.env.observation_space,
                                      self.stepper.policy.network),
                  seed=IntBox(1 << 30, low=-1))
    if weights_space is not None:
      spaces["weights"] = weights_space
    return spaces

  def build(self, weights_space=None, **executor_kwargs):
    """A TFExecutor of the actor. `set_weights` is built when given the
    learner's weights space (`IMPALALearner.weights_space(executor)`)."""
    from ingraph_rl.executors.tensorflow import TFExecutor
    apis = ["act", "reset_env", "unroll"]
    if weights_space is not None:
      apis.append("set_weights")
    return TFExecutor(self, self.root_input_spaces(weights_space),
                      api_names=apis, seed=self.config.seed,
                      **executor_kwargs)

  @api
  def act(self, observations, state, resets, last_rewards, last_actions):
    return self.stepper.act(observations, state, resets, last_rewards,
                            last_actions)

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
    out = {k: tf.nest.map_structure(swap, v) for k, v in rollout.items()
           if k != "initial_state"}
    if "initial_state" in self.record_space:
      out["initial_state"] = rollout["initial_state"]
    return out

  @graph_fn
  def _graph_fn_stats(self, stats, queue_size):
    return dict(stats, queue_size=queue_size)

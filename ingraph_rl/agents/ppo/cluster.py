"""PPO on the cluster roles (`distributed.roles`), synchronous as RLlib's
PPO: every actor task samples ONE fragment (`num_steps` steps of its
envs) with the weights the learner last published and enqueues it; the
learner dequeues one fragment of every actor as one batch, runs the whole
multi-epoch update on it (one graph call) and publishes; the actors,
waiting for that new version (`run_sync_actor`), sample the next ones.

    builder = PPOClusterBuilder(config, num_actors=2, envs_per_actor=4)
    roles.RemoteLearner(task, builder, observation_space)  # learner task
    run_sync_actor(task, builder, env, seed)  # each actor task

The learner root's `update()` returns "frames" (the env steps of this
update, as `RemoteLearner.train` counts them); the actor root's `unroll()`
returns the rollout's episode stats after enqueueing its fragment.

Observation normalization is refused here: each actor would update its own
running statistics, and the learner's (published with the weights) would
never see an observation.
"""

import dataclasses
import time
from typing import Optional, cast

import tensorflow as tf

from ingraph_rl.agents.ppo.agent import PPOAgent
from ingraph_rl.agents.ppo.builder import PPOBuilder
from ingraph_rl.agents.ppo.config import PPOConfig
from ingraph_rl.components.queues import FIFOQueue
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.environments import VectorEnv
from ingraph_rl.errors import BuildError
from ingraph_rl.runners.builder import Root
from ingraph_rl.spaces import Space
from ingraph_rl.utils.lazy import torch

# Also both: get_actions, minibatch_step (see `_HoldsAgent`).
LEARNER_APIS = (
  "update",
  "get_weights",
  "get_train_step",
  "queue_size",
  "close_queue",
  "get_actions",
  "minibatch_step",
)
ACTOR_APIS = (
  "reset_env",
  "unroll",
  "set_weights",
  "get_actions",
  "minibatch_step",
)


class _HoldsAgent(Component):
  """The agent's get_actions and minibatch_step as root APIs too: its
  network and optimizer learn their input spaces from them (the queue's
  records reach them only through graph loops)."""

  @api
  def get_actions(self, observations, explore=True):
    return self.agent.get_actions(observations, explore)

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
    return self.agent.minibatch_step(
      mb_observations,
      mb_actions,
      mb_log_probs,
      mb_values,
      mb_advantages,
      mb_returns,
    )


class PPOClusterLearner(_HoldsAgent):
  """A `PPOAgent` without an env, fed by the actors' queue.

  APIs: update() -> the agent's update stats of one batch of
  `num_records` fragments (one per env of every actor), "frames" this
  update's env steps; get_weights(); get_train_step(); queue_size();
  close_queue() (cancels pending enqueues: actors see CancelledError)."""

  def __init__(
    self,
    config,
    observation_space,
    record_space,
    num_records,
    queue_name,
    scope="ppo_learner",
  ):
    super().__init__(scope=scope)
    self.agent = PPOAgent(config, observation_space=observation_space)
    # Two rounds of fragments: an actor restarted mid-round never blocks.
    self.queue = FIFOQueue(
      record_space, 2 * num_records, shared_name=queue_name
    )
    self.num_records = num_records

  @api
  def update(self):
    batch = self.queue.dequeue_many(self.num_records)
    return self._graph_fn_with_frames(
      self.agent.update(batch), batch["rewards"]
    )

  @graph_fn
  def _graph_fn_with_frames(self, out, rewards):
    return dict(out, frames=tf.cast(tf.size(rewards), tf.int64))

  @_graph_fn_with_frames.torch
  def _graph_fn_with_frames(self, out, rewards):
    return dict(out, frames=torch.tensor(rewards.numel(), dtype=torch.int64))

  @api
  def get_weights(self):
    return self.agent.get_weights()

  @api
  def get_train_step(self):
    return self.agent.get_train_step()

  @api
  def queue_size(self):
    return self.queue.size()

  @api
  def close_queue(self):
    return self.queue.close(cancel_pending_enqueues=True)


class PPOClusterActor(_HoldsAgent):
  """A `PPOAgent` stepping its env whose rollouts go to the learner's
  queue.

  APIs: reset_env(seed); unroll() -> {"episodes", "return_sum",
  "length_sum", "env_steps"} after enqueueing the fragment (one record
  per env); set_weights(weights); get_actions(observations, explore)."""

  def __init__(
    self, config, env, record_space, capacity, queue_name, scope="ppo_actor"
  ):
    super().__init__(scope=scope)
    self.agent = PPOAgent(config, env)
    self.queue = FIFOQueue(record_space, capacity, shared_name=queue_name)

  @api
  def reset_env(self, seed):
    return self.agent.reset_env(seed)

  @api
  def unroll(self):
    out = self.agent.rollout()
    size = self.queue.enqueue_many(out["batch"])
    return self._graph_fn_stats(out["stats"], size)

  @graph_fn
  def _graph_fn_stats(self, stats, queue_size):
    return dict(stats, queue_size=queue_size)

  @_graph_fn_stats.torch
  def _graph_fn_stats(self, stats, queue_size):
    return dict(stats, queue_size=queue_size)

  @api
  def set_weights(self, weights):
    return self.agent.set_weights(weights)


class PPOClusterBuilder:
  """The learner and actor roots of a PPO cluster (the `distributed.roles`
  builder protocol: `weights_space`, `make_learner`, `make_actor`).

  num_actors: actor tasks; envs_per_actor: envs each steps. The learner
  trains on num_actors x envs_per_actor x num_steps env steps per update.
  """

  name = "ppo"

  def __init__(self, config, num_actors, envs_per_actor):
    if not isinstance(config, PPOConfig):
      raise TypeError(
        f"PPOClusterBuilder needs a PPOConfig, got {type(config).__name__}"
      )
    if config.normalize_observations:
      raise BuildError(
        "PPO cluster mode: --normalize_observations is not supported (each "
        "actor would keep its own observation statistics; the learner's, "
        "published with the weights, never see an observation)"
      )
    for name, value in (
      ("num_actors", num_actors),
      ("envs_per_actor", envs_per_actor),
    ):
      if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BuildError(
          f"PPOClusterBuilder: {name} must be an int >= 1, got {value!r}"
        )
    samples = num_actors * envs_per_actor * config.num_steps
    if samples < config.num_minibatches:
      raise BuildError(
        f"PPOClusterBuilder: {samples} samples per update cannot fill "
        f"num_minibatches={config.num_minibatches}"
      )
    self.config = config
    self.num_actors, self.envs_per_actor = num_actors, envs_per_actor
    self.agent_builder = PPOBuilder(config)

  @property
  def num_records(self):
    return self.num_actors * self.envs_per_actor

  def record_space(self, observation_space: Space):
    return self.agent_builder.record_space(observation_space)

  def weights_space(self, observation_space: Space):
    return self.agent_builder.weights_space(observation_space)

  def make_learner(self, observation_space: Space, queue_name: str) -> Root:
    learner = PPOClusterLearner(
      self.config,
      observation_space,
      self.record_space(observation_space),
      self.num_records,
      queue_name,
    )
    return Root(
      learner,
      self.agent_builder.input_spaces(observation_space, weights=False),
      LEARNER_APIS,
      seed=self.config.seed,
      learner_resident=(learner.queue.path,),
    )

  def make_actor(
    self, env: VectorEnv, queue_name: str, index: Optional[int] = None
  ) -> Root:
    """Actor `index`'s root (its own sampling seed: config seed + index)."""
    if env.num_envs != self.envs_per_actor:
      raise BuildError(
        f"PPOClusterBuilder: the actor's env has {env.num_envs} envs, "
        f"expected envs_per_actor={self.envs_per_actor}"
      )
    config = self.config
    if index is not None:
      config = dataclasses.replace(config, seed=config.seed + 1 + index)
    obs_space = cast(Space, env.observation_space)
    actor = PPOClusterActor(
      config,
      env,
      self.record_space(obs_space),
      2 * self.num_records,
      queue_name,
    )
    return Root(
      actor,
      self.agent_builder.input_spaces(obs_space),
      ACTOR_APIS,
      seed=config.seed,
      learner_resident=(actor.queue.path,),
    )


def run_sync_actor(
  task,
  builder,
  env,
  seed,
  max_fragments=None,
  poll_s=0.005,
  startup_wait_s=120.0,
):
  """Actor `task.index` of a synchronous cluster (`roles.run_actor`'s
  contract and exit codes): before each fragment it waits until the
  learner published weights newer than the last fragment's, then runs
  `RemoteActor.step` (read those weights, load them, roll out, enqueue).
  Returns the exit code."""
  from ingraph_rl.distributed import roles

  roles.connect(task)
  actor = roles.RemoteActor(task, builder, env)
  actor.executor.execute("reset_env", seed)
  roles.log(task, "connected; sampling a fragment per published version")
  progress = roles.ActorProgress(task, "fragments", 10)
  wait_until = time.monotonic() + startup_wait_s
  last = 0
  try:
    while max_fragments is None or progress.calls < max_fragments:
      try:
        if int(actor.published.read_version()) <= last:
          time.sleep(poll_s)
          continue
        stats = actor.step()
      except roles.UNREACHABLE:
        # Before its first publish the learner may still be starting.
        if progress.calls or time.monotonic() > wait_until:
          raise
        time.sleep(0.5)
        continue
      last = int(stats["weights_version"])
      progress.add(stats, last)
  except roles.UNREACHABLE as e:
    roles.log(
      task,
      f"the learner is gone ({type(e).__name__}); exiting so the "
      f"launcher can restart this actor",
    )
    return roles.EXIT_LEARNER_GONE
  finally:
    env.close()
  return 0

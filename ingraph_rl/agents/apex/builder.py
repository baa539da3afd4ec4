"""Ape-X's builder: every root, API list and space of the agent, declared
once. Runners (`runners.replay_driver`, the cluster roles, export and
evaluation) build Ape-X through it.

    >>> from ingraph_rl.environments import make_vector_env
    >>> env = make_vector_env("CartPole-v1", num_envs=2)
    >>> builder = ApexBuilder(ApexConfig(num_actions=2, train_batch_size=4,
    ...     learning_starts=8, buffer_size=100, rollout_fragment_length=5))
    >>> names = ReplayQueues("doc", num_shards=1)
    >>> actor = builder.make_actor(env, names, 0, 1).build()
    >>> shard = builder.make_shard(env.observation_space, names, 0, 1).build()
    >>> _ = actor.execute("reset_env", 0)
    >>> int(actor.execute("rollout", 0)["env_steps"])
    10
    >>> int(shard.execute("serve")["size"]) > 0
    True

Roots (`runners.builder.Root`):
  learner  `ApexLearner`: update, get_weights, get_train_step, queue_size,
           close_queue.
  actor    `ApexActor`: get_actions, reset_env, rollout, set_weights.
  shard    `ReplayShard`: serve, stats, get_generation.
  policy   the actor without an env: get_actions, set_weights (export,
           evaluation).
  agent    `ApexAgent`, the complete agent without queues or env:
           get_actions, observe, update, get_weights, set_weights,
           get_train_step (`export.export_agent`).
Spaces:
  record_space   one n-step transition as a shard stores it.
  weights_space  `get_weights()`: {"online", "target"} variables by path.
"""

import dataclasses
from typing import Callable, List, Optional, Tuple, cast
from typing import Dict as TypingDict

import numpy as np

from ingraph_rl.agents.apex.actor import ApexActor, ApexPolicy
from ingraph_rl.agents.apex.agent import ApexAgent
from ingraph_rl.agents.apex.config import ApexConfig
from ingraph_rl.agents.apex.learner import ApexLearner
from ingraph_rl.agents.apex.q_learning import QLearning
from ingraph_rl.agents.apex.queues import ReplayQueues
from ingraph_rl.agents.apex.shard import ReplayShard
from ingraph_rl.core import Component
from ingraph_rl.environments import VectorEnv
from ingraph_rl.runners.builder import LEARNER_APIS, Root, weights_space_of
from ingraph_rl.spaces import BoolBox, Dict, FloatBox, IntBox, Space
from ingraph_rl.utils.config_fields import copy_weights_dtype

ACTOR_APIS = (
  "get_actions",
  "observe",
  "priorities",
  "reset_env",
  "rollout",
  "set_weights",
)
SHARD_APIS = ("serve", "stats", "get_generation", "close_queue")
POLICY_APIS = ("get_actions", "set_weights")
AGENT_APIS = (
  "get_actions",
  "observe",
  "update",
  "get_weights",
  "set_weights",
  "get_train_step",
)
# Actor i explores with seed `config.seed + ACTOR_SEED_STRIDE * (i + 1)`.
ACTOR_SEED_STRIDE = 7919


class ApexBuilder:
  """The roots and spaces of an `ApexConfig`.

  preprocessor: makes the observation preprocessor (a new component per
    root, e.g. Cast + Divide(255) for Atari frames), or None.
  """

  name = "apex"

  def __init__(
    self,
    config: ApexConfig,
    preprocessor: Optional[Callable[[], Component]] = None,
  ) -> None:
    if not isinstance(config, ApexConfig):
      raise TypeError(
        f"ApexBuilder needs an ApexConfig, got {type(config).__name__}"
      )
    self.config = config
    self.preprocessor = preprocessor
    self._weights_spaces: List[Tuple[Space, Dict]] = []

  def _q(self, weights_dtype: Optional[str] = None) -> QLearning:
    return QLearning(
      self.config,
      None if self.preprocessor is None else self.preprocessor(),
      weights_dtype,
    )

  def queue_names(self, prefix: str, num_shards: int) -> ReplayQueues:
    return ReplayQueues(prefix, num_shards)

  # --- spaces ---------------------------------------------------------------

  def record_space(self, observation_space: Space) -> Dict:
    """One n-step transition: the n-step return in "rewards", the
    bootstrap discount discount^m in "discounts"."""
    return Dict(
      states=observation_space,
      actions=IntBox(self.config.num_actions, dtype=np.int64),
      rewards=FloatBox(),
      next_states=observation_space,
      terminals=BoolBox(),
      discounts=FloatBox(),
    )

  def policy_input_spaces(
    self, observation_space: Space
  ) -> TypingDict[str, Space]:
    return {"states": observation_space.with_batch_rank(), "explore": BoolBox()}

  def weights_space(self, observation_space: Space) -> Dict:
    """The space of `get_weights()`, from a build of the Q-learning core
    (cached per observation space)."""
    for space, weights in self._weights_spaces:
      if space == observation_space:
        return weights
    records = self.record_space(observation_space).with_batch_rank()
    executor = Root(
      self._q(),
      {"records": records, "importance_weights": FloatBox(add_batch_rank=True)},
      ("td", "get_weights"),
      seed=self.config.seed,
    ).build()
    values = executor.execute("get_weights")
    weights = Dict({k: weights_space_of(v) for k, v in values.items()})
    self._weights_spaces.append((observation_space, weights))
    return weights

  # --- roots ----------------------------------------------------------------

  def make_learner(self, observation_space: Space, names: ReplayQueues) -> Root:
    learner = ApexLearner(
      self.config, self._q(), self.record_space(observation_space), names
    )
    return Root(
      learner,
      {},
      LEARNER_APIS,
      seed=self.config.seed,
      learner_resident=(learner.samples.path,)
      + tuple(q.path for q in learner.update_queues),
    )

  def actor_seed(self, index: int) -> int:
    return self.config.seed + ACTOR_SEED_STRIDE * (index + 1)

  def make_actor(
    self, env: VectorEnv, names: ReplayQueues, index: int, num_actors: int
  ) -> Root:
    """Actor `index` of `num_actors`: its own epsilon, or one per env
    (`config.actor_epsilons`), and exploration seed."""
    config = dataclasses.replace(self.config, seed=self.actor_seed(index))
    obs_space = cast(Space, env.observation_space)
    actor = ApexActor(
      config,
      env,
      self._q(copy_weights_dtype(self.config.actor_weights_dtype)),
      self.config.actor_epsilons(index, num_actors, env.num_envs),
      self.record_space(obs_space),
      names,
    )
    states = obs_space.with_batch_rank()
    spaces = dict(
      self.policy_input_spaces(obs_space),
      records=self.record_space(obs_space).with_batch_rank(),
      actions=IntBox(
        self.config.num_actions, dtype=np.int64, add_batch_rank=True
      ),
      rewards=FloatBox(add_batch_rank=True),
      next_states=states,
      terminals=BoolBox(add_batch_rank=True),
      truncated=BoolBox(add_batch_rank=True),
      seed=IntBox(1 << 30, low=-1),
      shard=IntBox(names.num_shards),
      weights=self.weights_space(obs_space),
    )
    return Root(
      actor,
      spaces,
      ACTOR_APIS,
      seed=config.seed,
      task_resident={
        q.path: ("replay", i) for i, q in enumerate(actor.insert_queues)
      },
    )

  def make_shard(
    self,
    observation_space: Space,
    names: ReplayQueues,
    index: int,
    generation: int,
  ) -> Root:
    shard = ReplayShard(
      self.config,
      self.record_space(observation_space),
      names,
      index,
      generation,
    )
    return Root(
      shard,
      {},
      SHARD_APIS,
      seed=self.config.seed,
      learner_resident=(shard.samples.path, shard.updates.path),
    )

  def make_agent(self, observation_space: Space, num_envs: int) -> Root:
    """The complete agent in one root (`ApexAgent`: act, observe, update,
    weights) for `num_envs` envs stepped by the caller: what
    `export.export_agent` saves. `get_weights` and `set_weights` use the TF
    layout (the weights space) in both backends."""
    states = observation_space.with_batch_rank()
    spaces = dict(
      self.policy_input_spaces(observation_space),
      actions=IntBox(
        self.config.num_actions, dtype=np.int64, add_batch_rank=True
      ),
      rewards=FloatBox(add_batch_rank=True),
      next_states=states,
      terminals=BoolBox(add_batch_rank=True),
      truncated=BoolBox(add_batch_rank=True),
      weights=self.weights_space(observation_space),
    )
    return Root(
      ApexAgent(self.config, self._q(), self.config.epsilon, num_envs),
      spaces,
      AGENT_APIS,
      seed=self.config.seed,
    )

  def make_policy(self, observation_space: Space) -> Root:
    """The greedy/epsilon policy alone: get_actions, set_weights."""
    spaces = dict(
      self.policy_input_spaces(observation_space),
      weights=self.weights_space(observation_space),
    )
    return Root(
      ApexPolicy(self.config, self._q(), self.config.epsilon),
      spaces,
      POLICY_APIS,
      seed=self.config.seed,
    )

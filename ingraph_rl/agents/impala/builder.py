"""IMPALA's builder: every root, API list and space of the agent, declared
once. Runners (`ingraph_rl.runners`, `ingraph_rl.distributed`,
`ingraph_rl.export`) build IMPALA through it and import nothing of
IMPALA's.

    >>> from ingraph_rl.environments import make_vector_env
    >>> builder = IMPALABuilder(IMPALAConfig(num_actions=2, unroll_length=5))
    >>> env = make_vector_env("CartPole-v1", num_envs=2)
    >>> learner = builder.make_learner(env.observation_space, "doc").build()
    >>> actor = builder.make_actor(env, "doc").build()
    >>> _ = actor.execute("set_weights", learner.execute("get_weights"))
    >>> _ = actor.execute("reset_env", 0)
    >>> int(actor.execute("unroll")["queue_size"])
    2
    >>> _ = learner.execute("close_queue")

Roots (`runners.builder.Root`: component, API list, input spaces, seed):
  learner  `IMPALALearner`: update, get_weights, get_train_step,
           queue_size, drop_queued, close_queue, prime (with staging), and
           update_from_batch when asked (an exported agent's update).
  actor    `IMPALAActor`: act, reset_env, unroll, set_weights.
  policy   `IMPALAPolicy`: act, set_weights (export, evaluation).
  inference server  `InferenceServer` (with `batched_inference`): act,
           serve, set_weights, close; its actors' policy is a
           `RemotePolicy` (make_actor(..., inference=channel)).
Spaces:
  policy_input_spaces  the arguments of the policy's `act` ([B, T] ranks).
  state_space          the LSTM state {"c", "h"} (size 0 without an LSTM).
  record_space         one queued rollout, [T + 1, ...] per env.
  weights_space        the learner's `get_weights()` = the network's
                       variables by path.
"""

import dataclasses
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple, cast
from typing import Dict as TypingDict

import numpy as np

from ingraph_rl.agents.impala.actor import IMPALAActor
from ingraph_rl.agents.impala.config import IMPALAConfig
from ingraph_rl.agents.impala.learner import IMPALALearner
from ingraph_rl.agents.impala.networks import (
  IMPALANetwork,
  IMPALAPolicy,
  make_network,
)
from ingraph_rl.components.env_stepping import rollout_space
from ingraph_rl.components.env_stepping.batched_inference import (
  InferenceChannel,
  InferenceServer,
  RemotePolicy,
)
from ingraph_rl.environments import VectorEnv
from ingraph_rl.runners.builder import (
  ACTOR_APIS,
  LEARNER_APIS,
  POLICY_APIS,
  ActorLearnerBuilder,
  Root,
  weights_space_of,
)
from ingraph_rl.spaces import BoolBox, Dict, FloatBox, IntBox, Space
from ingraph_rl.utils.config_fields import copy_weights_dtype

DEFAULT_QUEUE_NAME = "impala_rollouts"
# Actor i samples with seed `config.seed + ACTOR_SEED_STRIDE * (i + 1)`.
ACTOR_SEED_STRIDE = 7919


class IMPALABuilder:
  """The roots and spaces of an `IMPALAConfig` (see the module docstring).

  Every method takes the env's observation space (a box, or a Dict of a
  frame and an instruction) where the answer depends on it.
  """

  name = "impala"

  def __init__(self, config: IMPALAConfig) -> None:
    if not isinstance(config, IMPALAConfig):
      raise TypeError(
        f"IMPALABuilder needs an IMPALAConfig, got {type(config).__name__}"
      )
    self.config = config
    self._weights_spaces: List[Tuple[Space, Dict]] = []

  def actor_config(self, index: int) -> IMPALAConfig:
    """Actor `index`'s config: its own seed, so actors' action sampling
    does not draw the same random numbers."""
    return dataclasses.replace(
      self.config, seed=self.config.seed + ACTOR_SEED_STRIDE * (index + 1)
    )

  # --- spaces ---------------------------------------------------------------

  def network(
    self, observation_space: Space, weights_dtype: Optional[str] = None
  ) -> IMPALANetwork:
    """A new (composed, unbuilt) network for `observation_space`;
    `weights_dtype` for an actor's copy (see `make_network`)."""
    return make_network(
      self.config, observation_space, weights_dtype=weights_dtype
    )

  def _actor_network(self, observation_space: Space) -> IMPALANetwork:
    """An actor's copy: its torso in `actor_weights_dtype`."""
    return self.network(
      observation_space, copy_weights_dtype(self.config.actor_weights_dtype)
    )

  def state_space(self, observation_space: Space) -> Dict:
    return self.network(observation_space).state_space()

  def policy_input_spaces(
    self, observation_space: Space
  ) -> TypingDict[str, Space]:
    """The spaces of `IMPALAPolicy.act`'s arguments (batch-major [B, T]
    leading ranks), by argument name; also what the learner feeds its
    network (the rollout's observations, dones, rewards and actions)."""
    return {
      "observations": observation_space.with_batch_rank().with_time_rank(),
      "state": self.state_space(observation_space),
      "resets": BoolBox(add_batch_rank=True, add_time_rank=True),
      "last_rewards": FloatBox(add_batch_rank=True, add_time_rank=True),
      "last_actions": IntBox(
        self.config.num_actions,
        dtype=np.int64,
        add_batch_rank=True,
        add_time_rank=True,
      ),
    }

  def record_space(self, observation_space: Space) -> Dict:
    """The space of ONE queued rollout (per env): [T + 1, ...] leaves (the
    `EnvironmentStepper`'s rollout fields; observations keep their Dict
    structure) and, for an LSTM policy, "initial_state", the state before
    step 0."""
    c = self.config
    fields: TypingDict[str, Space] = dict(
      rollout_space(observation_space, c.num_actions, c.unroll_length)
    )
    if c.lstm_units:
      # Only recurrent policies queue a state: TF's queues crash on
      # zero-sized components.
      fields["initial_state"] = self.network(observation_space).state_space(
        batch_rank=False
      )
    return Dict(fields)

  def weights_space(self, observation_space: Space) -> Dict:
    """The space of the learner's `get_weights()` (the network's variables
    by path), from a local build of the network alone (cached per
    observation space): actors and the policy know it without asking a
    learner."""
    for space, weights in self._weights_spaces:
      if space == observation_space:
        return weights
    from ingraph_rl.executors.tensorflow import TFExecutor

    network = self.network(observation_space)
    spaces = self.policy_input_spaces(observation_space)
    spaces["initial_state"] = spaces.pop("state")
    executor = TFExecutor(network, spaces, api_names=["unroll", "variables"])
    weights = weights_space_of(executor.execute("variables"))
    self._weights_spaces.append((observation_space, weights))
    return weights

  # --- roots ----------------------------------------------------------------

  def make_learner(
    self,
    observation_space: Space,
    queue_name: str = DEFAULT_QUEUE_NAME,
    *,
    update_from_batch: bool = False,
  ) -> Root:
    """`IMPALALearner` on the queue `queue_name`; `update_from_batch` also
    builds that API (off by default: one more function to trace, and only
    an export needs it)."""
    record = self.record_space(observation_space)
    inputs = self.policy_input_spaces(observation_space)
    del inputs["state"]
    learner = IMPALALearner(
      self.config,
      self.network(observation_space),
      record,
      Dict(inputs),
      queue_name,
    )
    apis = list(LEARNER_APIS) + ["drop_queued"]
    apis += ["prime"] if learner.staging else []
    spaces = {}
    if update_from_batch:
      apis.append("update_from_batch")
      spaces["rollouts"] = record.with_batch_rank()
    return Root(
      learner,
      spaces,
      apis,
      seed=self.config.seed,
      learner_resident=(learner.queue.path,),
    )

  def make_actor(
    self,
    env: VectorEnv,
    queue_name: str = DEFAULT_QUEUE_NAME,
    index: Optional[int] = None,
    *,
    inference: Optional[InferenceChannel] = None,
  ) -> Root:
    """`IMPALAActor` stepping `env` and enqueueing on `queue_name`; actor
    `index` samples with `actor_config(index)`'s seed (None: the config's
    own). With an `inference` channel, its policy calls go to that
    channel's `InferenceServer` (`make_inference_server`), as actor
    `index` (None: 0), and its `set_weights` does nothing."""
    config = self.config if index is None else self.actor_config(index)
    obs_space = cast(Space, env.observation_space)
    network = self._actor_network(obs_space)
    policy = (
      IMPALAPolicy(network, seed=config.seed)
      if inference is None
      else RemotePolicy(
        inference,
        index or 0,
        obs_space,
        network.state_space(),
        config.num_actions,
      )
    )
    actor = IMPALAActor(
      config,
      env,
      policy,
      network.state_space(),
      self.record_space(obs_space),
      queue_name,
    )
    spaces = dict(
      self.policy_input_spaces(obs_space),
      seed=IntBox(1 << 30, low=-1),
      weights=self.weights_space(obs_space),
    )
    return Root(
      actor,
      spaces,
      ACTOR_APIS,
      seed=config.seed,
      learner_resident=(actor.queue.path,),
    )

  def inference_channel(
    self, envs: Sequence[VectorEnv], name: str
  ) -> InferenceChannel:
    """The channel of one inference server and actors stepping `envs`
    (one per actor): requests as large as the largest policy call (an
    env group's, with `env_groups`)."""

    def largest_call(env):
      if self.config.env_groups == 1:
        return env.num_envs
      return max(group.num_envs for group in getattr(env, "groups", [env]))

    rows = max(largest_call(env) for env in envs)
    return InferenceChannel(name, len(envs), rows)

  def make_inference_server(
    self, observation_space: Space, channel: InferenceChannel
  ) -> Root:
    """`InferenceServer` of `channel`: an `IMPALAPolicy` (sampling with
    actor 0's seed) acting for all actors, one batch per env step,
    `unroll_length` batches per `serve` call."""
    config = self.actor_config(0)
    network = self._actor_network(observation_space)
    server = InferenceServer(
      IMPALAPolicy(network, seed=config.seed),
      channel,
      observation_space,
      network.state_space(),
      config.num_actions,
      steps_per_call=config.unroll_length,
    )
    spaces = dict(
      self.policy_input_spaces(observation_space),
      weights=self.weights_space(observation_space),
    )
    return Root(
      server,
      spaces,
      ("act", "serve", "set_weights", "close"),
      seed=config.seed,
    )

  def make_policy(self, observation_space: Space) -> Root:
    """`IMPALAPolicy` alone: act and set_weights."""
    policy = IMPALAPolicy(
      self.network(observation_space), seed=self.config.seed
    )
    spaces = dict(
      self.policy_input_spaces(observation_space),
      weights=self.weights_space(observation_space),
    )
    return Root(policy, spaces, POLICY_APIS, seed=self.config.seed)


if TYPE_CHECKING:
  # The type checker holds IMPALABuilder to the runners' protocol.
  _PROTOCOL: ActorLearnerBuilder = IMPALABuilder(IMPALAConfig(num_actions=2))

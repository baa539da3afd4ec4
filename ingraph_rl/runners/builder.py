"""The builder protocol: what runners need from an agent.

An agent declares ONCE, in its builder (`ingraph_rl/agents/<agent>/
builder.py`, in the spirit of Acme's builders), its root components, their
API lists and input spaces, its weights space and its record (rollout)
space. Runners take a builder and never import an agent:

  - `runners.driver.ActorLearnerDriver`: actor threads and a learner in one
    process;
  - `distributed.roles`: the ps / learner / actor processes of a cluster;
  - `export.export_policy` and `export.export_actor_learner`: SavedModels;
  - `runners.evaluation.evaluate`: greedy episodes of the policy.

A `Root` is what an executor needs: the root component, its API list, its
input spaces and its seed; `root.build()` makes the `TFExecutor` (or the
executor class given, e.g. a `distributed.PSExecutor`).

The root APIs runners call (names and results are the contract):

  learner  update() -> dict with at least "frames" (env steps trained on)
             and "train_step"; get_weights() -> {path: tensor};
             get_train_step(); queue_size(); close_queue() (cancels pending
             enqueues: the shutdown path); optionally prime() (called once
             before the first update); with update_from_batch=True also
             update_from_batch(rollouts) (an exported agent's update).
  actor    reset_env(seed); unroll() -> {"episodes", "return_sum",
             "length_sum", "env_steps"} (optionally per env:
             "episodes_per_env", "return_sum_per_env", "length_sum_per_env")
             after enqueueing its records on the learner's queue;
             set_weights(weights); act(...) as the policy's.
  policy   act(observations [B, T, ...], state, resets [B, T], last_rewards
             [B, T], last_actions [B, T]) -> {"action", "greedy_action",
             "logits", "values", "state"}; set_weights(weights).
"""

import dataclasses
import typing
from typing import Any, Mapping, Optional, Protocol, Sequence, Tuple, Union

import numpy as np

from ingraph_rl.spaces import Dict, FloatBox

if typing.TYPE_CHECKING:
  from ingraph_rl.core import Component
  from ingraph_rl.environments import VectorEnv
  from ingraph_rl.executors.base import Executor
  from ingraph_rl.spaces import Space

# The APIs each role's root must have (see the module docstring).
LEARNER_APIS = (
  "update",
  "get_weights",
  "get_train_step",
  "queue_size",
  "close_queue",
)
ACTOR_APIS = ("act", "reset_env", "unroll", "set_weights")
POLICY_APIS = ("act", "set_weights")
# The arguments of the policy's `act`, in order.
POLICY_ARGS = (
  "observations",
  "state",
  "resets",
  "last_rewards",
  "last_actions",
)


@dataclasses.dataclass(frozen=True)
class Root:
  """A root component and what its executor needs.

  component: the root component (composed, not built).
  input_spaces: the spaces of its root APIs' arguments, by name.
  api_names: the root APIs to build.
  seed: the executor's seed (initial weights, RNGs).
  learner_resident: paths of components that are shared with the learner
    by a `shared_name` (the rollout queue): in a cluster they must live on
    the learner's device (`distributed.roles` pins them there).
  task_resident: {path: (job, task index)} of components shared by name
    with another cluster task (Ape-X's actors enqueue on the replay
    tasks' insert queues): in a cluster they live on that task.
  """

  component: "Component"
  input_spaces: Mapping[str, "Space"]
  api_names: Sequence[str]
  seed: int = 0
  learner_resident: Sequence[str] = ()
  task_resident: Mapping[str, Tuple[str, int]] = dataclasses.field(
    default_factory=dict
  )

  def build(
    self, executor: Union[str, type] = "tf", **executor_kwargs: Any
  ) -> "Executor":
    """The built executor: "tf" (`TFExecutor`), "torch" (`TorchExecutor`)
    or an executor class (e.g. `distributed.PSExecutor`); the kwargs go to
    it (device_map, trace_at_build, ...)."""
    if executor == "tf":
      from ingraph_rl.executors.tensorflow import TFExecutor

      executor = TFExecutor
    elif executor == "torch":
      from ingraph_rl.executors.torch import TorchExecutor

      executor = TorchExecutor
    elif isinstance(executor, str):
      raise ValueError(
        f"executor must be 'tf', 'torch' or a class, got {executor!r}"
      )
    return executor(
      self.component,
      dict(self.input_spaces),
      api_names=list(self.api_names),
      seed=self.seed,
      **executor_kwargs,
    )


def weights_space_of(weights: Mapping[str, Any]) -> Dict:
  """The space of a `get_weights()` result ({path: tensor or array})."""
  return Dict(
    {
      path: FloatBox(tuple(np.shape(v)), dtype=_numpy_dtype(v))
      for path, v in weights.items()
    }
  )


def _numpy_dtype(value: Any) -> np.dtype:
  dtype = getattr(value, "dtype", None)
  if dtype is not None and hasattr(dtype, "as_numpy_dtype"):
    return np.dtype(dtype.as_numpy_dtype)  # A tf.Tensor's.
  return np.asarray(value).dtype


class ActorLearnerBuilder(Protocol):
  """An agent whose actors step vector envs and feed a learner's queue
  (IMPALA; Ape-X next): the roots every runner builds.

  name: the agent's name (SavedModel metadata, log lines).
  """

  name: str

  def record_space(self, observation_space: "Space") -> "Space":
    """The space of ONE queued record (e.g. a rollout of one env)."""

  def weights_space(self, observation_space: "Space") -> Dict:
    """The space of the learner's `get_weights()` output (what actors and
    the policy take in `set_weights`)."""

  def state_space(self, observation_space: "Space") -> "Space":
    """The policy's recurrent state (with a batch rank)."""

  def make_learner(
    self,
    observation_space: "Space",
    queue_name: str,
    *,
    update_from_batch: bool = False,
  ) -> Root:
    """The learner root, dequeuing from the queue `queue_name`."""

  def make_actor(
    self, env: "VectorEnv", queue_name: str, index: Optional[int] = None
  ) -> Root:
    """Actor `index`'s root (its own sampling seed; None: the config's),
    stepping `env` and enqueueing on the queue `queue_name`."""

  def make_policy(self, observation_space: "Space") -> Root:
    """The policy alone (act, set_weights): export and evaluation."""

"""Ape-X settings (Horgan et al., 2018), checked when made. Flag names
follow the paper and RLlib's Ape-X where they exist."""

import dataclasses
import typing

from ingraph_rl.errors import BuildError
from ingraph_rl.utils.config_fields import (
  COMPUTE_DTYPES,
  choice_problems,
  compute_dtype_field,
  field,
  required,
)


@dataclasses.dataclass(frozen=True)
class ApexConfig:
  """Everything an Ape-X agent needs besides its spaces. Each field's help
  is its flag's (`experiments/apex.py` generates the flags).

  >>> ApexConfig(num_actions=2).actor_epsilon(0, 1)
  0.4
  """

  num_actions: int = required("Size of the discrete action set (the env's).")
  network: typing.Tuple[dict, ...] = field(
    (
      {"type": "dense", "units": 64, "activation": "relu"},
      {"type": "dense", "units": 64, "activation": "relu"},
    ),
    "The Q-network's torso as a layer list spec.",
    flag=False,
  )
  dueling: bool = field(True, "Dueling head.")
  compute_dtype: str = compute_dtype_field()
  actor_weights_dtype: str = field(
    "float32",
    "Dtype of the actors' copies of the weights: float32, or bfloat16 (cast "
    "once per weight read; the actors' torso products, Q-values and initial "
    "priorities in bfloat16, without a cast per pass; fast where oneDNN "
    "finds AMX or AVX512-BF16). The learner keeps compute_dtype.",
    choices=COMPUTE_DTYPES,
  )
  double_q: bool = field(True, "Double-Q targets.")
  n_step: int = field(3, "Steps of the bootstrapped return.")
  discount: float = field(0.99, "Discount.")
  huber_delta: typing.Optional[float] = field(
    1.0, "Huber loss delta (0 or None: squared loss).", zero_is_none=True
  )
  learning_rate: float = field(1e-4, "Adam learning rate.")
  adam_epsilon: float = field(1.5e-4, "Adam epsilon.")
  clip_grad_norm: typing.Optional[float] = field(
    40.0, "Global-norm gradient clip (0 or None: off).", zero_is_none=True
  )
  buffer_size: int = field(
    2_000_000, "Capacity of EACH replay shard (transitions; a ring)."
  )
  prioritized_replay_alpha: float = field(0.6, "Priority exponent alpha.")
  prioritized_replay_beta: float = field(0.4, "Importance exponent beta.")
  train_batch_size: int = field(512, "Learner batch size.")
  learning_starts: int = field(
    50_000, "Transitions a shard holds before it serves batches."
  )
  epsilon: float = field(
    0.4, "Base exploration rate: actor i uses epsilon^(1 + alpha i/(N-1))."
  )
  epsilon_alpha: float = field(7.0, "Exponent spread of the actors' epsilons.")
  epsilon_per_env: bool = field(
    False,
    "Spread the paper's epsilons over every env of every actor (N = actors "
    "x envs per actor), not one per actor. The paper ran one env per actor "
    "and hundreds of actors; with 2 actors, one of them acts at 0.4 and "
    "makes half the data.",
  )
  rollout_fragment_length: int = field(
    50,
    "Vector steps an actor takes per graph call (the paper's local buffer).",
  )
  actor_weight_sync_steps: int = field(
    400, "Env steps of an actor between reads of the published weights."
  )
  target_update_period: int = field(
    2500, "Learner updates between target network syncs."
  )
  publish_every: int = field(1, "Learner updates between weight publishes.")
  prefetch_batches: int = field(
    2, "Sampled batches waiting for the learner (the shards' prefetch)."
  )
  serve_batches: int = field(
    1,
    "Batches a shard samples in one serve call, once that many fit in the "
    "prefetch: fewer, larger calls (each costs a cross-process round trip "
    "in a cluster). At most prefetch_batches.",
  )
  max_inserts_per_serve: int = field(
    4096, "Transitions a shard inserts at most per serve call."
  )
  insert_queue_capacity: int = field(
    20_000, "Transitions waiting in a shard's insert queue."
  )
  training_intensity: typing.Optional[float] = field(
    None,
    "Samples trained per env step, held from both sides past "
    "learning_starts per shard: actors wait while they outrun it, the "
    "learner while it runs more than a few batches past it (RLlib's "
    "meaning). 0 or None: unthrottled, as in the paper. On a few cores "
    "either side otherwise starves the other.",
    zero_is_none=True,
  )
  seed: int = field(
    0,
    "Seed of the initial weights, exploration and replay sampling.",
    flag=False,
  )

  def actor_epsilon(self, index: int, num_actors: int) -> float:
    """The paper's epsilon of actor `index` of `num_actors`:
    epsilon^(1 + alpha * index / (num_actors - 1)) (epsilon alone for one
    actor)."""
    if not 0 <= index < num_actors:
      raise ValueError(f"actor index {index} not in [0, {num_actors})")
    if num_actors == 1:
      return self.epsilon
    return self.epsilon ** (1.0 + self.epsilon_alpha * index / (num_actors - 1))

  def actor_epsilons(
    self, index: int, num_actors: int, num_envs: int
  ) -> typing.Union[float, typing.Tuple[float, ...]]:
    """What actor `index` of `num_actors`, stepping `num_envs` envs, acts
    with: its `actor_epsilon`, or with `epsilon_per_env` one rate per env,
    env j of actor i being actor i * num_envs + j of num_actors * num_envs.

    >>> c = ApexConfig(num_actions=2, epsilon_per_env=True)
    >>> [round(e, 4) for e in c.actor_epsilons(1, 2, 2)]  # envs 2, 3 of 4
    [0.0056, 0.0007]
    """
    if not self.epsilon_per_env:
      return self.actor_epsilon(index, num_actors)
    if not 0 <= index < num_actors:
      raise ValueError(f"actor index {index} not in [0, {num_actors})")
    total = num_actors * num_envs
    return tuple(
      self.actor_epsilon(index * num_envs + j, total) for j in range(num_envs)
    )

  def __post_init__(self):
    problems = choice_problems(self)
    if self.num_actions < 2:
      problems.append("num_actions must be >= 2")
    if not 0.0 <= self.discount <= 1.0:
      problems.append("discount must lie in [0, 1]")
    if self.n_step < 1:
      problems.append("n_step must be >= 1")
    if not 1 <= self.train_batch_size <= self.buffer_size:
      problems.append("need 1 <= train_batch_size <= buffer_size")
    if self.learning_starts < self.train_batch_size:
      problems.append("learning_starts must be >= train_batch_size")
    if self.learning_starts > self.buffer_size:
      problems.append("learning_starts must be <= buffer_size")
    if not 0.0 <= self.epsilon <= 1.0:
      problems.append("epsilon must lie in [0, 1]")
    if self.learning_rate <= 0:
      problems.append("learning_rate must be > 0")
    if self.training_intensity is not None and self.training_intensity < 0:
      problems.append("training_intensity must be >= 0")
    for name in (
      "rollout_fragment_length",
      "actor_weight_sync_steps",
      "target_update_period",
      "publish_every",
      "prefetch_batches",
      "serve_batches",
      "max_inserts_per_serve",
      "insert_queue_capacity",
    ):
      if getattr(self, name) < 1:
        problems.append(f"{name} must be >= 1")
    if self.serve_batches > self.prefetch_batches:
      problems.append("serve_batches must be <= prefetch_batches")
    if problems:
      raise BuildError("ApexConfig: " + "; ".join(problems))

"""DQN settings, checked when made (no spec dicts to edit)."""

import dataclasses
import typing

from ingraph_rl.errors import BuildError


@dataclasses.dataclass(frozen=True)
class DQNConfig:
  """Everything a DQN agent needs besides its spaces.

  >>> DQNConfig(num_actions=2).target_sync_every
  500
  """
  num_actions: int
  network: typing.Tuple[dict, ...] = (
      {"type": "dense", "units": 64, "activation": "relu"},
      {"type": "dense", "units": 64, "activation": "relu"})
  dueling: bool = True
  double_q: bool = True
  n_step: int = 1                   # >1: n-step returns (NStepAccumulator).
  discount: float = 0.99
  huber_delta: typing.Optional[float] = 1.0
  learning_rate: float = 1e-3
  adam_epsilon: float = 1e-7
  clip_grad_norm: typing.Optional[float] = 10.0
  replay_capacity: int = 50_000
  prioritized: bool = False
  alpha: float = 0.6
  beta: float = 0.4
  batch_size: int = 64
  epsilon_from: float = 1.0
  epsilon_to: float = 0.05
  epsilon_steps: int = 10_000       # Agent steps (calls x envs) to decay.
  learning_starts: int = 1_000      # Env steps before the first update.
  update_every: int = 1             # Vector steps between updates.
  target_sync_every: int = 500      # Vector steps between target syncs.
  num_envs: typing.Optional[int] = None   # Rows per observe with n_step > 1
                                          # (default: the env's num_envs).
  seed: int = 0

  def __post_init__(self):
    problems = []
    if self.num_actions < 2:
      problems.append("num_actions must be >= 2")
    if not 0.0 <= self.discount <= 1.0:
      problems.append("discount must lie in [0, 1]")
    if self.n_step < 1:
      problems.append("n_step must be >= 1")
    if self.num_envs is not None and self.num_envs < 1:
      problems.append("num_envs must be >= 1")
    if self.batch_size < 1 or self.batch_size > self.replay_capacity:
      problems.append("need 1 <= batch_size <= replay_capacity")
    if self.learning_starts < self.batch_size:
      problems.append("learning_starts must be >= batch_size")
    if self.update_every < 1 or self.target_sync_every < 1:
      problems.append("update_every and target_sync_every must be >= 1")
    if not 0.0 <= self.epsilon_to <= self.epsilon_from <= 1.0:
      problems.append("need 0 <= epsilon_to <= epsilon_from <= 1")
    if self.learning_rate <= 0:
      problems.append("learning_rate must be > 0")
    if problems:
      raise BuildError("DQNConfig: " + "; ".join(problems))

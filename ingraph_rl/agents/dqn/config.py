"""DQN settings, checked when made (no spec dicts to edit)."""

import dataclasses
import typing

from ingraph_rl.errors import BuildError
from ingraph_rl.utils.config_fields import (
  choice_problems,
  compute_dtype_field,
  field,
  required,
)


@dataclasses.dataclass(frozen=True)
class DQNConfig:
  """Everything a DQN agent needs besides its spaces. Each field's help is
  its flag's (`experiments/dqn.py` generates the flags from these fields).

  >>> DQNConfig(num_actions=2).target_sync_every
  500
  """

  num_actions: int = required("Size of the discrete action set (the env's).")
  network: typing.Tuple[dict, ...] = field(
    (
      {"type": "dense", "units": 64, "activation": "relu"},
      {"type": "dense", "units": 64, "activation": "relu"},
    ),
    "The Q-network's torso as a layer list spec (experiments: Nature "
    "DQN's on Atari frames, else this MLP).",
    flag=False,
  )
  dueling: bool = field(True, "Dueling head.")
  compute_dtype: str = compute_dtype_field()
  double_q: bool = field(True, "Double-Q targets.")
  n_step: int = field(
    1,
    "Steps of the bootstrapped return (n-step DQN, through an "
    "NStepAccumulator, or summed by the FrameStackReplay when sampling).",
  )
  discount: float = field(0.99, "Discount.")
  huber_delta: typing.Optional[float] = field(
    1.0, "Huber loss delta (0 or None: squared loss).", zero_is_none=True
  )
  learning_rate: float = field(1e-3, "Adam learning rate.")
  adam_epsilon: float = field(1e-7, "Adam epsilon.")
  clip_grad_norm: typing.Optional[float] = field(
    10.0, "Global-norm gradient clip (0 or None: off).", zero_is_none=True
  )
  replay_capacity: int = field(
    50_000,
    "Replay capacity (transitions; env steps of all envs with "
    "frame_stack_replay).",
  )
  prioritized: bool = field(False, "Prioritized replay.")
  frame_stack_replay: bool = field(
    False,
    "Store stacked-frame observations [H, W, stack] (one channel per "
    "frame, newest last, e.g. Atari's) in a FrameStackReplay: each frame "
    "once, not 2 * stack times; one step per env per observe, n-step "
    "returns summed when sampling. Truncated episodes then end without "
    "bootstrap. Not with prioritized replay.",
  )
  alpha: float = field(0.6, "Prioritized replay's priority exponent.")
  beta: float = field(0.4, "Prioritized replay's importance exponent.")
  batch_size: int = field(64, "Update batch size.")
  epsilon_from: float = field(1.0, "Initial exploration rate.")
  epsilon_to: float = field(0.05, "Final exploration rate.")
  epsilon_steps: int = field(
    10_000, "Agent steps (calls x envs) over which epsilon decays."
  )
  learning_starts: int = field(1_000, "Env steps before the first update.")
  update_every: int = field(1, "Vector steps between updates.")
  target_sync_every: int = field(500, "Vector steps between target syncs.")
  env_groups: int = field(
    1,
    "Env groups of the in-graph loop: 2 double-buffers them (one group's "
    "env step runs while the Q-network acts on the other's observations); "
    "the env must have the groups (a GroupedVectorEnv; experiments/dqn.py "
    "makes one).",
  )
  num_envs: typing.Optional[int] = field(
    None,
    "Rows per observe call with n_step > 1 or frame_stack_replay "
    "(default: the env's num_envs).",
    flag=False,
  )
  seed: int = field(
    0,
    "Seed of the initial weights, exploration and replay sampling.",
    flag=False,
  )

  def __post_init__(self):
    problems = choice_problems(self)
    if self.num_actions < 2:
      problems.append("num_actions must be >= 2")
    if not 0.0 <= self.discount <= 1.0:
      problems.append("discount must lie in [0, 1]")
    if self.n_step < 1:
      problems.append("n_step must be >= 1")
    if self.frame_stack_replay and self.prioritized:
      # Priorities per step would need a sum tree over the streams' rings
      # and its updates by flat index: not worth it yet.
      problems.append("frame_stack_replay does not support prioritized replay")
    if self.num_envs is not None and self.num_envs < 1:
      problems.append("num_envs must be >= 1")
    if self.batch_size < 1 or self.batch_size > self.replay_capacity:
      problems.append("need 1 <= batch_size <= replay_capacity")
    if self.learning_starts < self.batch_size:
      problems.append("learning_starts must be >= batch_size")
    if self.update_every < 1 or self.target_sync_every < 1:
      problems.append("update_every and target_sync_every must be >= 1")
    if self.env_groups < 1:
      problems.append("env_groups must be >= 1")
    if not 0.0 <= self.epsilon_to <= self.epsilon_from <= 1.0:
      problems.append("need 0 <= epsilon_to <= epsilon_from <= 1")
    if self.learning_rate <= 0:
      problems.append("learning_rate must be > 0")
    if problems:
      raise BuildError("DQNConfig: " + "; ".join(problems))

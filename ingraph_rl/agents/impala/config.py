"""IMPALA settings, checked when made (no spec dicts to edit).

Defaults follow scalable_agent (Espeholt et al. 2018) where it has them:
RMSProp(decay 0.99, momentum 0, epsilon 0.1), baseline_cost 0.5,
discounting 0.99, unroll_length 100 and batch_size 32 for DM Lab; the
presets (experiments/impala.py's CartPole, the flagfiles) override
several.
"""

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

REWARD_CLIPPINGS = ("abs_one", "soft_asymmetric", "none")
TORSOS = ("mlp", "small", "large")

MLP_TORSO = (
  {"type": "dense", "units": 64, "activation": "tanh"},
  {"type": "dense", "units": 64, "activation": "tanh"},
)


@dataclasses.dataclass(frozen=True)
class IMPALAConfig:
  """Everything an IMPALA actor and learner need besides the env.

  >>> IMPALAConfig(num_actions=2).queue_capacity
  64

  Each field's help is its flag's (`experiments/impala.py` generates the
  flags from these fields). Dict observations (a frame and a text leaf, DM
  Lab's RGB_INTERLEAVED and INSTR) add scalable_agent's instruction
  encoder; see `make_network`.
  """

  num_actions: int = required("Size of the discrete action set (the env's).")
  torso: typing.Union[str, typing.Tuple[dict, ...]] = field(
    "mlp",
    "Network torso: mlp (2 x 64 tanh), small or large (IMPALA's "
    "shallow and deep ResNet conv torsos); in code also a list spec of "
    "layers.",
    choices=TORSOS,
  )
  lstm_units: typing.Optional[int] = field(
    None, "LSTM size on the torso (0 or None: feed-forward).", zero_is_none=True
  )
  compute_dtype: str = compute_dtype_field()
  actor_weights_dtype: str = field(
    "float32",
    "Dtype of the actors' copies of the torso's weights (and of a batched "
    "inference server's): float32, or bfloat16 (cast once per weight read; "
    "the actors' torso products in bfloat16 without a cast per step; fast "
    "where oneDNN finds AMX or AVX512-BF16). The learner keeps "
    "compute_dtype; exported and evaluated policies float32.",
    choices=COMPUTE_DTYPES,
  )
  feed_reward_action: bool = field(
    True,
    "Feed the clipped last reward and one-hot last action to the "
    "core beside the torso output (scalable_agent).",
  )
  bootstrap_on_truncation: bool = field(
    True,
    "Bootstrap returns from V(final observation) where a time "
    "limit truncates an episode.",
  )
  unroll_length: int = field(100, "Steps per rollout (T).")
  batch_size: int = field(32, "Rollouts per learner batch.")
  discounting: float = field(0.99, "Discount factor.")
  baseline_cost: float = field(0.5, "Baseline (value) loss weight.")
  entropy_cost: float = field(0.00025, "Entropy loss weight.")
  reward_clipping: str = field(
    "abs_one", "Reward clipping.", choices=REWARD_CLIPPINGS
  )
  learning_rate: float = field(0.00048, "RMSProp learning rate.")
  decay: float = field(0.99, "RMSProp decay.")
  momentum: float = field(0.0, "RMSProp momentum.")
  epsilon: float = field(
    0.1, "RMSProp epsilon (inside the square root, TF's convention)."
  )
  clip_grad_norm: typing.Optional[float] = field(
    40.0, "Global-norm gradient clip (0 or None: off).", zero_is_none=True
  )
  lr_decay_steps: typing.Optional[int] = field(
    None,
    "Updates over which the learning rate decays linearly to 0 "
    "(None: constant); experiments set it from --lr_decay and the frame "
    "budget.",
    flag=False,
  )
  queue_capacity: int = field(64, "Rollouts (one per env) the queue holds.")
  env_groups: int = field(
    1,
    "Env groups per actor: 2 double-buffers them (one group's env step "
    "runs while the policy acts on the other's observations); the "
    "actor's env must have the groups (make_actor_env(..., env_groups)).",
  )
  batched_inference: bool = field(
    False,
    "Batch inference across actors (SEED RL): each step, ONE policy "
    "call on an inference thread acts for all actors' envs, instead of "
    "one per actor (single-process driver only).",
  )
  use_staging: bool = field(
    True, "Stage the next batch while the current one trains."
  )
  scale_observations: typing.Optional[float] = field(
    None,
    "Divide frame observations by this (None: 255 for uint8 "
    "frames, else none).",
    zero_is_none=True,
  )
  seed: int = field(0, "Seed of the initial weights and sampling.", flag=False)

  def __post_init__(self):
    problems = choice_problems(self)
    if self.num_actions < 2:
      problems.append("num_actions must be >= 2")
    if self.lstm_units is not None and self.lstm_units < 1:
      problems.append("lstm_units must be >= 1 or None")
    if self.unroll_length < 1 or self.batch_size < 1:
      problems.append("unroll_length and batch_size must be >= 1")
    if not 0.0 <= self.discounting <= 1.0:
      problems.append("discounting must lie in [0, 1]")
    if self.learning_rate <= 0:
      problems.append("learning_rate must be > 0")
    if self.queue_capacity < 1:
      problems.append("queue_capacity must be >= 1")
    if self.env_groups < 1:
      problems.append("env_groups must be >= 1")
    if self.lr_decay_steps is not None and self.lr_decay_steps < 1:
      problems.append("lr_decay_steps must be >= 1 or None")
    if problems:
      raise BuildError("IMPALAConfig: " + "; ".join(problems))

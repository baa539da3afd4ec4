"""IMPALA settings, checked when made (no spec dicts to edit).

Defaults follow scalable_agent (Espeholt et al. 2018) where it has them:
RMSProp(decay 0.99, momentum 0, epsilon 0.1), baseline_cost 0.5,
discounting 0.99, unroll_length 100 and batch_size 32 for DM Lab; the
CartPole flagfile overrides several.
"""

import dataclasses
import typing

from ingraph_rl.errors import BuildError

REWARD_CLIPPINGS = ("abs_one", "soft_asymmetric", "none")

MLP_TORSO = ({"type": "dense", "units": 64, "activation": "tanh"},
             {"type": "dense", "units": 64, "activation": "tanh"})


@dataclasses.dataclass(frozen=True)
class IMPALAConfig:
  """Everything an IMPALA actor and learner need besides the env.

  >>> IMPALAConfig(num_actions=2).queue_capacity
  64

  torso: a list spec of layers (default: MLP 64-64 tanh), or "small" /
    "large" for IMPALA's shallow and deep (ResNet) conv torsos.
  lstm_units: an LSTM on the torso (None: feed-forward).
  feed_reward_action: feed the clipped last reward and the one-hot last
    action to the LSTM (or the heads) beside the torso output, as
    scalable_agent does.
  bootstrap_on_truncation: where an episode is truncated (a time limit),
    the return bootstraps from V(final observation) instead of 0.
  Dict observations (a frame and a text leaf, DM Lab's RGB_INTERLEAVED and
  INSTR) add scalable_agent's instruction encoder; see `make_network`.
  """
  num_actions: int
  torso: typing.Union[str, typing.Tuple[dict, ...]] = MLP_TORSO
  lstm_units: typing.Optional[int] = None
  feed_reward_action: bool = True
  bootstrap_on_truncation: bool = True
  unroll_length: int = 100
  batch_size: int = 32
  discounting: float = 0.99
  baseline_cost: float = 0.5
  entropy_cost: float = 0.00025
  reward_clipping: str = "abs_one"
  learning_rate: float = 0.00048
  decay: float = 0.99
  momentum: float = 0.0
  epsilon: float = 0.1
  clip_grad_norm: typing.Optional[float] = 40.0
  lr_decay_steps: typing.Optional[int] = None   # Linear decay to 0 (updates).
  queue_capacity: int = 64                      # In rollouts (one per env).
  use_staging: bool = True
  scale_observations: typing.Optional[float] = None  # e.g. 255 for frames.
  seed: int = 0

  def __post_init__(self):
    problems = []
    if self.num_actions < 2:
      problems.append("num_actions must be >= 2")
    if isinstance(self.torso, str) and self.torso not in ("small", "large"):
      problems.append(f"torso must be a layer spec, 'small' or 'large', got "
                      f"{self.torso!r}")
    if self.lstm_units is not None and self.lstm_units < 1:
      problems.append("lstm_units must be >= 1 or None")
    if self.unroll_length < 1 or self.batch_size < 1:
      problems.append("unroll_length and batch_size must be >= 1")
    if not 0.0 <= self.discounting <= 1.0:
      problems.append("discounting must lie in [0, 1]")
    if self.reward_clipping not in REWARD_CLIPPINGS:
      problems.append(f"reward_clipping must be one of {REWARD_CLIPPINGS}")
    if self.learning_rate <= 0:
      problems.append("learning_rate must be > 0")
    if self.queue_capacity < 1:
      problems.append("queue_capacity must be >= 1")
    if self.lr_decay_steps is not None and self.lr_decay_steps < 1:
      problems.append("lr_decay_steps must be >= 1 or None")
    if problems:
      raise BuildError("IMPALAConfig: " + "; ".join(problems))

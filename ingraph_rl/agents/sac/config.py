"""SAC settings, checked when made (CleanRL's names where it has them)."""

import dataclasses
import typing

import numpy as np

from ingraph_rl.errors import BuildError
from ingraph_rl.utils.config_fields import field, required


@dataclasses.dataclass(frozen=True)
class SACConfig:
  """Everything a SAC agent needs besides its observation space. Each
  field's help is its flag's (`experiments/sac.py` generates the flags
  from these fields; CleanRL's `sac_continuous_action.py` names).

  >>> SACConfig(action_low=(-2.0,), action_high=(2.0,)).target_entropy
  -1.0
  """

  action_low: typing.Tuple[float, ...] = required(
    "Lower bounds of the action box, one per action dim (the env's)."
  )
  action_high: typing.Tuple[float, ...] = required(
    "Upper bounds of the action box, one per action dim (the env's)."
  )
  hidden_units: int = field(256, "Units of each hidden layer (actor, Qs).")
  hidden_layers: int = field(2, "Hidden ReLU layers of actor and Qs.")
  buffer_size: int = field(1_000_000, "Replay memory capacity.")
  gamma: float = field(0.99, "Discount.")
  tau: float = field(0.005, "Target smoothing coefficient (Polyak).")
  batch_size: int = field(256, "Batch size sampled from the replay memory.")
  learning_starts: int = field(
    5_000, "Env steps of uniform random actions before learning starts."
  )
  policy_lr: float = field(3e-4, "Adam learning rate of the actor.")
  q_lr: float = field(
    1e-3, "Adam learning rate of the Q-networks (and of the temperature)."
  )
  policy_frequency: int = field(
    2,
    "Updates between actor updates; each time the actor (and temperature) "
    "takes that many steps on the batch (TD3's delay, as CleanRL).",
  )
  target_network_frequency: int = field(
    1, "Updates between target-network moves (each by tau)."
  )
  alpha: float = field(
    0.2, "Entropy temperature when not --autotune (autotune starts at 1)."
  )
  autotune: bool = field(
    True, "Tune the temperature towards the target entropy -|A|."
  )
  adam_epsilon: float = field(1e-8, "Adam epsilon of the three optimizers.")
  seed: int = field(
    0,
    "Seed of the initial weights, actions and replay sampling.",
    flag=False,
  )

  @classmethod
  def for_env(cls, env, **kwargs):
    """A config for `env`'s action box (a FloatBox of shape [A])."""
    space = env.action_space
    shape = tuple(getattr(space, "shape", ()) or ())
    if len(shape) != 1 or not hasattr(space, "low"):
      raise BuildError(
        f"SACConfig: SAC needs a box of actions of shape [A], got {space!r}"
      )
    low = np.broadcast_to(np.asarray(space.low, np.float64), shape)
    high = np.broadcast_to(np.asarray(space.high, np.float64), shape)
    return cls(
      action_low=tuple(float(x) for x in low),
      action_high=tuple(float(x) for x in high),
      **kwargs,
    )

  @property
  def action_dim(self):
    return len(self.action_low)

  @property
  def target_entropy(self):
    """-|A| (the SAC paper's heuristic, CleanRL's)."""
    return -float(self.action_dim)

  @property
  def network(self):
    """The hidden layers as a NeuralNetwork list spec."""
    return tuple(
      {"type": "dense", "units": self.hidden_units, "activation": "relu"}
      for _ in range(self.hidden_layers)
    )

  def __post_init__(self):
    problems = []
    low = np.asarray(self.action_low, np.float64)
    high = np.asarray(self.action_high, np.float64)
    if low.ndim != 1 or low.shape != high.shape or low.size < 1:
      problems.append(
        "action_low and action_high need one bound per action dim, got "
        f"{self.action_low!r} and {self.action_high!r}"
      )
    elif not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))) or (
      not np.all(high > low)
    ):
      problems.append("the action box must be finite with high > low")
    if self.hidden_units < 1 or self.hidden_layers < 1:
      problems.append("hidden_units and hidden_layers must be >= 1")
    if not 0.0 <= self.gamma <= 1.0:
      problems.append("gamma must lie in [0, 1]")
    if not 0.0 < self.tau <= 1.0:
      problems.append("tau must lie in (0, 1]")
    if self.batch_size < 1 or self.batch_size > self.buffer_size:
      problems.append("need 1 <= batch_size <= buffer_size")
    if self.learning_starts < self.batch_size:
      problems.append("learning_starts must be >= batch_size")
    if self.policy_frequency < 1 or self.target_network_frequency < 1:
      problems.append(
        "policy_frequency and target_network_frequency must be >= 1"
      )
    if self.policy_lr <= 0 or self.q_lr <= 0 or self.adam_epsilon <= 0:
      problems.append("policy_lr, q_lr and adam_epsilon must be > 0")
    if not (np.isfinite(self.alpha) and self.alpha >= 0.0):
      problems.append("alpha must be finite and >= 0")
    if problems:
      raise BuildError("SACConfig: " + "; ".join(problems))

"""PPO settings, checked when made (no spec dicts to edit).

Field names and defaults are CleanRL's `ppo.py` (Huang et al., "The 37
implementation details of PPO") where it has them; the presets
(experiments/ppo.py's CartPole, flagfiles/ppo_pong.cfg and
ppo_halfcheetah.cfg) override several. A2C is a config choice:
`update_epochs=1, num_minibatches=1, clip_coef=None, clip_vloss=False,
norm_adv=False`.
"""

import dataclasses
import typing

from ingraph_rl.errors import BuildError
from ingraph_rl.utils.config_fields import choice_problems, field

TORSOS = ("mlp", "nature")


@dataclasses.dataclass(frozen=True)
class PPOConfig:
  """Everything a PPO agent needs besides its env.

  >>> PPOConfig(num_actions=2).minibatch_size(num_envs=4)
  128

  Exactly one of `num_actions` (a categorical policy) and `action_dim` (a
  Gaussian policy with a state-independent log std) is set, from the env's
  action space. Each field's help is its flag's (`experiments/ppo.py`
  generates the flags from these fields).
  """

  num_actions: typing.Optional[int] = field(
    None, "Discrete actions (categorical policy).", flag=False
  )
  action_dim: typing.Optional[int] = field(
    None, "Continuous action dims (Gaussian policy).", flag=False
  )
  torso: str = field(
    "mlp",
    "Network torso: mlp (hidden_sizes, tanh) or nature (Nature DQN's "
    "conv torso and a 512 ReLU layer, CleanRL's ppo_atari).",
    choices=TORSOS,
  )
  hidden_units: int = field(64, "Units of each mlp layer.")
  hidden_layers: int = field(2, "Layers of the mlp torso.")
  shared_torso: bool = field(
    False,
    "One torso for the policy and value heads (CleanRL's ppo_atari); "
    "else each has its own (ppo.py, ppo_continuous_action.py).",
  )
  num_steps: int = field(128, "Steps per env per rollout.")
  learning_rate: float = field(2.5e-4, "Adam learning rate.")
  anneal_lr: bool = field(
    True, "Anneal the learning rate linearly to 0 over the updates."
  )
  num_updates: typing.Optional[int] = field(
    None,
    "Updates the learning rate anneals over (experiments: total_timesteps "
    "// (num_envs * num_steps)).",
    flag=False,
  )
  adam_epsilon: float = field(1e-5, "Adam epsilon.")
  gamma: float = field(0.99, "Discount factor.")
  gae_lambda: float = field(0.95, "GAE lambda.")
  num_minibatches: int = field(4, "Minibatches per epoch.")
  update_epochs: int = field(4, "Epochs over each rollout.")
  norm_adv: bool = field(True, "Normalize advantages per minibatch.")
  clip_coef: typing.Optional[float] = field(
    0.2,
    "Surrogate clipping coefficient (0 or None: no clipping, A2C's "
    "plain policy gradient).",
    zero_is_none=True,
  )
  clip_vloss: bool = field(
    True, "Clip the value loss around the rollout's values (clip_coef)."
  )
  ent_coef: float = field(0.01, "Entropy bonus coefficient.")
  vf_coef: float = field(0.5, "Value loss coefficient.")
  max_grad_norm: typing.Optional[float] = field(
    0.5, "Global-norm gradient clip (0 or None: off).", zero_is_none=True
  )
  target_kl: typing.Optional[float] = field(
    None,
    "Stop an update's epochs once an epoch's last minibatch's approximate "
    "KL exceeds this (0 or None: off).",
    zero_is_none=True,
  )
  normalize_observations: bool = field(
    False,
    "Running mean/std observation normalization in the graph, clipped to "
    "+-10 (CleanRL's continuous PPO, gymnasium's NormalizeObservation).",
  )
  normalize_rewards: bool = field(
    False,
    "Scale rewards by the running std of the discounted return, clipped "
    "to +-10 (gymnasium's NormalizeReward), in the graph.",
  )
  initial_log_std: float = field(0.0, "Gaussian policy's initial log std.")
  seed: int = field(
    0, "Seed of the initial weights and the sampling.", flag=False
  )

  @property
  def continuous(self) -> bool:
    return self.action_dim is not None

  def minibatch_size(self, num_envs: int) -> int:
    """Samples per minibatch: num_envs * num_steps // num_minibatches."""
    return num_envs * self.num_steps // self.num_minibatches

  def __post_init__(self):
    problems = choice_problems(self)
    if (self.num_actions is None) == (self.action_dim is None):
      problems.append("set exactly one of num_actions and action_dim")
    if self.num_actions is not None and self.num_actions < 2:
      problems.append("num_actions must be >= 2")
    if self.action_dim is not None and self.action_dim < 1:
      problems.append("action_dim must be >= 1")
    for name in ("num_steps", "num_minibatches", "update_epochs"):
      if getattr(self, name) < 1:
        problems.append(f"{name} must be >= 1")
    if self.hidden_units < 1 or self.hidden_layers < 1:
      problems.append("hidden_units and hidden_layers must be >= 1")
    if not 0.0 <= self.gamma <= 1.0 or not 0.0 <= self.gae_lambda <= 1.0:
      problems.append("gamma and gae_lambda must lie in [0, 1]")
    if self.learning_rate <= 0 or self.adam_epsilon <= 0:
      problems.append("learning_rate and adam_epsilon must be > 0")
    if self.clip_coef is not None and self.clip_coef <= 0:
      problems.append("clip_coef must be > 0 or None")
    if self.clip_vloss and self.clip_coef is None:
      problems.append("clip_vloss needs a clip_coef")
    if self.max_grad_norm is not None and self.max_grad_norm <= 0:
      problems.append("max_grad_norm must be > 0 or None")
    if self.target_kl is not None and self.target_kl <= 0:
      problems.append("target_kl must be > 0 or None")
    if self.vf_coef < 0 or self.ent_coef < 0:
      problems.append("vf_coef and ent_coef must be >= 0")
    if self.anneal_lr and self.num_updates is not None and self.num_updates < 1:
      problems.append("num_updates must be >= 1")
    if problems:
      raise BuildError("PPOConfig: " + "; ".join(problems))

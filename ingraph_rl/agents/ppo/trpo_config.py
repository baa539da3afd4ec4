"""TRPO settings: PPO's (the same policy, value function, rollout and
GAE) plus the natural-gradient step, its line search and the value
function's Adam epochs."""

import dataclasses

from ingraph_rl.agents.ppo.config import PPOConfig
from ingraph_rl.errors import BuildError
from ingraph_rl.utils.config_fields import field


@dataclasses.dataclass(frozen=True)
class TRPOConfig(PPOConfig):
  """PPOConfig's fields (the clipped-surrogate ones unused: clip_coef,
  clip_vloss, ent_coef, vf_coef, max_grad_norm, target_kl,
  update_epochs) and TRPO's. Defaults are OpenAI baselines' TRPO
  (max_kl 0.01, 10 CG iterations, damping 0.1) and Schulman's line
  search (10 halvings, accept at 0.1 of the expected improvement)."""

  max_kl: float = field(0.01, "KL bound of the natural-gradient step.")
  cg_iterations: int = field(10, "Conjugate-gradient iterations.")
  cg_damping: float = field(0.1, "Damping added to the Fisher matrix.")
  line_search_steps: int = field(10, "Most backtracking steps (halvings).")
  accept_ratio: float = field(
    0.1, "Accept a step whose improvement is >= this of the expected."
  )
  value_learning_rate: float = field(1e-3, "Value function's Adam rate.")
  value_epochs: int = field(5, "Value function's epochs per update.")

  def __post_init__(self):
    super().__post_init__()
    problems = []
    if self.shared_torso:
      problems.append(
        "shared_torso must be False (the policy's natural-gradient step "
        "and the value function's Adam steps move separate weights)"
      )
    if self.max_kl <= 0 or self.cg_damping < 0 or self.accept_ratio < 0:
      problems.append("max_kl must be > 0, cg_damping and accept_ratio >= 0")
    for name in ("cg_iterations", "line_search_steps", "value_epochs"):
      if getattr(self, name) < 1:
        problems.append(f"{name} must be >= 1")
    if self.value_learning_rate <= 0:
      problems.append("value_learning_rate must be > 0")
    if problems:
      raise BuildError("TRPOConfig: " + "; ".join(problems))

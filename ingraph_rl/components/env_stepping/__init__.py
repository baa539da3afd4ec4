"""In-graph environment stepping: `EnvironmentStepper`."""

from ingraph_rl.components.env_stepping.environment_stepper import (
  ROLLOUT_FIELDS,
  EnvironmentStepper,
  rollout_space,
)

__all__ = ["EnvironmentStepper", "ROLLOUT_FIELDS", "rollout_space"]

"""SAC: config, networks (squashed-Gaussian actor, twin Qs, temperature),
the agent with an in-graph training loop, and the builder that declares
its root and spaces once."""

from ingraph_rl.agents.sac.agent import SACAgent
from ingraph_rl.agents.sac.builder import SACBuilder
from ingraph_rl.agents.sac.config import SACConfig
from ingraph_rl.agents.sac.networks import (
  Actor,
  QFunction,
  Temperature,
  TwinQ,
)

__all__ = [
  "Actor",
  "QFunction",
  "SACAgent",
  "SACBuilder",
  "SACConfig",
  "Temperature",
  "TwinQ",
]

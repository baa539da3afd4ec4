"""SavedModel export, generic over agents: whole agents (`agent.py`:
`export_agent` for one root, `export_actor_learner` for an actor and a
learner, `load`) and a builder's policy alone (`policy.py`)."""

from ingraph_rl.export.agent import (
  FORMAT_VERSION,
  ExportResult,
  export_actor_learner,
  export_agent,
  load,
  read_metadata,
)
from ingraph_rl.export.policy import export_policy

__all__ = [
  "FORMAT_VERSION",
  "ExportResult",
  "export_actor_learner",
  "export_agent",
  "export_policy",
  "load",
  "read_metadata",
]

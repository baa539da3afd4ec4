"""SavedModel export: whole agents (`agent.py`: `export_agent`,
`export_impala_agent`, `load`) and the IMPALA policy alone (`policy.py`)."""

from ingraph_rl.export.agent import (FORMAT_VERSION, ExportResult,
                                     export_agent, export_impala_agent, load,
                                     read_metadata)
from ingraph_rl.export.policy import export_impala_policy

__all__ = ["FORMAT_VERSION", "ExportResult", "export_agent",
           "export_impala_agent", "export_impala_policy", "load",
           "read_metadata"]

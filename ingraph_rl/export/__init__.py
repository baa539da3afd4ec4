"""SavedModel export: `export_impala_policy` (see `policy.py`)."""

from ingraph_rl.export.policy import export_impala_policy

__all__ = ["export_impala_policy"]

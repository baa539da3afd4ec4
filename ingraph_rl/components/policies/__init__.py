"""Policies: network + action adapter + distribution."""

from ingraph_rl.components.policies.policy import Policy

__all__ = ["Policy"]

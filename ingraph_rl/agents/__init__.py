"""Agents: one folder per agent (config, agent component, training loop)."""

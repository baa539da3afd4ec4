"""Losses: DQN (double, n-step, Huber, importance weights)."""

from ingraph_rl.components.losses.dqn_loss import DQNLoss

__all__ = ["DQNLoss"]

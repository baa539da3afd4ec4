"""Exploration: epsilon-greedy action selection and step schedules."""

from ingraph_rl.components.explorations.epsilon_greedy import EpsilonGreedy
from ingraph_rl.components.explorations.schedules import (
  Constant,
  ExponentialDecay,
  LinearDecay,
  PolynomialDecay,
  Schedule,
)

__all__ = [
  "Constant",
  "EpsilonGreedy",
  "ExponentialDecay",
  "LinearDecay",
  "PolynomialDecay",
  "Schedule",
]

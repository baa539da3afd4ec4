"""Optimizers: one graph function from loss to applied update."""

from ingraph_rl.components.optimizers.adam import Adam
from ingraph_rl.components.optimizers.gradient_descent import GradientDescent
from ingraph_rl.components.optimizers.optimizer import Optimizer
from ingraph_rl.components.optimizers.rmsprop import RMSProp

__all__ = ["Adam", "GradientDescent", "Optimizer", "RMSProp"]

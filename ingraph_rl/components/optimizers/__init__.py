"""Optimizers: one graph function from loss to applied update.

Gradient rules (Adam, RMSProp, GradientDescent) take a loss tensor
(`step`) or the loss as a callable (`minimize`); the composable ones
(MultiStep, SubsamplingStep, ClippedStep, ...) wrap an inner optimizer in
the callable form (see `composable.py`).
"""

from ingraph_rl.components.optimizers.adam import Adam
from ingraph_rl.components.optimizers.clipped_step import ClippedStep
from ingraph_rl.components.optimizers.composable import ComposableOptimizer
from ingraph_rl.components.optimizers.evolutionary import Evolutionary
from ingraph_rl.components.optimizers.gradient_descent import GradientDescent
from ingraph_rl.components.optimizers.multi_step import MultiStep
from ingraph_rl.components.optimizers.natural_gradient import NaturalGradient
from ingraph_rl.components.optimizers.optimized_step import OptimizedStep
from ingraph_rl.components.optimizers.optimizer import Optimizer
from ingraph_rl.components.optimizers.rmsprop import RMSProp
from ingraph_rl.components.optimizers.subsampling_step import SubsamplingStep
from ingraph_rl.components.optimizers.synchronization import Synchronization

__all__ = [
  "Adam",
  "ClippedStep",
  "ComposableOptimizer",
  "Evolutionary",
  "GradientDescent",
  "MultiStep",
  "NaturalGradient",
  "OptimizedStep",
  "Optimizer",
  "RMSProp",
  "SubsamplingStep",
  "Synchronization",
]

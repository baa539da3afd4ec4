"""Losses: DQN (double, n-step, Huber, importance weights); V-trace
(`vtrace.from_importance_weights`, `vtrace.from_logits` and their torch
mirrors) and the IMPALA loss built on it; SAC's critic and actor losses."""

from ingraph_rl.components.losses import vtrace
from ingraph_rl.components.losses.dqn_loss import DQNLoss
from ingraph_rl.components.losses.impala_loss import IMPALALoss
from ingraph_rl.components.losses.sac_loss import SACLoss
from ingraph_rl.components.losses.vtrace import (
  VTraceFromLogitsReturns,
  VTraceReturns,
)

__all__ = [
  "DQNLoss",
  "IMPALALoss",
  "SACLoss",
  "vtrace",
  "VTraceReturns",
  "VTraceFromLogitsReturns",
]

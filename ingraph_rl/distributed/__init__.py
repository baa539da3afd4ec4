"""Distributed TF: cluster specs, ps/learner/actor roles, published weights
and ps placement. Launch a local cluster with experiments/launch_local.py.

TF's gRPC servers have no authentication: keep clusters on loopback (the
default) or a trusted network."""

from ingraph_rl.distributed.cluster import (
  ClusterError,
  Task,
  local_cluster,
  parse_cluster,
  task_from_flags,
)
from ingraph_rl.distributed.placement import PSExecutor
from ingraph_rl.distributed.weights import PublishedWeights

__all__ = [
  "ClusterError",
  "PSExecutor",
  "PublishedWeights",
  "Task",
  "local_cluster",
  "parse_cluster",
  "task_from_flags",
]

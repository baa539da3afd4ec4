"""Common wiring components: container split/merge, time-rank folding,
weight synchronization."""

from ingraph_rl.components.common.container_splitter import (
  ContainerMerger,
  ContainerSplitter,
)
from ingraph_rl.components.common.synchronizable import Synchronizable
from ingraph_rl.components.common.time_rank_folding import TimeRankFolder

__all__ = [
  "ContainerMerger",
  "ContainerSplitter",
  "Synchronizable",
  "TimeRankFolder",
]

"""Queues between threads and processes (IMPALA's actor -> learner buffer)
and a staging area that overlaps device copies with compute."""

from ingraph_rl.components.queues.fifo_queue import (
  FIFOQueue,
  PythonFIFOQueue,
  QueueCancelledError,
  QueueClosedError,
  QueueOutOfRangeError,
)
from ingraph_rl.components.queues.staging_area import (
  PythonStagingArea,
  StagingArea,
)

__all__ = [
  "FIFOQueue",
  "PythonFIFOQueue",
  "QueueCancelledError",
  "QueueClosedError",
  "QueueOutOfRangeError",
  "PythonStagingArea",
  "StagingArea",
]

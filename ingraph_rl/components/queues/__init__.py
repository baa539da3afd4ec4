"""Queues between threads and processes (IMPALA's actor -> learner buffer)
and a staging area that overlaps device copies with compute. TF only: they
hold no numbers to compare, so the torch mirror has none."""

from ingraph_rl.components.queues.fifo_queue import FIFOQueue
from ingraph_rl.components.queues.staging_area import StagingArea

__all__ = ["FIFOQueue", "StagingArea"]

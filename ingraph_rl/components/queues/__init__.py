"""Queues between threads and processes (IMPALA's actor -> learner buffer)
and a staging area that overlaps device copies with compute. TF only: they
hold no numbers to compare, so the torch mirror has none.

For components that drive TF queue ops themselves (batched inference's
request and reply queues): `queue_resource` makes a `QueueResource` whose
records are values of a space, `queue_spec` gives its dtypes and shapes."""

from ingraph_rl.components.queues.fifo_queue import (
  FIFOQueue,
  QueueResource,
  queue_resource,
  queue_spec,
)
from ingraph_rl.components.queues.staging_area import StagingArea

__all__ = [
  "FIFOQueue",
  "QueueResource",
  "StagingArea",
  "queue_resource",
  "queue_spec",
]

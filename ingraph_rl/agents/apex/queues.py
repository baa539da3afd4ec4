"""The queues that connect Ape-X's actors, replay shards and learner, and
the rows they carry. Every write to a shard's memory happens in the
shard's own graph: actors and the learner only enqueue.

  inserts(i)   on shard i: an actor's n-step transitions with their initial
               priorities (rows of `insert_row_space`).
  samples      on the learner: prioritized batches from every shard, one
               contiguous run of `train_batch_size` rows per batch
               (`sample_row_space`; the shard and its generation ride on
               every row). Its capacity is the learner's prefetch.
  updates(i)   on the learner: the learner's new priorities for shard i's
               sampled rows (`update_row_space`), applied by the shard in
               order (a later write to a slot wins).

Every queue is made here (`insert_queue`, `sample_queue`,
`update_queue`), so both ends of one agree. The samples and updates queues
move whole batches (`FIFOQueue`'s `block_rows` = train_batch_size): a TF
queue of rows splits and restacks every row, ~1 ms per batch of 512. They
are raw TF queues with shared names: the same code connects
threads in one process and processes of a cluster (where a queue lives on
the device of the task named above). A shard that restarts empty gets a
new generation, so the priorities the learner returns for its old rows are
dropped, not written onto new data (generation 0, which no shard has,
marks the rows the learner rejected).
"""

import dataclasses

import numpy as np

from ingraph_rl.components.queues import FIFOQueue
from ingraph_rl.spaces import Dict, FloatBox, IntBox, Space

# Shard generations are drawn from [1, GENERATION_HIGH).
GENERATION_HIGH = 1 << 62
# Rows of priority updates a shard's queue holds, in learner batches.
UPDATE_QUEUE_BATCHES = 64


@dataclasses.dataclass(frozen=True)
class ReplayQueues:
  """The shared names of one Ape-X run's queues."""

  prefix: str
  num_shards: int

  def __post_init__(self):
    if self.num_shards < 1:
      raise ValueError(f"num_shards must be >= 1, got {self.num_shards}")

  def inserts(self, shard: int) -> str:
    return f"{self.prefix}/shard_{shard}/inserts"

  def updates(self, shard: int) -> str:
    return f"{self.prefix}/shard_{shard}/priority_updates"

  @property
  def samples(self) -> str:
    return f"{self.prefix}/samples"


def insert_row_space(record_space: Space) -> Dict:
  return Dict(records=record_space, priority=FloatBox())


def sample_row_space(record_space: Space, num_shards: int) -> Dict:
  return Dict(
    records=record_space,
    index=IntBox(np.iinfo(np.int32).max),
    weight=FloatBox(),
    shard=IntBox(num_shards),
    generation=IntBox(GENERATION_HIGH, dtype=np.int64),
  )


def update_row_space() -> Dict:
  return Dict(
    index=IntBox(np.iinfo(np.int32).max),
    priority=FloatBox(),
    generation=IntBox(GENERATION_HIGH, dtype=np.int64),
  )


def insert_queue(record_space, config, names, shard, scope):
  """Shard `shard`'s insert queue (actors enqueue, the shard dequeues)."""
  return FIFOQueue(
    insert_row_space(record_space),
    config.insert_queue_capacity,
    shared_name=names.inserts(shard),
    scope=scope,
  )


def sample_queue(record_space, config, names, scope="samples"):
  """The learner's sample queue (shards enqueue, the learner dequeues);
  its capacity is the prefetch."""
  batch = config.train_batch_size
  return FIFOQueue(
    sample_row_space(record_space, names.num_shards),
    config.prefetch_batches * batch,
    shared_name=names.samples,
    scope=scope,
    block_rows=batch,
  )


def update_queue(config, names, shard, scope):
  """Shard `shard`'s priority-update queue on the learner (the learner
  enqueues, the shard dequeues)."""
  batch = config.train_batch_size
  return FIFOQueue(
    update_row_space(),
    UPDATE_QUEUE_BATCHES * batch,
    shared_name=names.updates(shard),
    scope=scope,
    block_rows=batch,
  )

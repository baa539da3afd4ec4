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

The samples and updates queues move whole batches (`FIFOQueue`'s
`block_rows` = train_batch_size): a TF queue of rows splits and restacks
every row, ~1 ms per batch of 512. The queues are raw TF queues with
shared names: the same code connects
threads in one process and processes of a cluster (where a queue lives on
the device of the task named above). A shard that restarts empty gets a
new generation, so the priorities the learner returns for its old rows are
dropped, not written onto new data.
"""

import dataclasses

import numpy as np

from ingraph_rl.spaces import Dict, FloatBox, IntBox, Space

# Shard generations are drawn from [1, GENERATION_HIGH).
GENERATION_HIGH = 1 << 62


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

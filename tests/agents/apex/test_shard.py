"""Replay shards: inserts with the actors' priorities, priority updates in
order (a shard's own generation only), sampling once `learning_starts`
transitions are in and the learner's queue has room, and the ring at
capacity."""

import numpy as np
import pytest

from ingraph_rl.agents.apex import queues
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing.component_test import to_numpy
from ingraph_rl.testing.queues import queue_executor

from .conftest import SMALL, small_builder

OBS = FloatBox((4,))
GENERATION = 1234


def records(n, start=0):
  """n distinguishable transitions: states[:, 0] counts from `start`."""
  states = np.zeros((n, 4), np.float32)
  states[:, 0] = np.arange(start, start + n)
  return {
    "states": states,
    "actions": np.arange(n, dtype=np.int64) % 2,
    "rewards": np.ones(n, np.float32),
    "next_states": states + 0.5,
    "terminals": np.zeros(n, bool),
    "discounts": np.full(n, 0.729, np.float32),
  }


class Setup:
  """A shard plus hand-held ends of its queues."""

  def __init__(self, names, **changes):
    self.builder = small_builder(**changes)
    self.config = self.builder.config
    self.names = names()
    record = self.builder.record_space(OBS)
    self.shard = self.builder.make_shard(OBS, self.names, 0, GENERATION).build()
    c, n = self.config, self.names
    self.inserts = queue_executor(
      queues.insert_queue(record, c, n, 0, "inserts")
    )
    self.updates = queue_executor(queues.update_queue(c, n, 0, "updates"))
    self.samples = queue_executor(
      queues.sample_queue(record, c, n), api_names=("dequeue_many", "size")
    )

  def insert(self, rows, priorities):
    self.inserts.execute(
      "enqueue_many",
      {"records": rows, "priority": np.asarray(priorities, np.float32)},
    )

  def leaves(self):
    """The sum tree's leaves: priority^alpha per ring position."""
    memory = self.shard.root.memory
    tree = to_numpy(self.shard.get_weights()["shard_0/memory/sum_tree"])
    return tree[memory.num_leaves : memory.num_leaves + memory.capacity]

  def serve(self):
    return to_numpy(self.shard.execute("serve"))


@pytest.mark.slow
def test_inserts_keep_the_actors_priorities(names):
  s = Setup(names)
  p = np.linspace(0.5, 3.0, 10)
  s.insert(records(10), p)
  out = s.serve()
  assert out["inserted"] == 10 and out["size"] == 10 and out["sampled"] == 0
  alpha = SMALL.prioritized_replay_alpha
  np.testing.assert_allclose(s.leaves()[:10], p**alpha, rtol=1e-5)
  assert not s.leaves()[10:].any()
  stats = to_numpy(s.shard.execute("stats"))
  assert stats["size"] == 10
  assert stats["mean_priority"] == pytest.approx(p.mean(), rel=1e-4)


@pytest.mark.slow
def test_samples_once_full_enough_and_only_with_room(names):
  """learning_starts = 16, batch 8, prefetch 2: nothing below 16; then a
  batch per serve until the queue holds 2 batches; the rows carry the
  shard, its generation, the ring index and the stored record."""
  s = Setup(names)
  s.insert(records(15), np.ones(15))
  assert s.serve()["sampled"] == 0
  s.insert(records(1, start=15), [1.0])
  assert [s.serve()["sampled"] for _ in range(3)] == [8, 8, 0]
  assert int(s.samples.execute("size")) == 16
  rows = to_numpy(s.samples.execute("dequeue_many", 8))
  assert (rows["shard"] == 0).all() and (rows["generation"] == GENERATION).all()
  np.testing.assert_array_equal(rows["records"]["states"][:, 0], rows["index"])
  assert s.serve()["sampled"] == 8


@pytest.mark.slow
def test_serve_batches_sample_together_each_batch_spanning_the_mass(names):
  """serve_batches = 2 (prefetch 4, batch 8): a serve samples 16 rows, and
  only while 16 fit. With 16 equal priorities each of the 16 strata holds
  one transition, so batch 0 gets strata 0, 2, ..., 14 and batch 1 strata
  1, 3, ..., 15: each spans the whole mass, as a batch sampled alone does
  (in stratum order, batch 0 would hold only the older half)."""
  s = Setup(names, prefetch_batches=4, serve_batches=2)
  s.insert(records(16), np.ones(16))
  assert [s.serve()["sampled"] for _ in range(3)] == [16, 16, 0]
  first = to_numpy(s.samples.execute("dequeue_many", 8))
  assert s.serve()["sampled"] == 0  # Room for one batch, not two.
  second = to_numpy(s.samples.execute("dequeue_many", 8))
  np.testing.assert_array_equal(first["index"], np.arange(0, 16, 2))
  np.testing.assert_array_equal(second["index"], np.arange(1, 16, 2))
  for rows in (first, second):
    np.testing.assert_array_equal(
      rows["records"]["states"][:, 0], rows["index"]
    )
    np.testing.assert_allclose(rows["weight"], 1.0)
  assert s.serve()["sampled"] == 16


@pytest.mark.slow
def test_priority_updates_apply_in_order_for_its_generation_only(names):
  """Rows of another generation (sampled before a restart) are dropped;
  of the shard's own, a later write to a slot wins, also across learner
  batches."""
  s = Setup(names)
  s.insert(records(20), np.ones(20))
  s.serve()
  batch = s.config.train_batch_size
  update = {
    "index": np.array([3, 5, 3, 7, 3, 9, 11, 13], np.int32),
    "priority": np.array([2, 4, 6, 8, 10, 12, 14, 16], np.float32),
    "generation": np.full(batch, GENERATION, np.int64),
  }
  stale = dict(update, priority=np.full(batch, 99.0, np.float32))
  stale["generation"] = np.full(batch, GENERATION + 1, np.int64)
  later = dict(update, index=np.full(batch, 9, np.int32))
  later["priority"] = np.arange(1, batch + 1, dtype=np.float32)
  for u in (update, stale, later):
    s.updates.execute("enqueue_many", u)
  out = s.serve()
  assert out["updated"] == 2 * batch and out["dropped_updates"] == batch
  alpha = SMALL.prioritized_replay_alpha
  want = np.ones(20)
  want[[3, 5, 7, 11, 13]] = [10, 4, 8, 14, 16]
  want[9] = batch  # The later batch's last row.
  np.testing.assert_allclose(s.leaves()[:20], want**alpha, rtol=1e-5)


@pytest.mark.slow
def test_the_ring_drops_the_oldest_at_capacity(names):
  s = Setup(names, learning_starts=64)
  s.insert(records(50), np.ones(50))
  s.serve()
  s.insert(records(30, start=50), np.full(30, 2.0))
  assert s.serve()["size"] == 64
  states = to_numpy(s.shard.get_weights()["shard_0/memory/buffer.states"])
  # Positions 0..15 now hold records 64..79; 16..49 the old 16..49.
  np.testing.assert_array_equal(states[:16, 0], np.arange(64, 80))
  np.testing.assert_array_equal(states[16:50, 0], np.arange(16, 50))
  alpha = SMALL.prioritized_replay_alpha
  np.testing.assert_allclose(s.leaves()[:16], 2.0**alpha, rtol=1e-5)

"""What the shard and the learner receive from other processes is checked
row by row before any write: bad rows are dropped alone (counted, with
their causes), the good rows of the same dequeue are applied, and a
non-finite update writes nothing (weights, optimizer step and slots,
priorities)."""

import numpy as np
import pytest
import tree

from ingraph_rl.agents.apex import queues
from ingraph_rl.agents.apex.q_learning import PRIORITY_EPSILON
from ingraph_rl.errors import SpaceError
from ingraph_rl.testing.component_test import to_numpy
from ingraph_rl.testing.queues import queue_executor

from .conftest import SMALL, numpy_td
from .test_learner import sample_rows
from .test_shard import GENERATION, OBS, Setup, records


class FaultySetup(Setup):
  """A shard whose queues a faulty peer feeds (no value checks)."""

  def __init__(self, names, **changes):
    super().__init__(names, **changes)
    c, n = self.config, self.names
    record = self.builder.record_space(OBS)
    self.inserts = queue_executor(
      queues.insert_queue(record, c, n, 0, "inserts"), check_values=False
    )
    self.updates = queue_executor(
      queues.update_queue(c, n, 0, "updates"),
      ("enqueue_many", "size"),
      check_values=False,
    )


ALPHA = SMALL.prioritized_replay_alpha


def causes(component, mask):
  mask = int(mask)
  return {c for i, c in enumerate(component.rejection_causes) if mask >> i & 1}


@pytest.mark.slow
def test_serve_drops_only_the_bad_inserts(names):
  """Priorities [1, NaN, 2] and an action 5 of 2: the two good rows are
  stored, the bad ones counted with their causes."""
  s = FaultySetup(names)
  rows = records(4)
  rows["actions"][3] = 5
  s.insert(rows, [1.0, np.nan, 2.0, 3.0])
  out = s.serve()
  assert out["inserted"] == 2 and out["size"] == 2
  assert out["rejected_rows"] == 2
  assert causes(s.shard.root, out["rejected_causes"]) == {
    "insert ['priority']: NaN or inf",
    "insert ['records']['actions']: integers out of [0, 2)",
  }
  np.testing.assert_allclose(s.leaves()[:2], np.array([1.0, 2.0]) ** ALPHA)
  states = to_numpy(s.shard.get_weights()["shard_0/memory/buffer.states"])
  np.testing.assert_array_equal(states[:2, 0], [0, 2])


@pytest.mark.slow
def test_serve_applies_good_updates_and_inserts_together(names):
  """Queued priority updates (some bad) plus inserts with a NaN priority in
  one serve: the good updates and the good inserts apply, nothing of the
  bad rows does (the max priority and both trees included)."""
  s = FaultySetup(names)
  s.insert(records(10), np.full(10, 1.5))
  s.serve()
  batch = s.config.train_batch_size
  s.updates.execute(
    "enqueue_many",
    {
      "index": np.array([1, 2, 3, 40, 4, 5, 6, 7], np.int32),
      "priority": np.array([2, np.nan, 0, 7, 1.8, -1, 1.9, 1.7], np.float32),
      "generation": np.full(batch, GENERATION, np.int64),
    },
  )
  s.insert(records(2, start=10), [np.nan, 1.6])
  out = s.serve()
  assert out["updated"] == 4 and out["inserted"] == 1
  assert out["rejected_rows"] == 5  # 4 updates, 1 insert.
  assert causes(s.shard.root, out["rejected_causes"]) == {
    "update ['priority']: NaN or inf",
    "update: priority <= 0",
    "update: index beyond the stored transitions",
    "insert ['priority']: NaN or inf",
  }
  want = np.full(11, 1.5)
  want[[1, 4, 6, 7]] = [2, 1.8, 1.9, 1.7]
  want[10] = 1.6
  np.testing.assert_allclose(s.leaves()[:11], want**ALPHA, rtol=1e-6)
  max_p = to_numpy(s.shard.get_weights()["shard_0/memory/max_priority"])
  assert float(max_p) == pytest.approx(2.0)  # Not 7 (the bad row).


def _learner_setup(names, **changes):
  s = FaultySetup(names, learning_starts=64, **changes)
  s.insert(records(20), np.ones(20))
  s.serve()
  learner = s.builder.make_learner(OBS, s.names).build()
  feeder = queue_executor(
    queues.sample_queue(s.builder.record_space(OBS), s.config, s.names),
    check_values=False,
  )
  return s, learner, feeder


def _state(s, learner):
  return (
    to_numpy(learner.get_weights()),
    s.leaves().copy(),
    int(s.updates.execute("size")),
  )


@pytest.mark.slow
def test_learner_trains_on_the_good_rows_only(names):
  """A NaN reward, an action 5, a negative importance weight: those rows
  are dropped; the loss is the NumPy loss of the other five, and only
  their priorities go back to the shard."""
  s, learner, feeder = _learner_setup(names)
  rows = sample_rows(s.config, [3, 5, 4, 7, 2, 9, 11, 13])
  rows["records"]["rewards"][1] = np.nan
  rows["records"]["actions"][4] = 5
  rows["weight"][6] = -0.5
  feeder.execute("enqueue_many", rows)
  weights = to_numpy(learner.execute("get_weights"))
  out = to_numpy(learner.execute("update"))
  good = np.array([0, 2, 3, 5, 7])
  good_records = {k: v[good] for k, v in rows["records"].items()}
  loss, td = numpy_td(good_records, rows["weight"][good], weights, s.config)
  assert float(out["loss"]) == pytest.approx(loss, rel=1e-4)
  assert int(out["frames"]) == 5 and int(out["rejected_rows"]) == 3
  assert causes(learner.root, out["rejected_causes"]) == {
    "['records']['rewards']: NaN or inf",
    "['records']['actions']: integers out of [0, 2)",
    "importance weight < 0",
  }
  served = s.serve()  # The rejected rows come back as generation 0.
  assert served["updated"] == 5 and served["dropped_updates"] == 3
  assert served["rejected_rows"] == 0
  want = np.ones(20)
  want[rows["index"][good]] = np.abs(td) + PRIORITY_EPSILON
  np.testing.assert_allclose(s.leaves()[:20], want**ALPHA, rtol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["shard", "all_nan"])
def test_learner_refuses_a_batch_with_no_good_row(fault, names):
  """Shard index 7 of 1 on every row (it used to fall through to the last
  shard's queue), or NaN states everywhere: SpaceError, nothing written."""
  s, learner, feeder = _learner_setup(names)
  rows = sample_rows(s.config, range(8))
  if fault == "shard":
    rows["shard"][:] = 7
  else:
    rows["records"]["states"][:] = np.nan
  feeder.execute("enqueue_many", rows)
  before = _state(s, learner)
  with pytest.raises(SpaceError, match="every row of the dequeued batch"):
    learner.execute("update")
  after = _state(s, learner)
  assert all(_same(a, b) for a, b in zip(before, after))


@pytest.mark.slow
def test_non_finite_update_writes_nothing(names):
  """Finite rows whose TD overflows (rewards 3e38 summed over n steps):
  SpaceError before the optimizer; weights, Adam slots and step, and the
  priorities sent to the shard are all unchanged."""
  s, learner, feeder = _learner_setup(names)
  rows = sample_rows(s.config, range(8))
  rows["records"]["rewards"][:] = 3e38
  feeder.execute("enqueue_many", rows)
  before = _state(s, learner)
  with pytest.raises(SpaceError, match="not finite"):
    learner.execute("update")
  after = _state(s, learner)
  assert all(_same(a, b) for a, b in zip(before, after))
  assert int(learner.execute("get_train_step")) == 0


def _same(a, b):
  if isinstance(a, dict):
    fa, fb = tree.flatten(a), tree.flatten(b)
    return len(fa) == len(fb) and all(
      np.array_equal(x, y, equal_nan=True) for x, y in zip(fa, fb)
    )
  return np.array_equal(a, b)

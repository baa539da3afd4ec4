"""The Ape-X learner: the loss and the priorities it writes back against
NumPy (the last duplicate of an index wins once the shard applies them),
target syncs, and TF <-> torch parity of the Q-learning core."""

import numpy as np
import pytest

from ingraph_rl.agents.apex import QLearning, queues
from ingraph_rl.agents.apex.q_learning import PRIORITY_EPSILON
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing import assert_parity
from ingraph_rl.testing.component_test import to_numpy
from ingraph_rl.testing.queues import queue_executor

from .conftest import SMALL, numpy_td, small_builder
from .test_shard import GENERATION, OBS, Setup, records


def sample_rows(config, index):
  """A hand-made sampled batch of shard 0 with these ring indices, each
  row a different record (so duplicates get different priorities)."""
  n = len(index)
  rng = np.random.default_rng(1)
  r = records(n)
  r["states"] = rng.normal(size=(n, 4)).astype(np.float32)
  r["next_states"] = rng.normal(size=(n, 4)).astype(np.float32)
  r["rewards"] = rng.normal(size=n).astype(np.float32) * 3
  r["terminals"] = np.arange(n) % 3 == 0
  return {
    "records": r,
    "index": np.asarray(index, np.int32),
    "weight": rng.uniform(0.2, 1.0, n).astype(np.float32),
    "shard": np.zeros(n, np.int32),
    "generation": np.full(n, GENERATION, np.int64),
  }


@pytest.mark.slow
def test_update_writes_numpy_priorities_back_and_the_last_duplicate_wins(
  names,
):
  s = Setup(names, learning_starts=64)
  s.insert(records(20), np.ones(20))
  s.serve()
  learner = s.builder.make_learner(OBS, s.names).build()
  feeder = queue_executor(
    queues.sample_queue(s.builder.record_space(OBS), s.config, s.names)
  )
  rows = sample_rows(s.config, [3, 5, 3, 7, 3, 9, 11, 13])
  feeder.execute("enqueue_many", rows)
  weights = to_numpy(learner.execute("get_weights"))
  out = to_numpy(learner.execute("update"))
  loss, td = numpy_td(rows["records"], rows["weight"], weights, s.config)
  assert float(out["loss"]) == pytest.approx(loss, rel=1e-4)
  assert int(out["frames"]) == 8 and int(out["train_step"]) == 1
  assert int(out["shard"]) == 0
  served = s.serve()
  assert served["updated"] == 8 and served["dropped_updates"] == 0
  p = np.abs(td) + PRIORITY_EPSILON
  want = np.ones(20)
  for i, index in enumerate(rows["index"]):
    want[index] = p[i]  # In order: the last duplicate wins.
  assert want[3] == p[4] != p[0]
  alpha = SMALL.prioritized_replay_alpha
  np.testing.assert_allclose(s.leaves()[:20], want**alpha, rtol=1e-4)
  # The optimizer stepped the online network only.
  after = to_numpy(learner.execute("get_weights"))
  key = "torso/dense_0/kernel"
  assert not np.allclose(after["online"][key], weights["online"][key])
  np.testing.assert_array_equal(after["target"][key], weights["target"][key])


@pytest.mark.slow
def test_target_syncs_every_target_update_period(names):
  s = Setup(names, target_update_period=2)
  s.insert(records(20), np.ones(20))
  assert [s.serve()["sampled"] for _ in range(2)] == [8, 8]
  learner = s.builder.make_learner(OBS, s.names).build()
  key = "torso/dense_0/kernel"
  learner.execute("update")
  w = to_numpy(learner.execute("get_weights"))
  assert not np.allclose(w["online"][key], w["target"][key])
  assert int(learner.execute("update")["train_step"]) == 2
  w = to_numpy(learner.execute("get_weights"))
  np.testing.assert_array_equal(w["online"][key], w["target"][key])


def test_q_learning_core_parity_tf_torch():
  """The loss, TD errors, priorities and Q-values of the same weights and
  batch."""
  builder = small_builder()
  spaces = {
    "records": builder.record_space(OBS).with_batch_rank(),
    "importance_weights": FloatBox(low=0.0, high=1.0, add_batch_rank=True),
    "states": OBS.with_batch_rank(),
  }
  rows = sample_rows(SMALL, range(16))
  tf_out, torch_out = assert_parity(
    QLearning(SMALL),
    spaces,
    [
      ("td", (rows["records"], rows["weight"])),
      ("q_values", (rows["records"]["states"],)),
    ],
    rtol=1e-4,
    api_names=("td", "q_values"),
  )
  assert tf_out[0]["priorities"].min() > 0

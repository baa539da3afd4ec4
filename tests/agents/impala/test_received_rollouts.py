"""What the IMPALA learner dequeues comes from other processes: a bad
rollout (an action out of range, a NaN) is dropped alone and the update
trains on the others, as NumPy recomputes; a batch with no good rollout is
refused with nothing written."""

import dataclasses

import numpy as np
import pytest
import tree

from ingraph_rl.agents.impala import IMPALABuilder, IMPALAConfig
from ingraph_rl.errors import SpaceError
from ingraph_rl.testing.component_test import to_numpy
from ingraph_rl.testing.queues import queue_feeder, random_rollouts

from .test_actor_learner import (
  HAND_CONFIG,
  OBS,
  assert_results,
  expected_results,
  numpy_weights,
  queue_name,
)

CONFIG = IMPALAConfig(
  use_staging=False, reward_clipping="abs_one", lstm_units=4, **HAND_CONFIG
)


def faulty_feeder(name):
  """Enqueues what it is given, unchecked: a faulty actor."""
  return queue_feeder(
    IMPALABuilder(CONFIG).record_space(OBS),
    CONFIG.queue_capacity,
    name,
    check_values=False,
  )


@pytest.mark.slow
def test_bad_rollouts_are_dropped_and_the_rest_trains():
  name = queue_name()
  learner = IMPALABuilder(CONFIG).make_learner(OBS, name).build()
  feed = faulty_feeder(name)
  batch = random_rollouts(CONFIG, 3)
  batch["actions"][1, 2] = 7  # Of 3 actions.
  try:
    weights = numpy_weights(learner)
    feed.execute("enqueue_many", batch)
    out = to_numpy(learner.execute("update"))
    good = tree.map_structure(lambda x: x[[0, 2]], batch)
    two = dataclasses.replace(CONFIG, batch_size=2)
    got = {k: float(v) for k, v in out.items()}
    assert_results(got, expected_results(two, weights, good), "good rows")
    assert int(out["rejected_rows"]) == 1
    causes = learner.root.rejection_causes
    assert [
      c for i, c in enumerate(causes) if int(out["rejected_causes"]) >> i & 1
    ] == ["['actions']: integers out of [0, 3)"]
  finally:
    learner.execute("close_queue")


@pytest.mark.slow
def test_a_batch_with_no_good_rollout_is_refused():
  name = queue_name()
  learner = IMPALABuilder(CONFIG).make_learner(OBS, name).build()
  feed = faulty_feeder(name)
  batch = random_rollouts(CONFIG, 4)
  batch["rewards"][:, 1] = np.nan
  try:
    before = learner.get_weights()
    feed.execute("enqueue_many", batch)
    with pytest.raises(SpaceError, match="every rollout of the dequeued"):
      learner.execute("update")
    after = learner.get_weights()
    assert all(np.array_equal(before[k], after[k]) for k in before)
    assert int(learner.execute("get_train_step")) == 0
  finally:
    learner.execute("close_queue")

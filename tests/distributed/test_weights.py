"""Published weights and shared counters: raw shared-name variables that
every client of a cluster finds by name (here: two objects of one
process, as two processes would)."""

import uuid

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.distributed.weights import (
  PublishedWeights,
  SharedCounters,
  flat_weights,
  nested_weights,
  weight_specs,
)
from ingraph_rl.spaces import Dict, FloatBox

DEVICE = "/device:CPU:0"
UNSET = (tf.errors.NotFoundError, tf.errors.FailedPreconditionError)


def unique():
  return f"test/{uuid.uuid4().hex}"


def test_nested_weights_publish_flat_and_come_back_nested():
  space = Dict(
    online=Dict({"q/w": FloatBox((2, 3)), "q/b": FloatBox((3,))}),
    target=Dict({"q/w": FloatBox((2, 3)), "q/b": FloatBox((3,))}),
  )
  specs = weight_specs(space)
  assert sorted(specs) == [
    "online/q/b",
    "online/q/w",
    "target/q/b",
    "target/q/w",
  ]
  assert specs["online/q/w"] == ((2, 3), tf.float32)
  rng = np.random.default_rng(0)
  weights = {
    net: {"q/w": rng.normal(size=(2, 3)), "q/b": rng.normal(size=3)}
    for net in ("online", "target")
  }
  weights = tf.nest.map_structure(lambda v: v.astype(np.float32), weights)
  prefix = unique()
  learner = PublishedWeights(specs, DEVICE, prefix=prefix)
  actor = PublishedWeights(specs, DEVICE, prefix=prefix)
  assert int(learner.publish(flat_weights(space, weights))) == 1
  got = actor.read()
  assert int(got["version"]) == 1
  back = nested_weights(space, got["weights"])
  tf.nest.map_structure(np.testing.assert_array_equal, back, weights)


def test_shared_counters_add_from_several_clients():
  prefix = unique()
  dtypes = {"steps": tf.int64, "returns": tf.float64}
  learner = SharedCounters(dtypes, DEVICE, prefix=prefix)
  actor = SharedCounters(dtypes, DEVICE, prefix=prefix)
  with pytest.raises(UNSET):
    actor.add({"steps": 1})  # The learner has not set them yet.
  learner.assign({"steps": 100, "returns": 0.0})
  added = tf.function(lambda n: actor.add({"steps": n, "returns": 0.5}))
  for n in (3, 4):
    totals = added(tf.constant(n))
  assert int(totals["steps"]) == 107 and float(totals["returns"]) == 1.0
  # Python numbers of any value reuse one trace (no retracing per value).
  for n in range(5):
    learner.assign({"steps": n})
  assert learner._assign_fn.experimental_get_tracing_count() == 2
  assert {k: float(v) for k, v in actor.read().items()} == {
    "steps": 4.0,
    "returns": 1.0,
  }

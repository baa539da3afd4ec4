"""Actors of one driver sample from different random streams."""

import numpy as np
import pytest

from ingraph_rl.agents.impala import IMPALABuilder, IMPALAConfig
from ingraph_rl.environments import make_vector_env
from ingraph_rl.runners.driver import ActorLearnerDriver


@pytest.mark.slow
def test_actors_sample_differently_from_the_same_inputs():
  driver = ActorLearnerDriver(
    IMPALABuilder(IMPALAConfig(num_actions=2, unroll_length=5, batch_size=2)),
    lambda i: make_vector_env("CartPole-v1", 2, seed=0),
    2,
  )
  try:
    weights = driver.learner_executor.execute("get_weights")
    obs = np.zeros((64, 1, 4), np.float32)
    state = driver.learner.network.zero_state(64)
    resets = np.ones((64, 1), bool)
    last = (np.zeros((64, 1), np.float32), np.zeros((64, 1), np.int64))
    actions = []
    for executor in driver.actor_executors:
      executor.execute("set_weights", weights)
      out = executor.execute("act", obs, state, resets, *last)
      actions.append(out["action"].numpy())
      # Same weights and inputs: the same logits.
      assert out["logits"].numpy().std() < 1.0
    logits = [
      e.execute("act", obs, state, resets, *last)["logits"].numpy()
      for e in driver.actor_executors
    ]
    np.testing.assert_array_equal(logits[0], logits[1])
    assert (actions[0] != actions[1]).any()
    names = driver.actor_executors[0].get_weights()
    assert "actor/environment_stepper/state_c" in names
  finally:
    assert driver.stop() == []

"""Small Ape-X setups shared by the tests of this folder."""

import dataclasses

import numpy as np
import pytest

from ingraph_rl.agents.apex import ApexBuilder, ApexConfig
from ingraph_rl.testing.queues import unique_queue_name
from ingraph_rl.testing.references import numpy_dqn_loss, numpy_q_values

SMALL = ApexConfig(
  num_actions=2,
  n_step=3,
  discount=0.9,
  train_batch_size=8,
  learning_starts=16,
  buffer_size=64,
  rollout_fragment_length=10,
)


def small_builder(**changes):
  return ApexBuilder(dataclasses.replace(SMALL, **changes))


@pytest.fixture
def names():
  """Queue names of their own (shared queues live as long as the
  process)."""

  def make(num_shards=1):
    return small_builder().queue_names(unique_queue_name("apex"), num_shards)

  return make


def numpy_td(records, importance_weights, weights, config):
  """(loss, td) of n-step transitions under {"online", "target"} weights:
  the paper's double-Q target, in NumPy."""
  online, target = weights["online"], weights["target"]
  return numpy_dqn_loss(
    numpy_q_values(records["states"], online),
    records["actions"],
    records["rewards"],
    records["terminals"].astype(np.float32),
    numpy_q_values(records["next_states"], target),
    numpy_q_values(records["next_states"], online),
    importance_weights,
    config.discount,
    config.n_step,
    config.double_q,
    config.huber_delta,
    records["discounts"],
  )

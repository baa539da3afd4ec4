"""Small Ape-X setups shared by the tests of this folder."""

import dataclasses

import pytest

from ingraph_rl.agents.apex import ApexBuilder, ApexConfig
from ingraph_rl.testing.queues import unique_queue_name

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

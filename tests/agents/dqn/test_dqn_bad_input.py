"""Regression tests of issue 12 on the DQN agent: a refused call changes
nothing (weights, optimizer step and slots, replay contents and counters,
priorities, the running maximum, exploration step, RNG states)."""

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.agents.dqn import DQNBuilder, DQNConfig
from ingraph_rl.errors import SpaceError
from ingraph_rl.executors.checks import space_error_from
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing.fuzz import changed, snapshot

OBS = FloatBox((3,))
BACKENDS = ["tf", "torch"]


def build(backend, prioritized=False):
  config = DQNConfig(
    num_actions=2,
    network=({"type": "dense", "units": 8, "activation": "relu"},),
    prioritized=prioritized,
    replay_capacity=16,
    batch_size=2,
    learning_starts=2,
  )
  return DQNBuilder(config).make_agent(OBS).build(backend)


def transitions(n, actions=None, rewards=None):
  states = np.ones((n, 3), np.float32)
  return [
    states,
    np.zeros(n, np.int64) if actions is None else actions,
    np.ones(n, np.float32) if rewards is None else rewards,
    states,
    np.zeros(n, bool),
  ]


def refused(ex, api, *args):
  """Calls `api`, which must raise a SpaceError and change no state."""
  before = snapshot(ex)
  with pytest.raises(SpaceError) as e:
    ex.execute(api, *args)
  assert changed(before, snapshot(ex)) == []
  return e.value


@pytest.mark.parametrize("backend", BACKENDS)
def test_observe_with_disagreeing_batch_sizes_writes_nothing(backend):
  ex = build(backend)
  ex.execute("observe", *transitions(2))
  args = transitions(2, rewards=np.ones(3, np.float32))  # 2 states, 3 rewards.
  e = refused(ex, "observe", *args)
  assert (e.component, e.api, e.argument) == ("dqn", "observe", "rewards")
  assert "batch size 3 differs from the batch size 2" in e.reason


@pytest.mark.slow
def test_observe_checks_in_the_graph_too():
  """The TF function itself (what a SavedModel exports) refuses it."""
  ex = build("tf")
  before = snapshot(ex)
  args = transitions(2, rewards=np.ones(3, np.float32))
  with pytest.raises(tf.errors.InvalidArgumentError) as e:
    ex.function("observe")(*args)
  error = space_error_from(e.value)
  assert (error.component, error.api, error.argument) == (
    "dqn",
    "observe",
    "rewards",
  )
  assert changed(before, snapshot(ex)) == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_actions_outside_their_intbox_are_not_stored(backend):
  ex = build(backend)
  for bad in ([0, 2], [-1, 0]):
    e = refused(ex, "observe", *transitions(2, np.array(bad, np.int64)))
    assert e.argument == "actions" and "out of range" in e.reason
  # Python ints beyond int64 are refused before anything converts them.
  e = refused(ex, "observe", *transitions(2, [0, 2**63]))
  assert "out of the int64 range" in e.reason


@pytest.mark.parametrize("backend", BACKENDS)
def test_update_of_an_empty_memory_counts_nothing(backend):
  ex = build(backend)
  e = refused(ex, "update")
  assert (e.component, e.api) == ("dqn/memory", "sample")
  assert int(ex.execute("get_train_step")) == 0
  ex.execute("observe", *transitions(2))
  ex.execute("update")
  assert int(ex.execute("get_train_step")) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_refused_priorities_leave_the_optimizer_alone(backend):
  """Non-finite TD errors make non-finite priorities: the update is
  refused before the optimizer writes anything."""
  ex = build(backend, prioritized=True)
  ex.execute("observe", *transitions(4))
  ex.execute("update")
  weights = ex.get_weights()
  huge = {
    k: np.full_like(v, 1e20) if k.startswith("dqn/online/") else v
    for k, v in weights.items()
  }
  ex.set_weights(huge)  # Q values overflow to inf: TD errors are NaN.
  e = refused(ex, "update")
  assert (e.component, e.api, e.argument) == (
    "dqn/memory",
    "update_priorities",
    "priorities",
  )
  assert int(ex.execute("get_train_step")) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_finite_states_leave_the_exploration_schedule(backend):
  ex = build(backend)
  states = np.ones((2, 3), np.float32)
  states[1, 2] = np.nan
  e = refused(ex, "get_actions", states, True)
  assert e.argument == "states" and "non-finite" in e.reason

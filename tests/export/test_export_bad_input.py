"""Loaded SavedModels refuse bad input the way the executor does: the
argument checks (IntBox ranges, finite floats, agreeing batch sizes) and
the components' own checks are in the exported graph, so a bad call raises
a clear error (naming component, API method and argument) and changes no
saved variable (weights, optimizer step and slots, replay contents,
priorities, RNG and schedule state)."""

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.agents.dqn import DQNBuilder, DQNConfig
from ingraph_rl.executors.checks import space_error_from
from ingraph_rl.export import export_agent, load
from ingraph_rl.spaces import FloatBox

OBS = FloatBox((4,))


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
  config = DQNConfig(
    num_actions=2,
    network=({"type": "dense", "units": 8, "activation": "relu"},),
    prioritized=True,
    replay_capacity=16,
    batch_size=2,
    learning_starts=2,
  )
  ex = DQNBuilder(config).make_agent(OBS).build()
  path = str(tmp_path_factory.mktemp("export") / "dqn")
  export_agent(ex, path)
  return load(path)


def state_of(loaded):
  """Every variable any signature reads or writes, by name."""
  out = {}
  for sig in loaded.signatures.values():
    for v in sig.variables:
      out[v.name + str(id(v))] = v.numpy().copy()
  return out


def assert_same_state(before, after):
  assert before.keys() == after.keys()
  for k in before:
    assert before[k].tobytes() == after[k].tobytes(), f"{k} changed"


def observe_inputs(n=3, **overrides):
  inputs = dict(
    states=tf.zeros([n, 4]),
    actions=tf.zeros([n], tf.int64),
    rewards=tf.ones([n]),
    next_states=tf.zeros([n, 4]),
    terminals=tf.zeros([n], tf.bool),
  )
  inputs.update(overrides)
  return inputs


BAD_OBSERVES = {
  "action out of range": (
    dict(actions=tf.constant([0, 2, 1], tf.int64)),
    "actions",
    "values out of range",
  ),
  "negative action": (
    dict(actions=tf.constant([0, -1, 1], tf.int64)),
    "actions",
    "values out of range",
  ),
  "batch sizes disagree": (
    dict(rewards=tf.ones([2])),
    "rewards",
    "batch size differs",
  ),
  "NaN reward": (
    dict(rewards=tf.constant([1.0, np.nan, 0.0])),
    "rewards",
    "non-finite",
  ),
  "inf state": (
    dict(states=tf.fill([3, 4], np.inf)),
    "states",
    "non-finite",
  ),
  # The signature's own shape checks (issue 40 item 4), before the API's.
  "state shape": (
    dict(states=tf.zeros([3, 5])),
    "states",
    "signature `observe`: input shape: expected [None, 4] (float32), "
    "received [3, 5]",
  ),
  "next state rank": (
    dict(next_states=tf.zeros([4])),
    "next_states",
    "input shape: expected [None, 4] (float32), received [4]",
  ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(BAD_OBSERVES))
def test_bad_observe_is_refused_and_changes_no_variable(agent, case):
  overrides, argument, reason = BAD_OBSERVES[case]
  before = state_of(agent)
  with pytest.raises(tf.errors.InvalidArgumentError) as e:
    agent.signatures["observe"](**observe_inputs(**overrides))
  message = str(e.value)
  assert "[ingraph_rl check] component `dqn`, API method `observe`" in message
  error = space_error_from(e.value)
  assert (error.component, error.api, error.argument) == (
    "dqn",
    "observe",
    argument,
  )
  assert reason in error.reason
  assert_same_state(before, state_of(agent))


def test_update_of_an_empty_memory_and_bad_action_inputs_change_nothing(agent):
  before = state_of(agent)
  if int(agent.signatures["observe"](**observe_inputs(n=0))["size"]) == 0:
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
      agent.signatures["update"]()
    error = space_error_from(e.value)
    assert (error.component, error.api) == ("dqn/memory", "sample")
    assert_same_state(before, state_of(agent))
  with pytest.raises(tf.errors.InvalidArgumentError):
    agent.signatures["action"](
      states=tf.constant([[0.0, np.nan, 0.0, 0.0]]), explore=tf.constant(True)
    )
  # TF's own signature check.
  with pytest.raises((TypeError, ValueError, tf.errors.InvalidArgumentError)):
    agent.signatures["observe"](
      **observe_inputs(actions=tf.zeros([3], tf.int32))
    )
  assert_same_state(before, state_of(agent))
  # A good call still works and changes the state.
  agent.signatures["observe"](**observe_inputs())
  after = state_of(agent)
  assert any(before[k].tobytes() != after[k].tobytes() for k in before)

"""What a builder declares is what its roots build: IMPALA's record space
is the stepper's rollout layout and what the actor enqueues, its weights
space is the learner's `get_weights()` and what actor and policy take,
the policy's act arguments are the actor's; DQN's record space is what
its replay memory stores and its weights space its `get_weights()`. The
runners import no agent."""

import re

import numpy as np
import pytest

from ingraph_rl.agents.dqn import DQNBuilder, DQNConfig
from ingraph_rl.agents.impala import IMPALABuilder, IMPALAConfig
from ingraph_rl.components.env_stepping import ROLLOUT_FIELDS
from ingraph_rl.environments import make_vector_env
from ingraph_rl.runners.builder import (
  ACTOR_APIS,
  LEARNER_APIS,
  POLICY_APIS,
  weights_space_of,
)
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing.component_test import to_numpy
from ingraph_rl.testing.fresh_process import ROOT
from ingraph_rl.testing.queues import queue_feeder, unique_queue_name

PACKAGE = ROOT / "ingraph_rl"


@pytest.mark.slow
@pytest.mark.parametrize("lstm_units", [None, 4], ids=["mlp", "lstm"])
def test_impala_builder_declares_what_its_roots_build(lstm_units):
  config = IMPALAConfig(
    num_actions=2, unroll_length=4, batch_size=2, lstm_units=lstm_units
  )
  builder = IMPALABuilder(config)
  env = make_vector_env("CartPole-v1", 2, seed=0)
  obs = env.observation_space
  name = unique_queue_name("test_builders")
  try:
    record = builder.record_space(obs)
    extra = {"initial_state"} if lstm_units else set()
    assert set(record) == set(ROLLOUT_FIELDS) | extra
    assert record["rewards"].shape == (config.unroll_length + 1,)

    learner_root = builder.make_learner(obs, name)
    assert set(LEARNER_APIS) <= set(learner_root.api_names)
    learner = learner_root.build()
    weights = learner.execute("get_weights")
    assert weights_space_of(weights) == builder.weights_space(obs)

    actor_root = builder.make_actor(env, name, index=1)
    assert list(actor_root.api_names) == list(ACTOR_APIS)
    assert actor_root.seed == builder.actor_config(1).seed != config.seed
    assert actor_root.input_spaces["weights"] == builder.weights_space(obs)
    actor = actor_root.build()
    actor.execute("set_weights", weights)
    actor.execute("reset_env", 0)
    actor.execute("unroll")
    # What the actor enqueued is the declared record, one per env.
    drain = queue_feeder(
      record, config.queue_capacity, name, api_names=["dequeue_many"]
    )
    batch = to_numpy(drain.execute("dequeue_many", 2))
    assert record.with_batch_rank().contains(batch)
    policy_root = builder.make_policy(obs)
    assert list(policy_root.api_names) == list(POLICY_APIS)
    act_args = (
      "observations",
      "state",
      "resets",
      "last_rewards",
      "last_actions",
    )
    for arg in act_args:
      assert policy_root.input_spaces[arg] == actor_root.input_spaces[arg]
    policy = policy_root.build()
    policy.execute("set_weights", weights)
  finally:
    learner.execute("close_queue")
    env.close()


@pytest.mark.slow
def test_dqn_builder_declares_what_its_agent_builds():
  for n_step in (1, 3):
    config = DQNConfig(
      num_actions=2, n_step=n_step, num_envs=2, batch_size=4, learning_starts=8
    )
    builder = DQNBuilder(config)
    ex = builder.make_agent(FloatBox((4,))).build()
    record = builder.record_space(FloatBox((4,)))
    stored = {
      m.group(1)
      for k in ex.get_weights()
      if (m := re.match(r"dqn/memory/buffer\.(\w+)$", k))
    }
    assert stored == set(record), n_step
    assert weights_space_of(ex.execute("get_weights")) == builder.weights_space(
      FloatBox((4,))
    )


def test_runners_export_and_distributed_import_no_agent():
  for package in ("runners", "distributed", "export", "components"):
    for path in (PACKAGE / package).rglob("*.py"):
      text = path.read_text()
      assert not re.search(
        r"^\s*(from|import) ingraph_rl\.agents", text, re.M
      ), path
      assert "experiments" not in re.findall(
        r"^\s*(?:from|import) (\w+)", text, re.M
      ), path


def test_weights_space_of_tensors_and_arrays():
  import tensorflow as tf

  space = weights_space_of(
    {"a": np.zeros((2, 3), np.float32), "b": tf.zeros([4])}
  )
  assert space["a"] == FloatBox((2, 3)) and space["b"] == FloatBox((4,))

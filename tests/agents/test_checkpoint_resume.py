"""A checkpoint of an agent's executor `module` holds everything its future
depends on: run A trains, saves, and trains on; run B builds afresh with a
DIFFERENT seed (other initial weights and RNG streams), restores, and does
what A did after the save. Outputs and every variable (weights, optimizer
slots and step, replay and priorities, epsilon step, step counter) and RNG
state must come out identical, bit for bit.

DQN through its APIs with given inputs, and through the in-graph loop with
the env re-seeded equally in A and B (env state is not checkpointed); the
IMPALA learner fed the same rollouts by hand."""

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.agents.dqn import DQNBuilder, DQNConfig
from ingraph_rl.agents.impala import IMPALABuilder, IMPALAConfig
from ingraph_rl.environments import make_vector_env
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing.component_test import to_numpy
from ingraph_rl.testing.queues import (
  queue_feeder,
  random_rollouts,
  unique_queue_name,
)
from ingraph_rl.utils.checkpoints import CheckpointSaver

OBS = FloatBox((4,))
NUM_ENVS = 4


def state_of(executor):
  """Every variable and RNG state of the executor, as numpy."""
  out = {p: v.numpy() for p, v in executor.module.variables_by_path.items()}
  for path, obj in executor.module.resources_by_path.items():
    if isinstance(obj, tf.random.Generator):
      out[path] = obj.state.numpy()
  return out


def assert_same(a, b):
  assert a.keys() == b.keys()
  for k in a:
    np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def save(executor, directory, number):
  return CheckpointSaver(
    tf.train.Checkpoint(agent=executor.module), directory
  ).save(checkpoint_number=number)


def restore(executor, directory):
  path = tf.train.latest_checkpoint(directory)
  # assert_consumed: every saved value went somewhere, and every object of
  # the fresh build got one.
  tf.train.Checkpoint(agent=executor.module).restore(path).assert_consumed()


# --- DQN through its APIs ----------------------------------------------------

DQN_KINDS = {
  "uniform": dict(),
  "prioritized": dict(prioritized=True),
  "n_step": dict(n_step=3, num_envs=NUM_ENVS),
}


def dqn_executor(kind, seed):
  # A replay of 48 rows wraps during the run (4 rows per step); epsilon
  # decays over the whole run.
  config = DQNConfig(
    num_actions=3,
    replay_capacity=48,
    batch_size=8,
    learning_starts=8,
    epsilon_steps=40,
    seed=seed,
    **DQN_KINDS[kind],
  )
  return DQNBuilder(config).make_agent(OBS).build()


def dqn_step(ex, i, kind):
  """Act (exploring), observe, update, sometimes sync: step i of a fixed
  script (the inputs depend on i only; the actions on the agent's RNG)."""
  rng = np.random.default_rng(i)
  states = rng.normal(size=(NUM_ENVS, 4)).astype(np.float32)
  out = to_numpy(ex.execute("get_actions", states, True))
  extra = (rng.uniform(size=NUM_ENVS) < 0.1,) if kind == "n_step" else ()
  ex.execute(
    "observe",
    states,
    out["actions"],
    rng.normal(size=NUM_ENVS).astype(np.float32),
    rng.normal(size=(NUM_ENVS, 4)).astype(np.float32),
    rng.uniform(size=NUM_ENVS) < 0.2,
    *extra,
  )
  if i >= 3:  # n-step: the memory fills from step 3 on.
    out.update(to_numpy(ex.execute("update")))
  if i % 5 == 4:
    ex.execute("sync_target")
  return out


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(DQN_KINDS))
def test_dqn_resumes_exactly(kind, tmp_path):
  k, m = 10, 10
  a = dqn_executor(kind, seed=0)
  for i in range(k):
    dqn_step(a, i, kind)
  saved = state_of(a)
  save(a, str(tmp_path), k)
  outputs_a = [dqn_step(a, i, kind) for i in range(k, k + m)]

  b = dqn_executor(kind, seed=1)
  fresh = state_of(b)
  # Another seed: other weights and RNG streams until the restore.
  assert not np.array_equal(
    fresh["dqn/online/torso/dense_0/kernel"],
    saved["dqn/online/torso/dense_0/kernel"],
  )
  assert not np.array_equal(
    fresh["dqn/epsilon_greedy/rng"], saved["dqn/epsilon_greedy/rng"]
  )
  restore(b, str(tmp_path))
  assert_same(state_of(b), saved)
  # What the checkpoint holds, by name.
  for key in (
    "dqn/adam/iterations",
    "dqn/epsilon_greedy/timestep",
    "dqn/memory/index",
    "dqn/memory/size",
    "dqn/memory/rng",
  ):
    assert key in saved
  assert int(saved["dqn/adam/iterations"]) == k - 3
  assert int(saved["dqn/epsilon_greedy/timestep"]) == k
  if kind == "prioritized":
    assert {
      "dqn/memory/sum_tree",
      "dqn/memory/min_tree",
      "dqn/memory/max_priority",
    } <= saved.keys()
  outputs_b = [dqn_step(b, i, kind) for i in range(k, k + m)]
  for out_a, out_b in zip(outputs_a, outputs_b):
    assert_same(out_a, out_b)
  assert_same(state_of(b), state_of(a))


# --- DQN's in-graph loop -----------------------------------------------------


def dqn_train_executor(seed):
  env = make_vector_env("CartPole-v1", 2, seed)
  config = DQNConfig(
    num_actions=2,
    replay_capacity=64,
    batch_size=8,
    learning_starts=16,
    epsilon_steps=100,
    target_sync_every=7,
    prioritized=True,
    seed=seed,
  )
  # Only reset_env and train get traced.
  return DQNBuilder(config).make_agent(env=env).build(trace_at_build=False), env


# ~7 s: make test-all (make test's margin); the DQN experiment test
# resumes from a checkpoint in make test.
@pytest.mark.slow
def test_dqn_train_loop_resumes_exactly(tmp_path):
  a, env_a = dqn_train_executor(seed=0)
  b, env_b = dqn_train_executor(seed=1)
  try:
    a.execute("reset_env", 0)
    a.execute("train", 30)
    saved = state_of(a)
    save(a, str(tmp_path), 60)
    # The env is not in the checkpoint: both runs re-seed it the same way.
    a.execute("reset_env", 5)
    stats_a = to_numpy(a.execute("train", 40))

    restore(b, str(tmp_path))
    assert_same(state_of(b), saved)
    assert int(saved["dqn/vector_steps"]) == 30
    b.execute("reset_env", 5)
    stats_b = to_numpy(b.execute("train", 40))
    assert_same(stats_a, stats_b)
    assert int(stats_b["env_steps"]) == 2 * 70  # The counter continued.
    assert_same(state_of(b), state_of(a))
  finally:
    env_a.close()
    env_b.close()


# --- The IMPALA learner ------------------------------------------------------


def impala_learner(config, seed):
  """(learner, feeder): a feeder's `enqueue_many` fills the learner's
  queue (the same shared_name)."""
  name = unique_queue_name("test_resume")
  config = IMPALAConfig(**{**config, "seed": seed})
  builder = IMPALABuilder(config)
  learner = builder.make_learner(OBS, name).build()
  feeder = queue_feeder(builder.record_space(OBS), config.queue_capacity, name)
  return learner, feeder


def rollouts(config, i):
  """Batch i of a fixed stream of random rollouts."""
  return random_rollouts(IMPALAConfig(**config), 100 + i)


def learn(learner, feeder, config, steps):
  outs = []
  for i in steps:
    feeder.execute("enqueue_many", rollouts(config, i))
    outs.append(to_numpy(learner.execute("update")))
  return outs


@pytest.mark.slow
@pytest.mark.parametrize("lstm_units", [None, 4], ids=["mlp", "lstm"])
def test_impala_learner_resumes_exactly(lstm_units, tmp_path):
  # Momentum: RMSProp keeps two slots; the learning rate decays over the
  # update count, so a lost count would show in the losses.
  config = dict(
    num_actions=3,
    unroll_length=5,
    batch_size=3,
    queue_capacity=6,
    use_staging=False,
    learning_rate=0.01,
    momentum=0.5,
    lr_decay_steps=20,
    lstm_units=lstm_units,
  )
  k, m = 4, 4
  a, feed_a = impala_learner(config, seed=0)
  b, feed_b = impala_learner(config, seed=1)
  try:
    learn(a, feed_a, config, range(k))
    saved = state_of(a)
    assert any("/ms." in p for p in saved) and any(
      "/mom." in p for p in saved
    ), sorted(saved)
    save(a, str(tmp_path), k)
    outs_a = learn(a, feed_a, config, range(k, k + m))
    restore(b, str(tmp_path))
    assert_same(state_of(b), saved)
    assert int(b.execute("get_train_step")) == k
    outs_b = learn(b, feed_b, config, range(k, k + m))
    for out_a, out_b in zip(outs_a, outs_b):
      assert_same(out_a, out_b)
    assert [int(o["train_step"]) for o in outs_b] == list(
      range(k + 1, k + m + 1)
    )
    assert_same(state_of(b), state_of(a))
  finally:
    a.execute("close_queue")
    b.execute("close_queue")

"""Multi-tower updates on 4 logical CPU devices: K towers on B / K samples
give the update of one tower on B (DQN with prioritized replay, in its
`update` API and its in-graph `train` loop; the IMPALA learner, from the
queue and from the staging area), and the towers' ops are placed on their
devices.

Logical devices must be configured before TF starts, so
`test_towers.py` runs this file in a fresh process (pytest names it
explicitly; it is not collected with the rest of the suite).
"""

import collections

from ingraph_rl.executors.strategies import configure_logical_cpus

DEVICES = configure_logical_cpus(4)  # Before anything starts TF.

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from ingraph_rl.agents.dqn import DQNBuilder, DQNConfig  # noqa: E402
from ingraph_rl.agents.impala import IMPALABuilder, IMPALAConfig  # noqa: E402
from ingraph_rl.environments import make_vector_env  # noqa: E402
from ingraph_rl.executors.strategies import (  # noqa: E402
  MultiTowerStrategy,
  local_tower_devices,
)
from ingraph_rl.spaces import FloatBox  # noqa: E402
from ingraph_rl.testing.queues import queue_feeder, unique_queue_name  # noqa: E402

OBS = FloatBox((4,))
TOL = dict(rtol=2e-5, atol=2e-6)


def assert_same_weights(got, want, **tol):
  assert sorted(got) == sorted(want)
  for k in want:
    if want[k].dtype.kind == "f":
      np.testing.assert_allclose(got[k], want[k], err_msg=k, **(tol or TOL))
    else:
      np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def assert_same_results(got, want, **tol):
  for k in want:
    np.testing.assert_allclose(
      np.asarray(got[k], np.float64),
      np.asarray(want[k], np.float64),
      err_msg=k,
      **(tol or TOL),
    )


def op_devices(graph, kind):
  """{device: count} of the ops of type `kind`, nested functions too."""
  out = collections.Counter()
  for op in graph.get_operations():
    if op.type == kind:
      out[op.device.replace("/job:localhost/replica:0/task:0", "")] += 1
  for fn in graph._functions.values():
    if hasattr(fn, "graph"):
      out.update(op_devices(fn.graph, kind))
  return out


def test_local_devices_are_the_logical_cpus():
  assert local_tower_devices(4) == [f"/device:CPU:{i}" for i in range(4)]


# --- DQN --------------------------------------------------------------------


def dqn(num_towers):
  """A DQN agent with prioritized replay that has observed 40 random
  transitions; None towers: the default strategy."""
  config = DQNConfig(
    num_actions=3,
    batch_size=16,
    learning_starts=16,
    replay_capacity=64,
    prioritized=True,
    seed=3,
  )
  kwargs = (
    {}
    if num_towers is None
    else {
      "strategy": MultiTowerStrategy(
        DEVICES[:num_towers], split_at="dqn/memory"
      )
    }
  )
  ex = DQNBuilder(config).make_agent(OBS).build(**kwargs)
  rng = np.random.default_rng(0)
  n = 40
  ex.execute(
    "observe",
    rng.normal(size=(n, 4)).astype(np.float32),
    rng.integers(0, 3, n),
    rng.normal(size=n).astype(np.float32),
    rng.normal(size=(n, 4)).astype(np.float32),
    rng.uniform(size=n) < 0.2,
  )
  return ex


@pytest.mark.parametrize("num_towers", [1, 2, 4])
def test_dqn_update_matches_one_tower(num_towers):
  plain, split = dqn(None), dqn(num_towers)
  for _ in range(3):
    want, got = plain.execute("update"), split.execute("update")
    assert_same_results(got, want)
  weights = split.get_weights()
  assert_same_weights(weights, plain.get_weights())
  # The priorities of all B samples were updated, once.
  tree_ = weights["dqn/memory/sum_tree"]
  assert not np.allclose(tree_, dqn(None).get_weights()["dqn/memory/sum_tree"])
  assert weights["dqn/adam/iterations"] == 3


def test_dqn_towers_run_on_their_devices():
  ex = dqn(4)
  graph = ex.function("update").get_concrete_function().graph
  forward = collections.Counter()
  backward = collections.Counter()
  for op in graph.get_operations():
    if op.type == "MatMul":
      (backward if "gradient_tape" in op.name else forward)[op.device] += 1
  # Per tower: online (2 torso + 2 head layers) on s and s', target on s'.
  assert forward == {d: 12 for d in DEVICES}
  # Backward through the online network on s: 2 matmuls per layer, but no
  # input gradient for the first.
  assert backward == {d: 7 for d in DEVICES}
  # The state changes (Adam's apply, the step count, priorities) happen
  # once: as many variable writes as without towers.
  plain = dqn(None).function("update").get_concrete_function().graph
  assert writes(graph) == writes(plain)
  assert writes(graph)["ResourceApplyAdam"] == 8  # 4 kernels, 4 biases.


def writes(graph):
  return collections.Counter(
    op.type
    for op in graph.get_operations()
    if op.type.startswith(("Assign", "ResourceApply", "ResourceScatter"))
  )


def dqn_with_env(num_towers):
  env = make_vector_env("CartPole-v1", 4, 0)
  config = DQNConfig(
    num_actions=2, batch_size=16, learning_starts=32, prioritized=True, seed=1
  )
  kwargs = (
    {}
    if num_towers is None
    else {
      "strategy": MultiTowerStrategy(
        DEVICES[:num_towers], split_at="dqn/memory"
      )
    }
  )
  ex = DQNBuilder(config).make_agent(env=env).build(**kwargs)
  ex.execute("reset_env", 0)
  return ex, env


def test_dqn_train_loop_inlines_the_tower_update():
  (plain, env_a), (split, env_b) = dqn_with_env(None), dqn_with_env(2)
  try:
    want, got = plain.execute("train", 40), split.execute("train", 40)
    assert int(got["updates"]) == int(want["updates"]) > 20
    for k in ("episodes", "return_sum", "env_steps"):
      assert int(got[k]) == int(want[k]), k
    np.testing.assert_allclose(got["loss_sum"], want["loss_sum"], rtol=1e-4)
    assert_same_weights(
      split.get_weights(), plain.get_weights(), rtol=1e-4, atol=2e-5
    )
    graph = split.function("train").get_concrete_function().graph
    matmuls = op_devices(graph, "MatMul")
    assert matmuls["/device:CPU:0"] and matmuls["/device:CPU:1"]
  finally:
    env_a.close()
    env_b.close()


# --- IMPALA -------------------------------------------------------------------


def rollouts(config, seed):
  """`batch_size` random rollouts (off-policy logits, rewards beyond
  [-1, 1], episode ends, LSTM initial states)."""
  rng = np.random.default_rng(seed)
  b, steps, a = config.batch_size, config.unroll_length + 1, config.num_actions
  dones = rng.uniform(size=(b, steps)) < 0.25
  batch = dict(
    observations=rng.normal(size=(b, steps, 4)).astype(np.float32),
    rewards=rng.normal(0, 2, (b, steps)).astype(np.float32),
    dones=dones,
    actions=rng.integers(0, a, (b, steps)).astype(np.int64),
    logits=rng.normal(0, 1.5, (b, steps, a)).astype(np.float32),
    truncated=dones & (rng.uniform(size=(b, steps)) < 0.5),
    bootstrap_value=rng.normal(size=(b, steps)).astype(np.float32),
  )
  if config.lstm_units:
    u = config.lstm_units
    batch["initial_state"] = {
      "c": rng.normal(size=(b, u)).astype(np.float32),
      "h": rng.normal(size=(b, u)).astype(np.float32),
    }
  return batch


def impala_strategy(num_towers, staging):
  # V-trace's loss sums over time and batch: the tower losses (and
  # gradients) add up; its "mean_*" statistics average.
  return MultiTowerStrategy(
    DEVICES[:num_towers],
    split_at="learner/staging_area" if staging else "learner/fifo_queue",
    loss_reduction="sum",
    output_reductions={"mean_*": "mean"},
  )


def impala(config, num_towers, batches):
  """A learner (None towers: default strategy) with `batches` in its own
  queue (fed by an executor with the same shared_name)."""
  name = unique_queue_name("test_towers")
  kwargs = (
    {}
    if num_towers is None
    else {"strategy": impala_strategy(num_towers, config.use_staging)}
  )
  builder = IMPALABuilder(config)
  learner = builder.make_learner(OBS, name).build(**kwargs)
  feed = queue_feeder(builder.record_space(OBS), config.queue_capacity, name)
  for batch in batches:
    feed.execute("enqueue_many", batch)
  if config.use_staging:
    learner.execute("prime")
  return learner


@pytest.mark.parametrize(
  "lstm_units,staging",
  [(None, False), (4, True)],
  ids=["mlp_queue", "lstm_staging"],
)
def test_impala_update_matches_one_tower(lstm_units, staging):
  config = IMPALAConfig(
    num_actions=3,
    unroll_length=5,
    batch_size=4,
    queue_capacity=16,
    lstm_units=lstm_units,
    use_staging=staging,
    entropy_cost=0.01,
    learning_rate=0.01,
  )
  batches = [rollouts(config, seed) for seed in range(4)]
  plain, split = impala(config, None, batches), impala(config, 2, batches)
  try:
    for step in range(1, 4):
      want, got = plain.execute("update"), split.execute("update")
      assert_same_results(got, want, rtol=1e-5, atol=1e-5)
      assert int(got["train_step"]) == step
      assert int(got["frames"]) == config.batch_size * config.unroll_length
    assert_same_weights(split.get_weights(), plain.get_weights())
    graph = split.function("update").get_concrete_function().graph
    matmuls = op_devices(graph, "MatMul")
    assert matmuls["/device:CPU:0"] and matmuls["/device:CPU:1"]
  finally:
    plain.execute("close_queue")
    split.execute("close_queue")

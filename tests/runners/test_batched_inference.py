"""Batched inference across actors (`IMPALAConfig.batched_inference`, SEED
RL's scheme) in the single-process driver: rollouts are what the per-actor
path records (a Python replay of their actions gives their observations,
rewards, dones and truncations; the policy with the same weights
recomputes their logits, LSTM state included, and their bootstrap values,
feed-forward with one env group, LSTM with two), two actors' calls make
ONE inference batch per step, the learner's published weights reach the
inference policy, and the driver stops cleanly: blocked actors, a blocked
server, a failing actor."""

import threading
import time
import uuid

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.agents.impala import IMPALABuilder, IMPALAConfig
from ingraph_rl.runners.driver import ActorLearnerDriver
from ingraph_rl.runners.environments import make_actor_env
from ingraph_rl.testing.component_test import to_numpy
from ingraph_rl.testing.queues import queue_feeder

ENV_ID = "CartPole-v1"
T = 6
NUM_ENVS = 3
LIMIT = 4  # A TimeLimit: truncations, so bootstrap-value requests.
CAPACITY = 36  # Six rounds of both actors' unrolls.
STOP_S = 5.0


def make_config(**kwargs):
  return IMPALAConfig(
    **dict(
      dict(
        num_actions=2,
        unroll_length=T,
        batch_size=4,
        queue_capacity=CAPACITY,
        batched_inference=True,
      ),
      **kwargs,
    )
  )


def make_driver(config, **kwargs):
  return ActorLearnerDriver(
    IMPALABuilder(config),
    lambda i: make_actor_env(
      ENV_ID,
      NUM_ENVS,
      seed=1000 * i,
      env_groups=config.env_groups,
      max_episode_steps=LIMIT,
    ),
    2,
    **kwargs,
  )


def wait_until(predicate, what, timeout=20.0):
  deadline = time.monotonic() + timeout
  while not predicate():
    assert time.monotonic() < deadline, f"timed out waiting until {what}"
    time.sleep(0.02)


def queue_size(driver):
  return int(driver.learner_executor.execute("queue_size"))


def impala_threads():
  return [t.name for t in threading.enumerate() if t.name.startswith("impala")]


def timed_stop(driver):
  """`driver.stop()` in a daemon thread, so a hang fails the test."""
  result = []
  start = time.monotonic()
  thread = threading.Thread(
    target=lambda: result.append(driver.stop(timeout_s=STOP_S)), daemon=True
  )
  thread.start()
  thread.join(STOP_S + 5.0)
  assert result, "stop() hung"
  return result[0], time.monotonic() - start


def chains(records):
  """{(actor, env): [record index, ...]}, each env's rollouts in order:
  rollout k + 1 starts where rollout k ended, and the first one at the
  env's reset observation (the driver resets actor i with seed 1000 i:
  env j with 1000 i + j)."""
  by_start = {
    obs[0].tobytes(): k for k, obs in enumerate(records["observations"])
  }
  out = {}
  for actor in range(2):
    for env in range(NUM_ENVS):
      first, _ = gym.make(ENV_ID).reset(seed=1000 * actor + env)
      k = by_start.get(first.astype(np.float32).tobytes())
      out[actor, env] = []
      while k is not None:
        out[actor, env].append(k)
        k = by_start.get(records["observations"][k][T].tobytes())
  return out


def replay(records, indices, seed):
  """Replays one env's rollouts' actions on a fresh gymnasium env (same-
  step autoreset by hand); checks what they recorded. Returns (record,
  step, final observation) of every truncation."""
  env = gym.make(ENV_ID, max_episode_steps=LIMIT)
  obs, _ = env.reset(seed=seed)
  truncations = []
  for k in indices:
    np.testing.assert_array_equal(records["observations"][k][0], obs)
    for t in range(1, T + 1):
      obs, reward, term, trunc, _ = env.step(int(records["actions"][k][t]))
      final = obs
      if term or trunc:
        obs, _ = env.reset()
      np.testing.assert_array_equal(records["observations"][k][t], obs)
      assert records["rewards"][k][t] == reward
      assert records["dones"][k][t] == (term or trunc)
      assert records["truncated"][k][t] == (trunc and not term)
      if trunc and not term:
        truncations.append((k, t, final))
  env.close()
  return truncations


@pytest.fixture(
  scope="module",
  params=[
    pytest.param((None, 1), id="mlp"),
    # ~7 s to build: make test-all.
    pytest.param((8, 2), id="lstm-2groups", marks=pytest.mark.slow),
  ],
)
def rollouts(request):
  """Both actors' rollouts until the queue is full (fixed weights: no
  update), and the policy with the learner's weights."""
  lstm_units, env_groups = request.param
  config = make_config(lstm_units=lstm_units, env_groups=env_groups)
  driver = make_driver(config)
  builder = driver.builder
  obs_space = driver.envs[0].observation_space
  drain = queue_feeder(
    builder.record_space(obs_space),
    CAPACITY,
    driver.queue_name,
    api_names=["dequeue_many"],
  )
  driver.start()
  wait_until(lambda: queue_size(driver) == CAPACITY, "the queue is full")
  # The first CAPACITY rollouts, before `stop` drops what is queued.
  records = to_numpy(drain.execute("dequeue_many", CAPACITY))
  alive, _ = timed_stop(driver)
  assert alive == [] and driver.actor_errors == []
  policy = builder.make_policy(obs_space).build()
  policy.execute("set_weights", driver.learner_executor.execute("get_weights"))
  if "initial_state" not in records:
    records["initial_state"] = builder.state_space(obs_space).zeros(CAPACITY)
  return records, policy


def act(policy, records, ks, steps, final=None):
  """The policy over the first `steps` steps of records `ks` from their
  initial state, resets = dones (what the learner computes); `final`:
  then one more step on those observations, without a reset."""
  pick = lambda x: x[ks][:, :steps]
  out = to_numpy(
    policy.execute(
      "act",
      pick(records["observations"]),
      {k: v[ks] for k, v in records["initial_state"].items()},
      pick(records["dones"]),
      pick(records["rewards"]),
      pick(records["actions"]),
    )
  )
  if final is None:
    return out
  n = len(ks)
  return to_numpy(
    policy.execute(
      "act",
      final[:, None],
      out["state"],
      np.zeros((n, 1), bool),
      records["rewards"][ks, steps][:, None],
      records["actions"][ks, steps][:, None],
    )
  )


@pytest.mark.slow
def test_rollouts_replay_and_recompute(rollouts):
  records, policy = rollouts
  found = chains(records)
  # Every record belongs to one env's chain: nothing lost or mixed up.
  assert sorted(k for ks in found.values() for k in ks) == list(range(CAPACITY))
  assert all(len(ks) >= 3 for ks in found.values()), found
  truncations = []
  for (actor, env), ks in found.items():
    truncations += replay(records, ks, 1000 * actor + env)
  # The logits the actors recorded are the policy's on what they saw.
  ks = np.arange(CAPACITY)
  logits = act(policy, records, ks, T + 1)["logits"]
  np.testing.assert_allclose(
    logits[:, :T], records["logits"][:, 1:], rtol=1e-5, atol=1e-6
  )
  if "c" in records["initial_state"] and records["initial_state"]["c"].size:
    # The carried LSTM state: not zero after the first rollouts.
    assert np.abs(records["initial_state"]["h"]).max() > 1e-3
  # Bootstrap values: V(final observation) from the state before it.
  assert len(truncations) >= 6
  for k, t, final in truncations[:8]:
    values = act(policy, records, [k], t, final[None])["values"][:, 0]
    np.testing.assert_allclose(
      records["bootstrap_value"][k][t], values[0], rtol=1e-5, atol=1e-6
    )
  truncated = records["truncated"][:, 1:]
  np.testing.assert_array_equal(
    records["bootstrap_value"][:, 1:][~truncated], 0
  )


@pytest.mark.slow
def test_two_actors_make_one_inference_batch_per_step():
  """Actors and server from the builder, stepped in rounds: each round
  of T steps of both actors (no truncation requests) is T batches."""
  config = make_config(bootstrap_on_truncation=False)
  builder = IMPALABuilder(config)
  envs = [
    make_actor_env(ENV_ID, NUM_ENVS, seed=1000 * i, max_episode_steps=LIMIT)
    for i in range(2)
  ]
  obs_space = envs[0].observation_space
  name = f"test_rollouts_{uuid.uuid4().hex}"
  drain = queue_feeder(
    builder.record_space(obs_space), CAPACITY, name, ["dequeue_many"]
  )
  channel = builder.inference_channel(envs, f"test_inference_{name}")
  server = builder.make_inference_server(obs_space, channel).build()
  actors = [
    builder.make_actor(env, name, index=i, inference=channel).build()
    for i, env in enumerate(envs)
  ]
  for i, actor in enumerate(actors):
    actor.execute("reset_env", 1000 * i)

  def serve():
    try:
      while True:
        server.execute("serve")
    except (tf.errors.CancelledError, tf.errors.OutOfRangeError):
      pass

  serving = threading.Thread(target=serve, daemon=True)
  serving.start()
  batches = lambda: int(server.variables()["inference_server/batches"])
  try:
    for k in range(1, 4):
      unrolls = [
        threading.Thread(target=actor.execute, args=("unroll",), daemon=True)
        for actor in actors
      ]
      for u in unrolls:
        u.start()
      for u in unrolls:
        u.join(20.0)
      assert not any(u.is_alive() for u in unrolls)
      # 2 T requests, T batches (the count may lag the last reply).
      want = T * k
      wait_until(lambda want=want: batches() >= want, f"{want} batches", 5)
      assert batches() == want
      assert len(drain.execute("dequeue_many", 2 * NUM_ENVS)["actions"]) == 6
  finally:
    server.execute("close")
    serving.join(STOP_S)
    for env in envs:
      env.close()
  assert not serving.is_alive()


@pytest.mark.slow
def test_published_weights_reach_the_inference_policy():
  driver = make_driver(make_config())
  server = driver.inference_executor
  drain = queue_feeder(
    driver.builder.record_space(driver.envs[0].observation_space),
    CAPACITY,
    driver.queue_name,
    api_names=["dequeue_many"],
  )

  def make_room():  # The server loads weights between batches it serves.
    if queue_size(driver) >= CAPACITY - 2 * NUM_ENVS:
      drain.execute("dequeue_many", 2 * NUM_ENVS)

  def same_weights():
    learner = driver.learner_executor.execute("get_weights")
    prefix = "inference_server/policy/impala_network/"
    served = {
      k[len(prefix) :]: v
      for k, v in server.variables().items()
      if k.startswith(prefix)
    }
    assert set(served) == set(learner), (sorted(served), sorted(learner))
    make_room()
    return all(np.array_equal(served[k], learner[k]) for k in learner)

  initial = to_numpy(driver.learner_executor.execute("get_weights"))
  driver.start()  # The server loads the published weights first.
  try:
    wait_until(same_weights, "the server loaded the initial weights")
    for _ in range(3):
      driver.update()
    wait_until(same_weights, "the server loaded the new weights")
    learner = driver.learner_executor.execute("get_weights")
    assert any(not np.array_equal(initial[k], learner[k]) for k in initial)
  finally:
    alive, _ = timed_stop(driver)
  assert alive == []
  assert int(driver.learner_executor.execute("get_train_step")) == 3


@pytest.mark.slow
def test_stop_ends_actors_and_server_blocked():
  # The queue fills: actors block on their enqueue, the server on its
  # next batch.
  driver = make_driver(make_config(queue_capacity=2 * NUM_ENVS))
  driver.start()
  wait_until(lambda: queue_size(driver) == 2 * NUM_ENVS, "the queue is full")
  time.sleep(0.3)
  assert len(impala_threads()) == 3  # 2 actors and the server.
  alive, took = timed_stop(driver)
  assert alive == [] and took < STOP_S
  assert driver.actor_errors == []
  assert impala_threads() == []
  assert driver.stop() == []  # A second stop is harmless.


@pytest.mark.slow  # make test-all (the make test budget).
def test_a_failing_actor_stops_run():
  driver = make_driver(make_config())
  env = driver.envs[1]
  calls = []
  step = env.step

  def failing(actions):
    calls.append(1)
    if len(calls) > 3 * T:
      raise RuntimeError("the env broke")
    return step(actions)

  env.step = failing  # The actor's numpy_function looks it up per call.
  start = time.monotonic()
  with pytest.raises(RuntimeError, match="actor 1 failed"):
    driver.run(10**9)
  assert time.monotonic() - start < 20.0
  alive = driver.stop(timeout_s=STOP_S)
  assert alive == [] and impala_threads() == []

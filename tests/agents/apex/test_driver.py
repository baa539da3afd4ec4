"""Ape-X in one process (`ReplayDriver`): actors, replay shards and the
learner as threads on shared-name queues; learning CartPole."""

import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from experiments import configs
from ingraph_rl.environments import make_vector_env
from ingraph_rl.runners import replay_driver
from ingraph_rl.runners.evaluation import mean_greedy_return
from ingraph_rl.runners.replay_driver import ReplayDriver

from .conftest import small_builder


def greedy_return(builder, driver, policy, episodes=20, seed=123):
  policy.execute("set_weights", driver.learner_executor.execute("get_weights"))
  return mean_greedy_return(
    lambda obs: policy.execute("get_actions", obs, False)["actions"].numpy(),
    "CartPole-v1",
    episodes,
    seed,
  )


def learn_cartpole(
  seed, num_shards=2, max_seconds=120.0, eval_every=250, **changes
):
  """Trains Ape-X on CartPole with the embedded preset
  (experiments/configs.py APEX_CARTPOLE: 2 actors x 4 envs, `num_shards`
  shards; `changes` to its config), with a greedy evaluation over 20
  episodes every `eval_every` updates; stops at a mean >= 195. Returns
  (best greedy mean, driver)."""
  builder = small_builder(
    n_step=3, discount=0.99, seed=seed, **configs.APEX_CARTPOLE, **changes
  )
  driver = ReplayDriver(
    builder,
    lambda i: make_vector_env("CartPole-v1", num_envs=4, seed=seed + 10 * i),
    num_actors=2,
    num_shards=num_shards,
    seed=seed,
  )
  policy = builder.make_policy(driver.envs[0].observation_space).build()
  best = [-np.inf]

  def on_update(out, env_steps):
    if int(out["train_step"]) % eval_every == 0:
      best[0] = max(best[0], greedy_return(builder, driver, policy))
      if best[0] >= 195:
        driver.request_stop()

  driver.run(10**9, on_update=on_update, max_seconds=max_seconds)
  return best[0], driver


def test_learns_cartpole_with_two_shards():
  """Greedy mean >= 195 over 20 episodes within 120 s; both shards were
  fed (round-robin) and served the learner; every thread exits.

  Settings: the embedded preset's (experiments/configs.py APEX_CARTPOLE:
  2 actors x 4 envs, epsilons 0.4 and 0.4^3, batch 128, Adam 1e-3,
  training intensity 8, rollouts of 50, 4 batches per serve call).
  Flakiness, measured with `learn_cartpole(seed)` alone on this 2-core
  machine: 5 of 5 seeds passed (best greedy 265.2, 210.2, 196.2, 245.9,
  363.5 after 11, 23, 14, 83, 78 s). With rollouts of 25 and one batch
  per serve: 5 of 5 (after 9, 11, 78, 8, 72 s). Since the learner is held
  to the intensity too (2026-11-27, rollouts of 50, Intel host): seeds
  1, 2 and 4 reached 219.9, 196.8 and 252.6 after 25, 12 and 24 s; seed
  3 only 178.4 in 120 s (with rollouts of 25 it passed after 44 s). With
  a DQN Pong run beside it, seed 2 plateaued near 135 within 120 s, and
  with the paper's epsilon_alpha 7 seeds 3 and 4 near 150. Since the
  evaluation plays its 20 episodes side by side (2026-11-27, alone):
  seeds 0-3 reached 268.9, 269.4, 371.2 and 304.0 after 17, 18, 13 and
  74 s. Seed 0 is fixed here.
  """
  start = time.monotonic()
  best, driver = learn_cartpole(seed=0)
  assert best >= 195, best
  assert all(n > 0 for n in driver.inserted), driver.inserted
  assert all(s["size"] > 0 for s in driver.shard_stats)
  assert driver.stop() == []
  assert time.monotonic() - start < 150


@pytest.mark.slow  # ~30-80 s: make test-all.
def test_learns_cartpole_with_bfloat16_actor_weights():
  """The same with the actors' weight copies in bfloat16: their actions
  and initial priorities come from rounded weights and products, the
  learner trains in float32 (the greedy policy evaluated is float32)."""
  best, driver = learn_cartpole(seed=0, actor_weights_dtype="bfloat16")
  assert best >= 195, best
  assert driver.stop() == []


@pytest.mark.slow  # ~10 s: make test-all (make test's margin).
def test_training_intensity_holds_actors_back():
  """With no learner updates, actors stop once their env steps pass
  learning_starts per shard (at most one rollout more each); after
  updates they may take batch / intensity more steps per update."""
  builder = small_builder(training_intensity=2.0, learning_starts=16)
  driver = ReplayDriver(
    builder,
    lambda i: make_vector_env("CartPole-v1", num_envs=2, seed=i),
    num_actors=1,
    num_shards=2,
  )
  try:
    driver.start()
    rollout = 2 * builder.config.rollout_fragment_length
    warmup = 16 * 2
    # Waits, not sleeps: a loaded machine may take seconds for the first
    # rollout (it once had none after a 3 s sleep).
    held = settled(lambda: driver.totals.env_steps, above=warmup)
    assert warmup < held <= warmup + rollout
    for _ in range(4):
      driver.update()  # Batches of 8: 16 more steps each.
    env_steps = settled(lambda: driver.totals.env_steps, above=held)
    assert env_steps <= warmup + 4 * 8 / 2.0 + rollout
  finally:
    assert driver.stop() == []


class GatedEnv:
  """A vector env whose `step` waits while its gate is closed (an actor
  that stops producing, as a starved or stalled one does)."""

  def __init__(self, env):
    self.env = env
    self.gate = threading.Event()
    self.gate.set()

  def step(self, actions):
    self.gate.wait()
    return self.env.step(actions)

  def __getattr__(self, name):
    return getattr(self.env, name)


def settled(read, above=-1, quiet_s=0.5, timeout_s=30.0):
  """`read()` once it is above `above` and stopped changing for
  `quiet_s`."""
  deadline = time.monotonic() + timeout_s
  last, since = read(), time.monotonic()
  while time.monotonic() < deadline:
    time.sleep(0.05)
    now = read()
    if now != last or now <= above:
      last, since = now, time.monotonic()
    elif time.monotonic() - since >= quiet_s:
      return now
  raise AssertionError(f"still changing after {timeout_s} s: {last}")


@pytest.mark.slow
def test_training_intensity_holds_the_learner_back():
  """With the actors' envs stalled, the learner trains what their env
  steps allow (intensity 2 per step past learning_starts per shard) plus
  its lead of LEARNER_LEAD_BATCHES batches, then waits; it goes on when
  the actors do. (Before, a learner faster than its actors replayed each
  transition ever more often and took their cores.)"""
  builder = small_builder(training_intensity=2.0, learning_starts=16)
  envs = []

  def factory(i):
    envs.append(GatedEnv(make_vector_env("CartPole-v1", num_envs=2, seed=i)))
    return envs[-1]

  driver = ReplayDriver(builder, factory, num_actors=1, num_shards=2)

  def learn():
    try:
      while True:
        driver.update()
    except (tf.errors.CancelledError, tf.errors.OutOfRangeError):
      pass  # stop() closed the queues.

  try:
    driver.start()
    warmup = 16 * 2
    held = settled(lambda: driver.totals.env_steps, above=warmup)
    envs[0].gate.clear()
    thread = threading.Thread(target=learn, daemon=True)
    thread.start()
    # Above 0: the first update (graph optimizations) may take seconds.
    trained = settled(lambda: driver.samples_trained, above=0, quiet_s=1.0)
    env_steps = driver.totals.env_steps
    assert env_steps <= held + 2 * builder.config.rollout_fragment_length
    allowed = 2.0 * (env_steps - warmup) + 8 * (
      replay_driver.LEARNER_LEAD_BATCHES
    )
    assert allowed <= trained < allowed + 8, (trained, allowed, env_steps)
    assert thread.is_alive()
    envs[0].gate.set()
    settled_again = time.monotonic() + 20
    while driver.samples_trained <= trained + 8:
      assert time.monotonic() < settled_again, "the learner did not go on"
      time.sleep(0.05)
  finally:
    for env in envs:
      env.gate.set()
    assert driver.stop() == []


@pytest.mark.slow
def test_stop_takes_every_finished_rollout_into_the_replay():
  """`stop()` lets the actors finish their rollouts and the shards insert
  them before it closes the queues: every transition an actor made is in
  a shard, and no enqueue was cancelled (each cancelled one also logged a
  TF warning at every shutdown)."""
  # No batch is ever sampled: only actors and inserts.
  builder = small_builder(learning_starts=10**5, buffer_size=10**5)
  driver = ReplayDriver(
    builder,
    lambda i: make_vector_env("CartPole-v1", num_envs=2, seed=i),
    num_actors=2,
    num_shards=2,
  )
  made, cancelled = [0, 0], []

  def counting(index, execute):
    def run(api, *args):
      try:
        out = execute(api, *args)
      except (tf.errors.CancelledError, tf.errors.OutOfRangeError) as e:
        cancelled.append(e)
        raise
      if api == "rollout":
        made[index] += int(out["transitions"])
      return out

    return run

  for i, executor in enumerate(driver.actor_executors):
    executor.execute = counting(i, executor.execute)
  driver.start()
  settled_by = time.monotonic() + 30
  while driver.totals.env_steps < 400:
    assert time.monotonic() < settled_by, driver.totals.env_steps
    time.sleep(0.05)
  assert driver.stop() == []
  assert cancelled == []
  assert sum(made) > 0
  assert sum(driver.inserted) == sum(made), (driver.inserted, made)

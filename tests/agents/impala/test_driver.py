"""`ActorLearnerDriver` with `IMPALABuilder` (actor threads + a learner
thread in one process): every
shutdown path ends all threads within seconds (actors blocked on a full
queue, a learner blocked on an empty one, `run` stopped from outside or at
its frame budget), and IMPALA learns CartPole-v1 (greedy evaluation)."""

import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.agents.impala import IMPALABuilder, IMPALAConfig
from ingraph_rl.environments import make_vector_env
from ingraph_rl.runners.driver import ActorLearnerDriver, EpisodeTotals
from ingraph_rl.runners.evaluation import evaluate

STOP_S = 10.0  # What any shutdown may take.


def small_driver(num_envs=4, num_actors=2, **config):
  config = IMPALAConfig(
    **dict(
      dict(num_actions=2, unroll_length=5, batch_size=4, queue_capacity=8),
      **config,
    )
  )
  return ActorLearnerDriver(
    IMPALABuilder(config),
    lambda i: make_vector_env("CartPole-v1", num_envs, seed=i),
    num_actors,
  )


def impala_threads():
  return [
    t.name
    for t in threading.enumerate()
    if t.name.startswith("impala-") and t.is_alive()
  ]


def wait_until(predicate, what, timeout=20.0):
  deadline = time.monotonic() + timeout
  while not predicate():
    assert time.monotonic() < deadline, f"timed out waiting until {what}"
    time.sleep(0.02)


def timed_stop(driver, background):
  """`driver.stop()` in a thread, so a stop that hangs (inside a TF op,
  where no Python timeout reaches) fails the test instead of hanging it.
  Returns (names of threads left alive, seconds taken)."""
  start = time.monotonic()
  alive = background(lambda: driver.stop(timeout_s=STOP_S)).finish(
    timeout=STOP_S + 5.0
  )
  return alive, time.monotonic() - start


@pytest.mark.slow
def test_stop_ends_actors_blocked_on_a_full_queue(background):
  # One actor unroll (4 envs) fills the queue: then both actors block in
  # their enqueue, and the learner never takes anything.
  driver = small_driver(queue_capacity=4)
  queue_size = lambda: int(driver.learner_executor.execute("queue_size"))
  driver.start()
  wait_until(lambda: queue_size() == 4, "the queue is full")
  time.sleep(0.5)  # Both actors reach their enqueue.
  assert driver.totals.unrolls == 1  # Only the first unroll got in.
  assert all(t.is_alive() for t in driver._threads)
  alive, took = timed_stop(driver, background)
  assert alive == [] and took < STOP_S
  assert driver.actor_errors == []  # A cancelled enqueue is no error.
  assert impala_threads() == []
  # The stop dropped what was queued, so both blocked unrolls got in and
  # finished (a close cancels them inside the graph call, and TF logs a
  # warning for each).
  assert driver.totals.unrolls == 3


@pytest.mark.slow
def test_stop_ends_a_learner_blocked_on_an_empty_queue(background):
  driver = small_driver()  # No actors started: nothing queued.
  update = background(driver.update)
  assert update.still_blocked()
  alive, took = timed_stop(driver, background)
  assert alive == [] and took < STOP_S
  error = None
  try:
    update.finish(timeout=STOP_S)
  except tf.errors.OutOfRangeError as e:
    error = e
  assert error is not None, "the blocked update should raise OutOfRange"


@pytest.mark.slow
def test_run_returns_when_stopped_from_outside(background):
  driver = small_driver()
  updates = []
  run = background(
    lambda: driver.run(10**9, lambda out, frames: updates.append(frames))
  )
  wait_until(lambda: len(updates) >= 3, "three updates")
  alive, took = timed_stop(driver, background)
  frames = run.finish(timeout=STOP_S)
  assert alive == [] and took < STOP_S
  assert frames == updates[-1] and frames >= 3 * 4 * 5
  assert impala_threads() == []


@pytest.mark.slow
def test_run_stops_at_its_frame_budget(background):
  driver = small_driver()
  updates = []
  frames = background(
    lambda: driver.run(
      1000, lambda out, frames: updates.append((frames, int(out["train_step"])))
    )
  ).finish(timeout=60)
  per_update = 4 * 5  # batch_size * unroll_length.
  assert 1000 <= frames < 1000 + per_update
  assert [u[0] for u in updates] == [
    per_update * k for k in range(1, len(updates) + 1)
  ]
  assert updates[-1] == (frames, frames // per_update)
  assert (
    int(driver.learner_executor.execute("get_train_step"))
    == frames // per_update
  )
  assert not any(t.is_alive() for t in driver._threads)
  assert impala_threads() == []
  assert driver.totals.unrolls > 0 and driver.actor_errors == []


def test_episode_totals_per_env():
  """Totals as before, and per (actor, env index) since the last take."""
  totals = EpisodeTotals()

  def stats(episodes, returns, lengths):
    return {
      "episodes": sum(episodes),
      "return_sum": sum(returns),
      "length_sum": sum(lengths),
      "env_steps": 6,
      "episodes_per_env": np.array(episodes, np.int64),
      "return_sum_per_env": np.array(returns, np.float32),
      "length_sum_per_env": np.array(lengths, np.int64),
    }

  totals.add(stats([1, 0, 2], [3.0, 0.0, 5.5], [4, 0, 9]), actor=0)
  totals.add(stats([0, 1, 1], [0.0, -1.0, 2.0], [0, 7, 3]), actor=0)
  totals.add(stats([1, 1], [1.0, 2.0], [5, 6]), actor=1)
  assert totals.take() == (7, 12.5, 34)
  per_env = totals.take_per_env()
  np.testing.assert_array_equal(per_env[0]["episodes"], [1, 1, 3])
  np.testing.assert_array_equal(per_env[0]["return_sum"], [3.0, -1.0, 7.5])
  np.testing.assert_array_equal(per_env[0]["length_sum"], [4, 7, 12])
  np.testing.assert_array_equal(per_env[1]["return_sum"], [1.0, 2.0])
  assert totals.take_per_env() == {}


def test_episode_totals_groups_per_unroll_and_env():
  """`take_episodes`: the totals and, per unroll, each env that finished
  episodes, taken together."""
  totals = EpisodeTotals()
  per_env = lambda k, r, n: {
    "episodes": sum(k),
    "return_sum": sum(r),
    "length_sum": sum(n),
    "env_steps": 6,
    "episodes_per_env": np.array(k, np.int64),
    "return_sum_per_env": np.array(r, np.float32),
    "length_sum_per_env": np.array(n, np.int64),
  }
  totals.add(per_env([1, 0, 2], [3.0, 0.0, 5.5], [4, 0, 9]), actor=1)
  totals.add(per_env([0, 1, 1], [0.0, -1.0, 2.0], [0, 7, 3]), actor=0)
  # Without per-env stats: in the totals, in no group.
  totals.add(
    {"episodes": 1, "return_sum": 4.0, "length_sum": 2, "env_steps": 6}
  )
  assert totals.take_episodes() == (
    6,
    13.5,
    25,
    [
      (1, 0, 1, 3.0, 4),
      (1, 2, 2, 5.5, 9),
      (0, 1, 1, -1.0, 7),
      (0, 2, 1, 2.0, 3),
    ],
  )
  assert totals.take_episodes() == (0, 0.0, 0, [])
  assert totals.take() == (0, 0.0, 0)
  # Untaken groups are bounded: the newest are kept.
  totals = EpisodeTotals(max_groups=3)
  for i in range(5):
    totals.add(per_env([1], [float(i)], [1]))
  assert [g[3] for g in totals.take_episodes()[3]] == [2.0, 3.0, 4.0]


@pytest.mark.slow
def test_run_stops_after_max_seconds(background):
  driver = small_driver()
  updates = []
  start = time.monotonic()
  frames = background(
    lambda: driver.run(
      10**9,
      lambda out, frames: updates.append(time.monotonic()),
      max_seconds=2.0,
    )
  ).finish(timeout=60)
  took = time.monotonic() - start
  assert 2.0 <= took < 2.0 + STOP_S, took
  assert frames == len(updates) * 4 * 5 and len(updates) >= 3
  # No update started after the deadline (one may end after it).
  assert updates[-2] < start + 2.2
  assert impala_threads() == []


@pytest.mark.slow
def test_actor_unrolls_report_per_env_stats(background):
  driver = small_driver(num_envs=3, num_actors=1)
  updates = []
  background(
    lambda: driver.run(400, lambda out, frames: updates.append(frames))
  ).finish(timeout=60)
  per_env = driver.totals.take_per_env()
  assert set(per_env) == {0} and per_env[0]["episodes"].shape == (3,)
  assert (per_env[0]["episodes"] > 0).all()  # CartPole ends often.
  assert impala_threads() == []


# The learning run: 2 actors x 32 envs (the embedded default's); the
# learning rate decays linearly to 0 over the run's updates
# (FRAMES / (batch_size * unroll_length)).
FRAMES = 600_000
LEARN_ENVS = 32
LEARN_SEED = 6


# bfloat16 actor weights (the learner and the evaluated policy float32):
# make test-all.
@pytest.mark.parametrize(
  "actor_weights_dtype",
  ["float32", pytest.param("bfloat16", marks=pytest.mark.slow)],
)
def test_learns_cartpole(background, actor_weights_dtype):
  """IMPALA on CartPole-v1 for 600k frames, then 20 greedy episodes on
  fresh envs: mean return >= 150 (500 is the maximum).

  Runs are not deterministic even with fixed seeds (the actor and learner
  threads interleave differently), so the config was chosen for margin
  over many runs of the same code (`seed` below is the config seed; env
  seeds `100 * seed + i`, evaluation seed `1000 + seed`):
  - 600k frames (this test since 2026-11-29, to keep `make test` under 10
    minutes; 800k before): greedy 500 in 3 of 3 runs of seed 6 on the
    AMD host, alone, `pytest` 62-66 s each (800k: 89 s in the suite);
  - this config (2026-11-27, Intel host, alone): greedy 500 for seeds 6,
    0, 2, 7, 1; `run` 38-45 s, 44-54 s with build and evaluation. At 600k
    frames: 493, 364, 302, 493 (seeds 6, 0, 2, 13), `run` ~25 s;
  - with 8 envs per actor (this test until 2026-11-27; `run` ~55 s
    alone), 600k frames: 500, 400, 500, 485, 498, 500, 425, 500, 266, 477,
    500, 500 (seeds 6, 2, 7, 0, 9, 10, 11, 12, 13, 14, 4, 6); 800k: 500
    for seeds 0, 2, 13;
  - without decay, batch 16, lr 2e-3, 8 envs, 600k: 498, 500, 500, 500,
    137 (seeds 0, 1, 3, 5, 6): a late collapse, hence the decay;
  - batch 8, lr 1e-3, no decay, 8 envs: 161-500 at 400k and 174-500 at
    600k.
  """
  config = IMPALAConfig(
    num_actions=2,
    unroll_length=20,
    batch_size=16,
    queue_capacity=64,
    learning_rate=2e-3,
    lr_decay_steps=FRAMES // (16 * 20),
    entropy_cost=0.01,
    epsilon=0.01,
    reward_clipping="none",
    actor_weights_dtype=actor_weights_dtype,
    seed=LEARN_SEED,
  )
  driver = ActorLearnerDriver(
    IMPALABuilder(config),
    lambda i: make_vector_env(
      "CartPole-v1", LEARN_ENVS, seed=100 * LEARN_SEED + i
    ),
    2,
    seed=LEARN_SEED,
  )
  frames = background(lambda: driver.run(FRAMES)).finish(timeout=240)
  assert frames >= FRAMES
  assert driver.actor_errors == [] and impala_threads() == []
  weights = driver.learner_executor.execute("get_weights")
  returns = evaluate(
    IMPALABuilder(config), weights, "CartPole-v1", 20, seed=1000 + LEARN_SEED
  )
  assert returns.shape == (20,)
  assert np.mean(returns) >= 150.0, returns

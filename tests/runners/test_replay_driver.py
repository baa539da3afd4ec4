"""The pacing helpers of distributed-replay loops: when actors and the
learner may go on under `training_intensity`, how long a throttled actor
sleeps, how an idle shard backs off, and the learner's rate they
estimate. (The driver itself: tests/agents/apex/test_driver.py.)"""

import doctest
import types

import pytest

from ingraph_rl.runners import replay_driver
from ingraph_rl.runners.replay_driver import (
  ActorThrottle,
  IdleBackoff,
  RateMeter,
  may_step,
  may_train,
  throttle_wait_s,
  wait_to_train,
)

CONFIG = types.SimpleNamespace(
  training_intensity=4.0, learning_starts=100, train_batch_size=32
)
LEAD = replay_driver.LEARNER_LEAD_BATCHES * 32


def test_docstring_examples():
  assert doctest.testmod(replay_driver).failed == 0


def test_throttle_wait_is_the_time_to_train_what_may_step_waits_for():
  """2 shards: warmup 200 env steps; at 450 env steps may_step needs
  (450 - 200) * 4 = 1000 samples trained; 400 are, at 300 per second:
  2 s to go."""
  assert not may_step(CONFIG, 2, 450, 400)
  assert throttle_wait_s(CONFIG, 2, 450, 400, 300.0, 0.01, 5.0) == (
    pytest.approx(2.0)
  )
  # Clamped to [least, most]; the least while the rate is unknown.
  assert throttle_wait_s(CONFIG, 2, 450, 400, 300.0, 0.01, 0.5) == 0.5
  assert throttle_wait_s(CONFIG, 2, 450, 999, 300.0, 0.01, 5.0) == 0.01
  assert throttle_wait_s(CONFIG, 2, 450, 400, None, 0.01, 5.0) == 0.01
  unthrottled = types.SimpleNamespace(training_intensity=None)
  assert throttle_wait_s(unthrottled, 2, 450, 400, 300.0, 0.01, 5.0) == 0.01


def test_actor_throttle_sleeps_at_the_learners_measured_pace():
  """At 450 env steps (2 shards) the actor waits for 1000 samples: with
  400 trained it sleeps the least (pace unknown); 700 trained a second
  later is 300 per second, so the last 300 take 1 s."""
  throttle = ActorThrottle(CONFIG, 2, (0.01, 5.0))
  assert throttle.wait_s(450, 400, now=10.0) == 0.01
  assert throttle.wait_s(450, 700, now=11.0) == pytest.approx(1.0)
  # Within the intensity it may step: no wait.
  assert throttle.wait_s(450, 1000, now=12.0) == 0.0


def test_idle_backoff_doubles_to_its_cap_and_resets_on_work():
  b = IdleBackoff(0.01, 0.05)
  waits = [b.next_wait(False) for _ in range(5)]
  assert waits == pytest.approx([0.01, 0.02, 0.04, 0.05, 0.05])
  assert b.next_wait(True) == 0.0
  assert b.next_wait(False) == 0.01


def test_rate_meter_measures_between_changes_of_the_count():
  """Readings of an unchanged count (between the learner's updates) do
  not restart the interval: 100 -> 400 over 1.5 s is 200 per second."""
  m = RateMeter()
  assert m.observe(100, now=10.0) is None
  assert m.observe(100, now=10.5) is None
  assert m.observe(100, now=11.0) is None
  assert m.observe(400, now=11.5) == pytest.approx(200.0)
  assert m.observe(400, now=12.0) == pytest.approx(200.0)  # Kept.
  assert m.observe(500, now=12.5) == pytest.approx(100.0)


def test_the_learner_may_train_up_to_its_lead_past_the_intensity():
  """2 shards: warmup 200 env steps; at 450 the intensity allows
  (450 - 200) * 4 = 1000 samples; the learner may start a batch below
  1000 + its lead, not at it."""
  assert may_train(CONFIG, 2, 450, 1000 + LEAD - 1)
  assert not may_train(CONFIG, 2, 450, 1000 + LEAD)
  # Before the warmup ends it may train only what its lead allows.
  assert may_train(CONFIG, 2, 200 - LEAD // 4 + 1, 0)
  assert not may_train(CONFIG, 2, 200 - LEAD // 4, 0)
  unthrottled = types.SimpleNamespace(training_intensity=None)
  assert may_train(unthrottled, 2, 0, 10**9)


@pytest.mark.parametrize("intensity", [0.5, 4.0, 8.0])
def test_actors_or_the_learner_may_always_go_on(intensity):
  """No deadlock: wherever the counts stand, one side may go on (and
  both may, while the learner is within its lead), so the ratio of
  samples trained to env steps holds at the intensity from both sides."""
  c = types.SimpleNamespace(
    training_intensity=intensity, learning_starts=100, train_batch_size=32
  )
  both = 0
  for env_steps in range(0, 1200, 7):
    for trained in range(0, 4000 + 64 * 32, 13):
      actors = may_step(c, 2, env_steps, trained)
      learner = may_train(c, 2, env_steps, trained)
      assert actors or learner, (env_steps, trained)
      both += actors and learner
  assert both > 0


def test_wait_to_train_reads_the_env_steps_until_they_allow_a_batch():
  """It looks at `known` first (no read while allowed), then reads the
  env steps every wait until the learner may train; `stopped` ends the
  wait."""
  reads = []

  def env_steps():
    reads.append(1)
    return 450 + 10 * len(reads)  # 40 more samples allowed per read.

  trained = 1000 + LEAD
  assert wait_to_train(CONFIG, 2, trained - 1, env_steps, None, 0, 450) == 450
  assert reads == []
  assert wait_to_train(CONFIG, 2, trained, env_steps, lambda: False, 0, 450)
  assert reads == [1]  # 460 env steps: 40 more samples, enough.
  reads.clear()
  assert (
    wait_to_train(CONFIG, 2, trained + 100, env_steps, lambda: False, 0) == 480
  )
  assert len(reads) == 3  # 460 and 470 were short of 1100 + LEAD.
  reads.clear()
  assert wait_to_train(CONFIG, 2, trained, env_steps, lambda: True, 0, 450)
  assert reads == []  # Stopped: no wait.

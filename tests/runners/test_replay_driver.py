"""The pacing helpers of distributed-replay loops: how long a throttled
actor sleeps, how an idle shard backs off, and the learner's rate they
estimate. (The driver itself: tests/agents/apex/test_driver.py.)"""

import doctest
import types

import pytest

from ingraph_rl.runners import replay_driver
from ingraph_rl.runners.replay_driver import (
  IdleBackoff,
  RateMeter,
  may_step,
  throttle_wait_s,
)

CONFIG = types.SimpleNamespace(training_intensity=4.0, learning_starts=100)


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

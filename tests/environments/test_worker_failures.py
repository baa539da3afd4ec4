"""WorkerVectorEnv refuses what it cannot send before sending anything,
and a worker that stops answering becomes a `WorkerDiedError` (issue 40).
Real worker processes, real gymnasium envs."""

import os
import signal
import time

import numpy as np
import pytest

from ingraph_rl.environments import WorkerDiedError, WorkerVectorEnv
from ingraph_rl.environments.workers import MAX_SEED


def rollout(env, steps):
  """Observations and rewards of `steps` steps with fixed actions."""
  out = []
  for t in range(steps):
    result = env.step(np.full(env.num_envs, t % 2))
    out.append((result.obs.copy(), result.rewards.copy()))
  return out


@pytest.mark.slow
def test_a_seed_out_of_range_leaves_every_worker_as_it_was():
  """3 envs in 3 workers: with seed 2**63 - 2, env 2's seed would be
  `seed + 2`, past int64. Each call is refused before any worker is
  reset, so the envs continue exactly as twins that never got them."""
  env = WorkerVectorEnv("CartPole-v1", 3, seed=None)
  twin = WorkerVectorEnv("CartPole-v1", 3, seed=None)
  try:
    for e in (env, twin):
      e.reset(seed=7)
      rollout(e, 3)
    for seed in (MAX_SEED - 1, MAX_SEED, 2**64, -1, 1.5, True, "3"):
      with pytest.raises(ValueError, match=r"seed must be None or an int in"):
        env.reset(seed=seed)
    for (obs, rew), (twin_obs, twin_rew) in zip(
      rollout(env, 6), rollout(twin, 6)
    ):
      np.testing.assert_array_equal(obs, twin_obs)
      np.testing.assert_array_equal(rew, twin_rew)
    # The largest seed that fits is taken.
    env.reset(seed=MAX_SEED - 2)
  finally:
    env.close()
    twin.close()


@pytest.mark.slow
def test_a_stopped_worker_is_a_worker_died_error_naming_it():
  """SIGSTOP one worker: the step raises within the timeout (not never),
  naming the worker, its env, the env id and the timeout; the worker is
  killed, and the next call says it died."""
  env = WorkerVectorEnv("CartPole-v1", 2, seed=0)
  env.step_timeout_s = 2.0
  try:
    env.reset(seed=0)
    stopped = env.pids[1]
    os.kill(stopped, signal.SIGSTOP)
    t0 = time.monotonic()
    with pytest.raises(WorkerDiedError) as e:
      env.step(np.zeros(2, np.int64))
    waited = time.monotonic() - t0
    assert 1.5 < waited < 10, waited
    message = str(e.value)
    for part in ("env worker 1", f"pid {stopped}", "env 1 of 2", "CartPole-v1"):
      assert part in message, message
    assert "did not answer within 2 s while stepping" in message
    with pytest.raises(WorkerDiedError, match="env worker 1 .* died"):
      env.step(np.zeros(2, np.int64))
  finally:
    env.close()


def test_the_default_timeout_is_generous():
  assert WorkerVectorEnv.step_timeout_s >= 60

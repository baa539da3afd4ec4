"""ProcessVectorEnv steps any VectorEnv in a child process with the same
results as stepping it here, and cleans up."""

import functools

import numpy as np
import psutil
import pytest

from ingraph_rl.environments import make_vector_env
from ingraph_rl.environments.process_env import ProcessVectorEnv


def test_same_results_as_in_process_and_closes():
  make = functools.partial(make_vector_env, "CartPole-v1", 3, seed=5,
                           max_episode_steps=7)
  local, remote = make(), ProcessVectorEnv(make)
  assert remote.num_envs == 3
  assert remote.observation_space == local.observation_space
  assert remote.action_space == local.action_space
  np.testing.assert_array_equal(remote.reset(), local.reset())
  rng = np.random.default_rng(0)
  for _ in range(20):                  # Crosses truncations at step 7.
    actions = rng.integers(0, 2, 3)
    a, b = remote.step(actions), local.step(actions)
    for field, x, y in zip(a._fields, a, b):
      np.testing.assert_array_equal(x, y, err_msg=field)
  child = psutil.Process(remote.pid)
  assert child.is_running()
  remote.close()
  assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
  with pytest.raises(RuntimeError, match="closed"):
    remote.step(np.zeros(3, np.int64))
  local.close()


def test_atari_in_a_process():
  make = functools.partial(make_vector_env, "atari:pong", 2, seed=1)
  env = ProcessVectorEnv(make)
  try:
    obs = env.reset()
    assert obs.shape == (2, 84, 84, 4) and obs.dtype == np.uint8
    result = env.step(np.zeros(2, np.int64))
    assert result.obs.shape == (2, 84, 84, 4)
  finally:
    env.close()


def test_errors_in_the_child_are_reported():
  make = functools.partial(make_vector_env, "NoSuchEnv-v0", 1)
  with pytest.raises(RuntimeError, match="env process"):
    ProcessVectorEnv(make)

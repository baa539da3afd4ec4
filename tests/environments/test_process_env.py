"""Envs in processes (`--env_processes`, DM Lab always): the actors' envs
come from env worker processes with the same results as stepping them in
this process."""

import numpy as np
import psutil
import pytest

from ingraph_rl.environments import (
  GymnasiumVectorEnv,
  WorkerVectorEnv,
  make_vector_env,
)
from ingraph_rl.runners.environments import make_actor_env


def test_gymnasium_envs_get_one_worker_each_with_the_same_results():
  local = make_actor_env("CartPole-v1", 3, seed=5, max_episode_steps=7)
  remote = make_actor_env(
    "CartPole-v1", 3, seed=5, processes=True, max_episode_steps=7
  )
  try:
    assert isinstance(local, GymnasiumVectorEnv)
    assert isinstance(remote, WorkerVectorEnv) and remote.num_workers == 3
    np.testing.assert_array_equal(remote.reset(), local.reset())
    rng = np.random.default_rng(0)
    for _ in range(20):  # Crosses truncations at step 7.
      actions = rng.integers(0, 2, 3)
      a, b = remote.step(actions), local.step(actions)
      for field, x, y in zip(a._fields, a, b):
        np.testing.assert_array_equal(x, y, err_msg=field)
    children = [psutil.Process(pid) for pid in remote.pids]
  finally:
    remote.close()
    local.close()
  _, alive = psutil.wait_procs(children, timeout=5)
  assert not alive


@pytest.mark.slow
def test_atari_gets_one_worker_per_actor():
  env = make_actor_env("atari:pong", 2, seed=1, processes=True)
  ref = make_vector_env("atari:pong", 2, seed=1, frameskip=4)
  try:
    assert isinstance(env, WorkerVectorEnv) and env.num_workers == 1
    np.testing.assert_array_equal(env.reset(), ref.reset())
    result = env.step(np.zeros(2, np.int64))
    np.testing.assert_array_equal(
      result.obs, ref.step(np.zeros(2, np.int64)).obs
    )
  finally:
    env.close()
    ref.close()


def test_dmlab_always_steps_in_workers():
  env = make_actor_env(
    "dmlab:seekavoid_arena_01",
    2,
    seed=0,
    lab_module="ingraph_rl.testing.fake_deepmind_lab",
    width=16,
    height=12,
  )
  try:
    assert isinstance(env, WorkerVectorEnv) and env.num_workers == 2
    assert env.specs[0].kwargs["num_action_repeats"] == 4
    env.reset()
    assert env.step(np.zeros(2, np.int64)).obs.shape == (2, 12, 16, 3)
  finally:
    env.close()


def test_actors_continue_the_level_cycle_of_a_level_set():
  from ingraph_rl.environments import dmlab30

  env = make_actor_env(
    "dmlab:dmlab30",
    2,
    seed=0,
    level_offset=29,
    lab_module="ingraph_rl.testing.fake_deepmind_lab",
    width=16,
    height=12,
  )
  try:
    assert env.levels == dmlab30.env_levels(2, offset=29)
    assert env.levels[1].endswith("rooms_collect_good_objects_train")
  finally:
    env.close()

"""The evaluation's envs: gymnasium envs in this process, DM Lab envs from
the same factory as the actors' (a worker process each), all behind
gymnasium's single-env API."""

import numpy as np

from ingraph_rl.environments import WorkerVectorEnv, make_vector_env
from ingraph_rl.runners.evaluation import make_eval_envs
from ingraph_rl.spaces import IntBox

FAKE = dict(
  lab_module="ingraph_rl.testing.fake_deepmind_lab",
  width=16,
  height=12,
  config={"episodeLengthFrames": "20"},
)


def test_dmlab_eval_envs_are_worker_envs_seeded_seed_plus_i():
  envs, space = make_eval_envs("dmlab:seekavoid_arena_01", 2, seed=7, **FAKE)
  ref = make_vector_env("dmlab:seekavoid_arena_01", 2, seed=7, **FAKE)
  try:
    assert space == IntBox(256, (12, 16, 3), dtype=np.uint8)
    assert all(isinstance(e.env, WorkerVectorEnv) for e in envs)
    first = [env.reset(seed=7 + i)[0] for i, env in enumerate(envs)]
    np.testing.assert_array_equal(np.stack(first), ref.reset())
    # 20 frames at 4 repeats: 5 steps, the last one terminates.
    total = np.zeros(2)
    for t in range(5):
      expected = ref.step(np.array([1, 2]))
      for i, env in enumerate(envs):
        obs, reward, terminated, truncated, _ = env.step([1, 2][i])
        total[i] += reward
        assert reward == expected.rewards[i]
        assert terminated == expected.terminated[i] == (t == 4)
        assert not truncated
        if t < 4:
          np.testing.assert_array_equal(obs, expected.obs[i])
    np.testing.assert_array_equal(total, expected.episode_returns)
  finally:
    ref.close()
    for env in envs:
      env.close()


def test_gymnasium_eval_envs_are_plain_gymnasium_envs():
  envs, space = make_eval_envs("CartPole-v1", 2)
  try:
    assert space.shape == (4,)
    assert envs[0].reset(seed=3)[0].shape == (4,)
    assert type(envs[0]).__module__.startswith("gymnasium")
  finally:
    for env in envs:
      env.close()

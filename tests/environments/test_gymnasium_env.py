"""GymnasiumVectorEnv against plain single gymnasium environments."""

import gymnasium as gym
import numpy as np
import pytest

from ingraph_rl.environments import (
  AtariVectorEnv,
  GymnasiumVectorEnv,
  StepResult,
  game_name,
  make_vector_env,
)
from ingraph_rl.spaces import FloatBox, IntBox

NUM_ENVS = 4
SEED = 7
MAX_STEPS = 20


def reference_rollout(actions, seed=SEED, max_episode_steps=MAX_STEPS):
  """Single envs seeded with seed + i, reset unseeded after an episode end."""
  num_steps, n = actions.shape
  envs = [
    gym.make("CartPole-v1", max_episode_steps=max_episode_steps)
    for _ in range(n)
  ]
  obs = np.stack([e.reset(seed=seed + i)[0] for i, e in enumerate(envs)])
  ret, length = np.zeros(n), np.zeros(n, np.int64)
  steps = []
  for t in range(num_steps):
    out = {k: [] for k in StepResult._fields}
    for i, e in enumerate(envs):
      o, r, term, trunc, _ = e.step(int(actions[t, i]))
      ret[i] += r
      length[i] += 1
      final = o
      if term or trunc:
        out["episode_returns"].append(ret[i])
        out["episode_lengths"].append(length[i])
        ret[i], length[i] = 0.0, 0
        o, _ = e.reset()
      else:
        out["episode_returns"].append(0.0)
        out["episode_lengths"].append(0)
      out["obs"].append(o)
      out["final_obs"].append(final)
      out["rewards"].append(r)
      out["terminated"].append(term)
      out["truncated"].append(trunc)
    steps.append(StepResult(**{k: np.array(v) for k, v in out.items()}))
  for e in envs:
    e.close()
  return obs, steps


@pytest.mark.parametrize("asynchronous,num_steps", [(False, 600), (True, 150)])
def test_matches_single_gymnasium_envs(asynchronous, num_steps):
  actions = np.random.default_rng(0).integers(0, 2, (num_steps, NUM_ENVS))
  ref_obs, ref_steps = reference_rollout(actions)
  env = GymnasiumVectorEnv(
    "CartPole-v1",
    NUM_ENVS,
    seed=SEED,
    asynchronous=asynchronous,
    max_episode_steps=MAX_STEPS,
  )
  try:
    # reset() without a seed uses the constructor's seed.
    np.testing.assert_array_equal(env.reset(), ref_obs)
    n_term = n_trunc = 0
    for t in range(num_steps):
      result = env.step(actions[t])
      ref = ref_steps[t]
      assert result.obs.dtype == np.float32
      assert result.final_obs.dtype == np.float32
      assert result.rewards.dtype == np.float32
      assert result.terminated.dtype == np.bool_
      assert result.truncated.dtype == np.bool_
      assert result.episode_returns.dtype == np.float32
      assert result.episode_lengths.dtype == np.int32
      for field in StepResult._fields:
        np.testing.assert_array_equal(
          getattr(result, field),
          getattr(ref, field).astype(getattr(result, field).dtype),
          err_msg=f"{field} at step {t}",
        )
      done = result.terminated | result.truncated
      # final_obs equals obs exactly where no episode ended.
      np.testing.assert_array_equal(result.final_obs[~done], result.obs[~done])
      assert not np.any(
        np.all(result.final_obs[done] == result.obs[done], axis=-1)
      )
      n_term += result.terminated.sum()
      n_trunc += result.truncated.sum()
    # Both kinds of episode end happened, several times.
    assert n_term >= 3 and n_trunc >= 3, (n_term, n_trunc)
  finally:
    env.close()


def test_truncation_is_time_limit_not_termination():
  env = GymnasiumVectorEnv("CartPole-v1", 2, seed=0, max_episode_steps=5)
  try:
    env.reset()
    # Alternating pushes keep the pole up: only the time limit ends episodes.
    for t in range(5):
      result = env.step(np.full(2, t % 2))
    assert result.truncated.all() and not result.terminated.any()
    np.testing.assert_array_equal(result.episode_lengths, [5, 5])
    np.testing.assert_array_equal(result.episode_returns, [5.0, 5.0])
    result = env.step(np.zeros(2, np.int64))
    assert not (result.truncated | result.terminated).any()
    np.testing.assert_array_equal(result.episode_lengths, [0, 0])
    np.testing.assert_array_equal(result.final_obs, result.obs)
  finally:
    env.close()


def test_spaces_are_ours_per_env():
  env = GymnasiumVectorEnv("CartPole-v1", 3)
  try:
    assert isinstance(env.observation_space, FloatBox)
    assert env.observation_space.shape == (4,)
    assert env.observation_space.dtype == np.float32
    assert not env.observation_space.has_batch_rank
    assert isinstance(env.action_space, IntBox)
    assert env.action_space.num_categories == 2
    obs = env.reset(seed=1)
    assert obs.shape == (3, 4)
    assert all(env.observation_space.contains(o) for o in obs)
  finally:
    env.close()


def test_reset_seed_overrides_and_none_continues():
  a = GymnasiumVectorEnv("CartPole-v1", 2, seed=0)
  b = GymnasiumVectorEnv("CartPole-v1", 2, seed=0)
  try:
    first = a.reset()
    np.testing.assert_array_equal(b.reset(seed=0), first)
    assert not np.array_equal(b.reset(seed=5), first)
    # An int seed seeds environment i with seed + i.
    np.testing.assert_array_equal(
      a.reset(seed=5),
      [gym.make("CartPole-v1").reset(seed=s)[0] for s in (5, 6)],
    )
    # A later reset() without a seed does not re-seed with the constructor's.
    assert not np.array_equal(a.reset(), first)
  finally:
    a.close()
    b.close()


def test_make_vector_env_dispatch():
  env = make_vector_env("CartPole-v1", 2, seed=3)
  try:
    assert isinstance(env, GymnasiumVectorEnv) and env.num_envs == 2
    np.testing.assert_array_equal(
      env.reset(), GymnasiumVectorEnv("CartPole-v1", 2, seed=3).reset()
    )
  finally:
    env.close()
  for env_id, sticky in [("atari:pong", 0.0), ("ALE/Pong-v5", 0.25)]:
    env = make_vector_env(env_id, 1, seed=0)
    try:
      assert isinstance(env, AtariVectorEnv)
      assert env.game == "pong" and env.num_envs == 1
      assert env.repeat_action_probability == sticky
    finally:
      env.close()


def test_game_names():
  assert game_name("ALE/Pong-v5") == "pong"
  assert game_name("atari:pong") == "pong"
  assert game_name("ALE/MsPacman-v5") == "ms_pacman"
  assert game_name("SpaceInvadersNoFrameskip-v4") == "space_invaders"
  assert game_name("breakout") == "breakout"

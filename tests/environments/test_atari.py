"""AtariVectorEnv (ale-py's C++ vector env) with Pong."""

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.environments import AtariVectorEnv
from ingraph_rl.environments.atari import channels_last
from ingraph_rl.environments.in_graph import tf_reset, tf_step
from ingraph_rl.spaces import IntBox

STEPS_PER_EPISODE = 70  # max_num_frames_per_episode = 4 * 70 (frameskip 4)


def test_pong_steps_layout_autoreset_and_statistics():
  env = AtariVectorEnv(
    "pong", 2, seed=0, max_num_frames_per_episode=4 * STEPS_PER_EPISODE
  )
  try:
    space = env.observation_space
    assert isinstance(space, IntBox) and space.dtype == np.uint8
    assert space.shape == (84, 84, 4) and not space.has_batch_rank
    assert isinstance(env.action_space, IntBox)
    assert env.action_space.num_categories == 6
    obs = env.reset()
    assert obs.shape == (2, 84, 84, 4) and obs.dtype == np.uint8
    running = np.zeros(2)
    ends, rewards_seen = 0, 0
    for t in range(2 * STEPS_PER_EPISODE):
      prev = obs
      result = env.step(np.array([t % 6, (t + 3) % 6]))
      obs = result.obs
      assert obs.shape == result.final_obs.shape == (2, 84, 84, 4)
      assert obs.dtype == result.final_obs.dtype == np.uint8
      assert result.rewards.dtype == np.float32
      assert result.episode_returns.dtype == np.float32
      assert result.episode_lengths.dtype == np.int32
      assert all(space.contains(o) for o in obs)
      # Channels-last frame stack, oldest first: the episode's last stack is
      # the previous stack shifted by one frame (true for final_obs, not for
      # the reset obs of a new episode).
      np.testing.assert_array_equal(result.final_obs[..., :3], prev[..., 1:])
      running += result.rewards
      rewards_seen += np.count_nonzero(result.rewards)
      done = result.terminated | result.truncated
      if (t + 1) % STEPS_PER_EPISODE == 0:
        # Time limit: truncated, not terminated.
        assert result.truncated.all() and not result.terminated.any()
        np.testing.assert_array_equal(
          result.episode_lengths, [STEPS_PER_EPISODE] * 2
        )
        np.testing.assert_array_equal(result.episode_returns, running)
        assert not np.array_equal(result.final_obs, obs)
        # A new episode starts with an empty stack but its first frame.
        assert not obs[..., :3].any() and obs[..., 3].any()
        running[:] = 0
        ends += 1
      else:
        assert not done.any()
        np.testing.assert_array_equal(result.episode_lengths, [0, 0])
        np.testing.assert_array_equal(result.episode_returns, [0.0, 0.0])
        np.testing.assert_array_equal(result.final_obs, obs)
    assert ends == 2
    assert rewards_seen >= 1  # Pong scores points within ~60 steps.
  finally:
    env.close()


def test_pong_same_seed_same_frames_and_in_graph_shapes():
  a = AtariVectorEnv("pong", 2, seed=4)
  b = AtariVectorEnv("pong", 2, seed=4)
  try:
    step = tf.function(lambda actions: tf_step(a, actions))
    obs_a = tf_reset(a, 4)
    assert obs_a.dtype == tf.uint8 and obs_a.shape == (2, 84, 84, 4)
    np.testing.assert_array_equal(obs_a.numpy(), b.reset(seed=4))
    for t in range(10):
      actions = np.array([t % 6, 2], np.int64)
      result = step(tf.constant(actions))
      assert result.obs.dtype == tf.uint8
      assert result.final_obs.shape == (2, 84, 84, 4)
      np.testing.assert_array_equal(result.obs.numpy(), b.step(actions).obs)
  finally:
    a.close()
    b.close()


@pytest.mark.parametrize("stack", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("little_endian", [True, False])
def test_channels_last_equals_transpose(stack, little_endian, monkeypatch):
  monkeypatch.setattr(np, "little_endian", little_endian)
  rng = np.random.default_rng(stack)
  obs = rng.integers(0, 256, (3, stack, 7, 5), dtype=np.uint8)
  before = obs.copy()
  out = channels_last(obs)
  assert out.dtype == np.uint8 and out.flags.c_contiguous
  np.testing.assert_array_equal(out, np.transpose(obs, (0, 2, 3, 1)))
  np.testing.assert_array_equal(obs, before)  # The input is left alone.


def test_channels_last_rgb_is_frame_major():
  obs = np.arange(2 * 4 * 3 * 5 * 3, dtype=np.uint8).reshape(2, 4, 3, 5, 3)
  out = channels_last(obs)
  assert out.shape == (2, 3, 5, 12) and out.flags.c_contiguous
  for k in range(4):
    np.testing.assert_array_equal(out[..., 3 * k : 3 * k + 3], obs[:, k])

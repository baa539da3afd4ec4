"""`runners.evaluation.mean_greedy_return`: episodes side by side, the
first of each env counted, against gymnasium envs played one by one."""

import gymnasium as gym
import numpy as np
import pytest

from ingraph_rl.runners.evaluation import mean_greedy_return


def lean(obs):
  """Push the cart toward the pole's lean: episodes of ~40-200 steps."""
  return (np.asarray(obs)[..., 2] > 0).astype(np.int64)


def reference(num_episodes, seed):
  """Env i: gymnasium's CartPole from reset(seed=seed + i), one episode."""
  returns = []
  for i in range(num_episodes):
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed + i)
    total, done = 0.0, False
    while not done:
      obs, reward, terminated, truncated, _ = env.step(int(lean(obs)))
      total += reward
      done = terminated or truncated
    returns.append(total)
    env.close()
  return returns


@pytest.mark.parametrize("num_episodes", [1, 5])
def test_counts_the_first_episode_of_each_env(num_episodes):
  calls = []

  def act(obs):
    calls.append(len(obs))
    return lean(obs)

  want = reference(num_episodes, seed=7)
  assert len(set(want)) > 1 or num_episodes == 1  # Envs differ.
  got = mean_greedy_return(act, "CartPole-v1", num_episodes, seed=7)
  assert got == pytest.approx(np.mean(want))
  # One call per step for all envs, until the longest episode ended.
  assert set(calls) == {num_episodes} and len(calls) == max(want)

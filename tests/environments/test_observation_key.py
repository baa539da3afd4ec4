"""`SelectedObservation`: one leaf of a Dict observation as the
observation, and a clear error for a key that is not a box leaf."""

import numpy as np
import pytest

from ingraph_rl.environments import make_vector_env
from ingraph_rl.environments.observation_key import SelectedObservation
from ingraph_rl.errors import SpaceError
from ingraph_rl.testing.instruction_env import InstructionVectorEnv


def test_observations_and_final_observations_are_the_leaf():
  kwargs = dict(seed=4, episode_length=7, max_episode_steps=5)
  full = InstructionVectorEnv(3, **kwargs)
  env = SelectedObservation(
    InstructionVectorEnv(3, **kwargs), "RGB_INTERLEAVED"
  )
  assert env.observation_space == full.observation_space["RGB_INTERLEAVED"]
  assert env.num_envs == 3 and env.action_space == full.action_space
  np.testing.assert_array_equal(
    env.reset(seed=1), full.reset(seed=1)["RGB_INTERLEAVED"]
  )
  rng = np.random.default_rng(0)
  ended = 0
  for _ in range(40):
    actions = rng.integers(0, full.action_space.num_categories, 3)
    a, b = env.step(actions), full.step(actions)
    np.testing.assert_array_equal(a.obs, b.obs["RGB_INTERLEAVED"])
    np.testing.assert_array_equal(a.final_obs, b.final_obs["RGB_INTERLEAVED"])
    for field in ("rewards", "terminated", "truncated", "episode_returns"):
      np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    ended += int(np.sum(b.terminated | b.truncated))
  assert ended > 0  # Final observations were compared at episode ends.
  env.close()
  full.close()


def test_a_key_that_is_not_a_box_leaf_is_named():
  with pytest.raises(SpaceError, match=r"'pixels'.*INSTR.*RGB_INTERLEAVED"):
    SelectedObservation(InstructionVectorEnv(1), "pixels")
  with pytest.raises(SpaceError, match="not a numeric box"):
    SelectedObservation(InstructionVectorEnv(1), "INSTR")
  cartpole = make_vector_env("CartPole-v1", 1)
  with pytest.raises(SpaceError, match="observation_key 'x'"):
    SelectedObservation(cartpole, "x")
  cartpole.close()

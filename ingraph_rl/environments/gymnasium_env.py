"""gymnasium vector environments behind `VectorEnv`."""

import numpy as np

from ingraph_rl.environments.vector_env import (
  EpisodeStatistics,
  StepResult,
  VectorEnv,
)
from ingraph_rl.spaces import from_gymnasium


class GymnasiumVectorEnv(VectorEnv):
  """`num_envs` copies of a registered gymnasium environment.

  Built with `gymnasium.make_vec(env_id, num_envs, vectorization_mode=
  "sync" | "async", vector_kwargs={"autoreset_mode": SAME_STEP, ...},
  **make_kwargs)`, so `make_kwargs` go to `gymnasium.make` (e.g.
  `max_episode_steps=20` for a `TimeLimit`, whose ends are *truncations*).
  Environment i is seeded with `seed + i` at the first reset, exactly like
  `gymnasium.make(env_id).reset(seed=seed + i)`; later automatic resets are
  unseeded (they continue each environment's random stream).

  `final_obs` comes from gymnasium's `infos["final_obs"]` (masked by
  `infos["_final_obs"]`); episode returns and lengths are counted here (sum
  of the float rewards in float64, reported as float32).
  """

  def __init__(
    self,
    env_id,
    num_envs,
    seed=0,
    asynchronous=False,
    vector_kwargs=None,
    **make_kwargs,
  ):
    import gymnasium as gym

    self.env_id = env_id
    self.num_envs = int(num_envs)
    self._seed = seed
    self._needs_seed = True
    kwargs = dict(vector_kwargs or {})
    kwargs["autoreset_mode"] = gym.vector.AutoresetMode.SAME_STEP
    self._env = gym.make_vec(
      env_id,
      self.num_envs,
      vectorization_mode="async" if asynchronous else "sync",
      vector_kwargs=kwargs,
      **make_kwargs,
    )
    self.gym_env = self._env
    self.observation_space = from_gymnasium(self._env.single_observation_space)
    self.action_space = from_gymnasium(self._env.single_action_space)
    self._obs_dtype = self.observation_space.dtype
    self._action_dtype = getattr(self.action_space, "dtype", None)
    self._stats = EpisodeStatistics(self.num_envs)

  def reset(self, seed=None):
    if seed is None and self._needs_seed:
      seed = self._seed
    self._needs_seed = False
    obs, _ = self._env.reset(seed=seed)
    self._stats.reset()
    return np.asarray(obs, self._obs_dtype)

  def step(self, actions):
    actions = np.asarray(actions, self._action_dtype)
    obs, rewards, terminated, truncated, infos = self._env.step(actions)
    obs = np.asarray(obs, self._obs_dtype)
    terminated = np.asarray(terminated, np.bool_)
    truncated = np.asarray(truncated, np.bool_)
    done = terminated | truncated
    final_obs = obs
    if done.any():
      final_obs = obs.copy()
      mask = np.asarray(infos["_final_obs"], np.bool_)
      if not np.array_equal(mask, done):
        raise RuntimeError(
          f"gymnasium final_obs mask {mask} does not match "
          f"terminated | truncated {done}"
        )
      for i in np.flatnonzero(mask):
        final_obs[i] = infos["final_obs"][i]
    rewards = np.asarray(rewards, np.float64)
    returns, lengths = self._stats.update(rewards, done)
    return StepResult(
      obs,
      rewards.astype(np.float32),
      terminated,
      truncated,
      final_obs,
      returns,
      lengths,
    )

  def close(self):
    try:
      self._env.close()
    except (BrokenPipeError, EOFError, ConnectionError, OSError):
      # Env subprocesses already gone (e.g. a terminal's Ctrl-C reached
      # them): make sure none is left behind.
      try:
        self._env.close(terminate=True)
      except Exception:
        pass
